"""The session driver plays conversations like a trainer and always finalizes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interactions_core import InteractionResult, SessionInteraction
from interactions_core.testing import SessionDriver, run_sync


class Countdown(SessionInteraction):
    """Stops after ``turns`` replies; scores the number of replies seen."""

    def new_session(self, turns: int = 2, **kwargs: Any) -> dict[str, int]:
        return {"left": turns, "seen": 0}

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        state["seen"] += 1
        state["left"] -= 1
        if messages[-1]["content"] == "boom":
            raise ValueError("boom")
        return InteractionResult(state["left"] <= 0, f"seen {state['seen']}", 0.5)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return float(state["seen"])


async def test_play_stops_when_the_interaction_terminates() -> None:
    driver = SessionDriver(Countdown({}))
    transcript = await driver.play(["a", "b", "c"], turns=2)
    assert transcript.turns == 2
    assert transcript.terminated
    assert transcript.final_score == 2.0
    assert transcript.scores == [0.5, 0.5]
    roles = [m["role"] for m in transcript.messages]
    # the runtime's episode step: no feedback is appended after the end
    assert roles == ["user", "assistant", "user", "assistant"]
    assert transcript.messages[-1]["content"] == "b"
    assert transcript.results[-1].content == "seen 2"
    assert transcript.end_reason == "terminated"
    assert driver.interaction.open_sessions == 0


@pytest.mark.parametrize(
    ("limits", "reason", "turns", "user_turns"),
    [
        ({"max_assistant_turns": 2}, "max_assistant_turns", 2, 1),
        ({"max_user_turns": 1}, "max_user_turns", 2, 1),
        ({"max_user_turns": 3, "max_assistant_turns": 3}, "max_assistant_turns", 3, 2),
    ],
)
async def test_the_driver_ends_at_the_runs_limits_with_the_last_turn_judged(
    limits: dict[str, int], reason: str, turns: int, user_turns: int
) -> None:
    driver = SessionDriver(Countdown({}), **limits)
    transcript = await driver.play(["a", "b", "c", "d"], turns=10)
    assert transcript.end_reason == reason
    assert transcript.turns == turns and transcript.user_turns == user_turns
    assert len(transcript.scores) == turns  # the last turn the limit allows is judged
    assert transcript.messages[-1]["role"] == "assistant"
    assert transcript.final_score == float(turns)


async def test_a_script_that_runs_out_is_exhausted() -> None:
    transcript = await SessionDriver(Countdown({})).play(["a"], turns=5)
    assert transcript.end_reason == "exhausted"
    assert transcript.messages[-1] == {"role": "user", "content": "seen 1"}


async def test_script_running_out_is_not_termination() -> None:
    transcript = await SessionDriver(Countdown({})).play(["a"], turns=5)
    assert not transcript.terminated
    assert transcript.final_score == 1.0


async def test_session_is_finalized_when_the_interaction_raises() -> None:
    interaction = Countdown({})
    driver = SessionDriver(interaction)
    with pytest.raises(ValueError, match="boom"):
        await driver.play(["boom"])
    assert interaction.open_sessions == 0


async def test_session_context_exposes_messages_and_id() -> None:
    driver = SessionDriver(Countdown({}), prompt="Q?")
    async with driver.session("fixed-id", turns=3) as session:
        assert session.instance_id == "fixed-id"
        assert session.messages == [{"role": "user", "content": "Q?"}]
        result = await session.reply("x")
        assert isinstance(result, InteractionResult) and not session.terminated
        assert await session.score() == 1.0
    assert driver.interaction.open_sessions == 0


async def test_verl_tuples_are_coerced_and_wrong_shapes_refused() -> None:
    class Tuples(Countdown):
        async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
            if messages[-1]["content"] == "bad":
                return (True, None, 1.0, {})
            return (True, "ok", 1, None)

    driver = SessionDriver(Tuples({}))
    transcript = await driver.play(["fine"])
    assert transcript.results[0] == InteractionResult(True, "ok", 1.0)
    with pytest.raises(TypeError, match="content must be a str"):
        await driver.play(["bad"])


async def test_timeout_bounds_a_hung_call() -> None:
    class Slow(Countdown):
        async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
            await asyncio.sleep(10)

    with pytest.raises(asyncio.TimeoutError):
        await SessionDriver(Slow({}), timeout=0.05).play(["x"])


def test_play_sync_and_run_sync_from_plain_code() -> None:
    transcript = SessionDriver(Countdown({})).play_sync(["a", "b"], turns=2)
    assert transcript.final_score == 2.0

    async def answer() -> int:
        return 42

    assert run_sync(answer()) == 42


async def test_run_sync_inside_a_loop_propagates_errors() -> None:
    async def fail() -> None:
        raise KeyError("inner")

    with pytest.raises(KeyError, match="inner"):
        run_sync(fail())


async def test_calls_get_the_session_kwargs_updated_by_the_calls_own() -> None:
    seen: list[dict[str, Any]] = []

    class Spy(Countdown):
        async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
            seen.append(kwargs)
            return await super().respond(state, messages, **kwargs)

    async with SessionDriver(Spy({})).session(turns=3, ground_truth="7") as session:
        await session.reply("a")
        await session.reply("b", ground_truth="8")
    assert seen == [{"turns": 3, "ground_truth": "7"}, {"turns": 3, "ground_truth": "8"}]


async def test_a_failed_start_is_not_finalized_and_raises_the_plugins_error() -> None:
    class Refuses(Countdown):
        def new_session(self, **kwargs: Any) -> Any:
            raise LookupError("no such task")

        async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
            raise AssertionError("a refused session must not be finalized")

    with pytest.raises(LookupError, match="no such task"):
        await SessionDriver(Refuses({})).play(["a"])
