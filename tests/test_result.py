"""``_interaction.py``: the typed result of one turn, and what a plain tuple is turned into."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from interactions_core import InteractionResult
from interactions_core._interaction import as_score


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


def test_extra_is_a_fresh_dict_of_each_result() -> None:
    a, b = InteractionResult(True, "x", 1.0), InteractionResult(True, "x", 1.0)
    assert a.extra == {} and a.extra is not b.extra
    mapping = MappingProxyType({"k": 1})
    copied = InteractionResult(False, "y", 0.0, mapping)
    assert type(copied.extra) is dict and copied.extra == {"k": 1}
    own = {"k": 2}
    assert InteractionResult(False, "y", 0.0, own).extra is own
    assert InteractionResult(True, "x", 1.0) == (True, "x", 1.0, {})


def test_as_score_accepts_real_numbers_only() -> None:
    assert as_score(1) == 1.0 and type(as_score(1)) is float
    assert as_score(0.25) == 0.25
    with pytest.raises(TypeError, match="the score must be a float, got bool"):
        as_score(True)
    with pytest.raises(TypeError, match="reward must be a float, got str"):
        as_score("1", "reward")
    with pytest.raises(ValueError, match="must be finite, got nan"):
        as_score(float("nan"))
