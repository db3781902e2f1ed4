"""Playing one scripted episode (``_rules_play.play``): through ``Session`` and the
runtime's episode step, raw values kept, traced."""

from __future__ import annotations

from typing import Any

import pytest
from checker_fakes import ExactInteraction, VerlStyleInteraction

from interactions_core import InteractionResult
from interactions_core.testing import ConformanceReport, Episode, _rules_play, acheck_interaction
from interactions_core.testing._rules import CheckContext, Target
from interactions_core.testing._rules_play import play


def context(cls: type) -> CheckContext:
    target = Target("label", cls, lambda: cls({}), shared=False)
    return CheckContext(target, {}, [], ConformanceReport("label"), 5.0)


async def test_a_clean_episode_is_traced_turn_by_turn_then_scored() -> None:
    ctx = context(ExactInteraction)
    obj = ctx.instance()
    iid, trace = await play(ctx, obj, Episode(["#### 3", "#### 7"], {"ground_truth": "7"}), 1)
    assert iid is not None and iid.startswith("conformance-episode1-")
    assert trace == [(False, "try again", 0.0), (True, "correct", 1.0), ("score", 1.0)]
    assert ctx.report.ok
    assert obj.open_sessions == 0  # finalized


async def test_the_score_is_checked_as_the_plugin_returned_it() -> None:
    class IntScore(VerlStyleInteraction):
        async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
            return 1  # type: ignore[return-value]

    ctx = context(IntScore)
    _, trace = await play(ctx, ctx.instance(), Episode(["7"], {"ground_truth": "7"}), 2)
    assert trace[-1] == ("score", 1) and type(trace[-1][1]) is int
    assert [v.check for v in ctx.report.violations] == ["scores"]
    assert "(first seen in episode 2: 1)" in ctx.report.violations[0].message


async def test_a_failed_turn_ends_the_episode_and_still_finalizes() -> None:
    class SecondTurnFails(ExactInteraction):
        async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
            if len(messages) > 2:
                raise RuntimeError("lost the thread")
            return InteractionResult(False, "again", 0.0)

    ctx = context(SecondTurnFails)
    obj = ctx.instance()
    iid, trace = await play(ctx, obj, Episode(["a", "b", "c"], {"ground_truth": "x"}), 1)
    assert iid is not None
    assert trace == [(False, "again", 0.0)]  # what was played before the failure, no score
    assert [v.message for v in ctx.report.violations] == [
        "generate_response raised RuntimeError: lost the thread (first seen in episode 1, turn 2)"
    ]
    assert obj.open_sessions == 0


async def test_a_start_that_fails_plays_nothing_and_is_not_finalized() -> None:
    finalized: list[str] = []

    class CannotStart(VerlStyleInteraction):
        async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
            raise ValueError("no ground truth")

        async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
            finalized.append(instance_id)

    ctx = context(CannotStart)
    assert await play(ctx, ctx.instance(), Episode(["a"], {}), 3) == (None, [])
    assert [v.message for v in ctx.report.violations] == [
        "start_interaction raised ValueError: no ground truth (first seen in episode 3)"
    ]
    assert finalized == []


async def test_the_interaction_kwargs_reach_every_call() -> None:
    seen: list[tuple[str, Any]] = []

    class Records(VerlStyleInteraction):
        async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any):
            seen.append(("turn", kwargs.get("ground_truth")))
            return await super().generate_response(instance_id, messages)

        async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
            seen.append(("score", kwargs.get("ground_truth")))
            return await super().calculate_score(instance_id)

    ctx = context(Records)
    await play(ctx, ctx.instance(), Episode(["7"], {"ground_truth": "7"}), 1)
    assert seen == [("turn", "7"), ("score", "7")]


async def test_the_checker_plays_the_runtimes_step_and_appends_no_feedback_after_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ends: list[tuple[str | None, dict[str, Any]]] = []
    shared = _rules_play.conclude_turn

    def watched(result: Any, messages: list[dict[str, Any]], *args: Any) -> str | None:
        end = shared(result, messages, *args)
        ends.append((end, messages[-1]))
        return end

    monkeypatch.setattr(_rules_play, "conclude_turn", watched)
    ctx = context(ExactInteraction)
    episode = Episode(["#### 3", "#### 7", "#### 9"], {"ground_truth": "7"})
    _, trace = await play(ctx, ctx.instance(), episode, 1)
    assert len(trace) == 3  # two judged turns and the score: the third reply is never played
    assert ends == [
        (None, {"role": "user", "content": "try again"}),
        ("terminated", {"role": "assistant", "content": "#### 7"}),
    ]
    ends.clear()
    other = Episode(["#### 1", "#### 2"], {"ground_truth": "2"})
    report = await acheck_interaction(ExactInteraction, episodes=[episode, other])
    assert report.ok
    # every episode of every check, the interleaved ones too, stops at its end
    assert all(m["role"] == "assistant" for end, m in ends if end is not None)
    assert all(m["role"] == "user" for end, m in ends if end is None)
    assert any(end == "terminated" for end, _ in ends)
