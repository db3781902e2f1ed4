"""``_interaction.py``: the typed result of one turn, and what a plain tuple is turned into."""

from __future__ import annotations

import copy
import json
import pickle
from types import MappingProxyType

import pytest

from interactions_core import InteractionResult
from interactions_core._interaction import NO_EXTRA, as_score


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


def test_a_should_terminate_of_another_bool_type_is_named_with_its_module() -> None:
    """numpy 2 names its bool type ``bool``: "must be a bool, got bool" read as nonsense."""
    bool_ = type("bool", (), {"__module__": "numpy"})
    with pytest.raises(TypeError, match=r"got numpy\.bool; pass bool\(value\)"):
        InteractionResult.coerce((bool_(), "x", 1.0, {}))
    with pytest.raises(TypeError, match=r"got int; pass"):
        InteractionResult.coerce((1, "x", 1.0, {}))


def test_a_result_without_extra_shares_one_read_only_empty_dict() -> None:
    a, b = InteractionResult(True, "x", 1.0), InteractionResult(True, "x", 1.0)
    assert a.extra == {} and a.extra is b.extra is NO_EXTRA and isinstance(a.extra, dict)
    for change in (
        lambda e: e.__setitem__("k", 1),
        lambda e: e.update(k=1),
        lambda e: e.setdefault("k", 1),
        lambda e: e.__ior__({"k": 1}),
        lambda e: e.pop("k", None),
        lambda e: e.popitem(),
        lambda e: e.clear(),
        lambda e: e.__delitem__("k"),
    ):
        with pytest.raises(TypeError, match=r"read-only empty one; build the result with extra="):
            change(a.extra)
    assert b.extra == {} and len(NO_EXTRA) == 0
    # Copies, pickles and JSON keep it a constant: the same shared empty extra.
    for again in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert again == a and again.extra is NO_EXTRA
    assert json.dumps(a) == '[true, "x", 1.0, {}]' and repr(a.extra) == "{}"
    mine = dict(a.extra)
    mine["k"] = 1
    assert type(mine) is dict and a.extra == {}


def test_extra_given_is_the_results_own_dict() -> None:
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


def test_real_numbers_that_are_not_float_subclasses_are_scores() -> None:
    # numpy's float32 and int64 (registered as numbers.Real, unlike float64 not a float
    # subclass) were refused as "must be a float"; Fraction is a real number too.
    from fractions import Fraction

    assert as_score(Fraction(1, 4)) == 0.25 and type(as_score(Fraction(1, 4))) is float
    result = InteractionResult.coerce((True, "ok", Fraction(3, 4), {}))
    assert result.score == 0.75 and type(result.score) is float
    numpy = pytest.importorskip("numpy", reason="numpy's scalar types need numpy")
    for value, expected in [(numpy.float32(0.5), 0.5), (numpy.int64(3), 3.0)]:
        score = as_score(value)
        assert score == expected and type(score) is float, (value, score)
    with pytest.raises(TypeError, match="must be a float, got bool"):
        as_score(numpy.bool_(True))
    with pytest.raises(ValueError, match="must be finite"):
        as_score(numpy.float32("inf"))
