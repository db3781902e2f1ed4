"""``result.py``: the typed result of one turn, and what a plugin's plain tuple is turned into."""

from __future__ import annotations

import pytest

from interactions_core import InteractionResult


def test_result_coercion_checks_types():
    assert InteractionResult.coerce((True, "x", 1, None)) == (True, "x", 1.0, {})
    assert type(InteractionResult.coerce([False, "x", 0.5, {}]).score) is float
    for bad, word in (
        ((1, "x", 1.0, {}), "should_terminate"),
        ((True, None, 1.0, {}), "content"),
        ((True, "x", "1", {}), "score"),
        ((True, "x"), "got tuple"),
        ((True, "x", 1.0, []), "extra"),
    ):
        with pytest.raises(TypeError, match=word):
            InteractionResult.coerce(bad)
    for score in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="finite"):
            InteractionResult.coerce((True, "x", score, {}))
