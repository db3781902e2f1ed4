"""The ``results`` and ``scores`` checks (``_check_results.py``): typed turns, float scores."""

from __future__ import annotations

from typing import Any

import pytest
from checker_fakes import ExactInteraction, VerlStyleInteraction, assert_reported

from interactions_core import InteractionResult
from interactions_core.testing import check_interaction


class IntScoreInteraction(ExactInteraction):
    async def score(self, state: Any, **kwargs: Any) -> float:
        return 0  # type: ignore[return-value]


class NanScoreInteraction(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        return InteractionResult(False, "", float("nan"))


class WrongShapeInteraction(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        return ("not", "a", "result")


class BoolTurnScore(VerlStyleInteraction):
    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kw: Any):
        self._state(instance_id)
        return True, "done", True, {}


class IntTurnScore(VerlStyleInteraction):
    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kw: Any):
        self._state(instance_id)
        return True, "done", 1, {}


class ContentNotText(ExactInteraction):
    """Builds its result itself: nothing on the way checks the field types."""

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        return InteractionResult(False, 42, 0.0)  # type: ignore[arg-type]


class NanTupleScore(VerlStyleInteraction):
    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kw: Any):
        self._state(instance_id)
        return True, "done", float("nan"), {}


class RaisesOnATurn(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        raise RuntimeError("the judge is down")


@pytest.mark.parametrize(
    ("cls", "check", "fragment"),
    [
        (IntScoreInteraction, "scores", "calculate_score's result is an int"),
        (NanScoreInteraction, "scores", "not finite"),
        (WrongShapeInteraction, "results", "must return (should_terminate"),
    ],
)
def test_each_broken_rule_is_reported(cls: type, check: str, fragment: str) -> None:
    assert_reported(cls, check, fragment)


def test_an_int_score_is_named_with_the_float_to_return() -> None:
    report = check_interaction(IntScoreInteraction, raise_on_error=False)
    [message] = [v.message for v in report.violations if v.check == "scores"]
    assert "return a float (0.0, not 0)" in message
    assert "first seen in episode 1" in message


def test_an_int_turn_score_is_judged_as_returned() -> None:
    """Coercion turns 1 into 1.0; the check sees the value the plugin returned."""
    report = check_interaction(IntTurnScore, skip=["messages"], raise_on_error=False)
    assert [v.check for v in report.violations] == ["scores"], report.format()
    assert "the turn score of generate_response is an int" in report.violations[0].message


def test_a_bool_turn_score_is_a_wrong_result() -> None:
    report = check_interaction(BoolTurnScore, skip=["messages"], raise_on_error=False)
    assert [v.check for v in report.violations] == ["results"], report.format()
    assert "score must be a float, got bool" in report.violations[0].message


def test_a_wrongly_typed_field_is_named_once_for_every_episode() -> None:
    report = check_interaction(ContentNotText, skip=["messages"], raise_on_error=False)
    results = [v for v in report.violations if v.check == "results"]
    assert len(results) == 1, report.format()
    assert results[0].message == (
        "generate_response's content must be a str, got int (first seen in episode 1, turn 1)"
    )
    assert report.format().count("more times)") == 1  # every later sighting is counted


def test_a_turn_that_raises_is_reported_where_first_seen() -> None:
    report = check_interaction(RaisesOnATurn, skip=["messages"], raise_on_error=False)
    messages = [v.message for v in report.violations if v.check == "results"]
    assert messages == [
        "generate_response raised RuntimeError: the judge is down (first seen in episode 1, turn 1)"
    ], report.format()


def test_a_score_that_is_not_finite_in_a_tuple_is_a_scores_violation() -> None:
    """``coerce`` refuses NaN with a ValueError; that is the plugin's fault, not the check's."""
    report = check_interaction(NanTupleScore, raise_on_error=False)
    assert {v.check for v in report.violations} == {"scores"}, report.format()
    assert report.violations[0].message.startswith(
        "the turn score of generate_response is not finite (first seen in episode 1, turn 1: nan)"
    )
