"""The episode loop's cheap paths decide exactly what the general ones decide.

The loop skips work on its common path: the step decides the end without
calling :func:`end_reason` when no limit is set, a session is built by position,
a message of plain text is copied shallowly and a conversation in an awaited
worker is not wrapped in a coroutine of its own. Each shortcut is checked here
against the general rule it stands for.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from interactions_core import InteractionResult
from interactions_core._interaction import SessionInteraction
from interactions_core.errors import InteractionCallError
from interactions_core.runtime import EpisodeLoop, ReplayPolicy, run_episodes
from interactions_core.runtime.episode import copy_messages
from interactions_core.runtime.session import Session, SessionTracker
from interactions_core.runtime.step import conclude_turn, end_reason

LIMITS = (None, 1, 2, 3)


@pytest.mark.parametrize(
    ("terminate", "turns", "max_assistant_turns", "max_user_turns"),
    list(itertools.product((False, True), (1, 2, 3), LIMITS, LIMITS)),
)
def test_the_step_agrees_with_end_reason_for_every_limit(
    terminate: bool, turns: int, max_assistant_turns: int | None, max_user_turns: int | None
) -> None:
    user_turns = turns - 1
    messages: list[dict[str, Any]] = []
    result = InteractionResult(terminate, "feedback", 0.0)
    end = conclude_turn(result, messages, turns, user_turns, max_assistant_turns, max_user_turns)
    assert end == end_reason(terminate, turns, user_turns, max_assistant_turns, max_user_turns)
    assert messages == ([] if end else [{"role": "user", "content": "feedback"}])


async def test_a_session_takes_its_arguments_by_position_in_the_documented_order() -> None:
    class Echo(SessionInteraction):
        async def respond(self, state: Any, messages: Any, **kwargs: Any) -> InteractionResult:
            return InteractionResult(True, "", 1.0)

    tracker = SessionTracker()
    session = Session(Echo(), "echo", "id-7", 5.0, tracker, lambda: False)
    assert (session.name, session.instance_id, session.timeout) == ("echo", "id-7", 5.0)
    assert session.tracker is tracker and session.stopping is not None
    assert await session.start() == "id-7" and tracker.open == 1
    assert await session.finalize() is None and tracker.open == 0
    with pytest.raises(ValueError, match="positive number of seconds"):
        Session(Echo(), "echo", "id-8", 0)


def test_messages_that_are_not_plain_text_are_copied_deeply() -> None:
    parts = [{"type": "text", "text": "look"}]
    messages: list[Any] = [
        {"role": "user", "content": parts},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1"}]},
        {"role": "user", "content": "plain"},
    ]
    copied = copy_messages(messages)
    assert copied == messages
    assert all(c is not m for c, m in zip(copied, messages, strict=True))
    copied[0]["content"][0]["text"] = "edited"
    copied[2]["content"] = "edited"
    assert parts[0]["text"] == "look" and messages[2]["content"] == "plain"


def test_a_nested_field_beside_plain_text_is_copied_too() -> None:
    """A message with text content and a nested field (a tool call) was copied shallow:
    a plugin decoding ``arguments`` in place rewrote the record's prompt, and a served
    conversation grew in its copy past ``--max-episode-chars`` (3 MB observations
    under a 100 kB bound)."""
    calls = [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]
    messages: list[Any] = [{"role": "user", "content": "q", "tool_calls": calls}]
    copied = copy_messages(messages)
    copied[0]["tool_calls"][0]["function"]["arguments"] = {"edited": True}
    copied[0]["tool_calls"].append("X" * 1000)
    assert calls == [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]


def test_nested_messages_of_any_shape_are_copied_whole() -> None:
    # Plain JSON-shaped data is copied by a walk of the runtime's own, not copy.deepcopy;
    # a cycle, data nested past its depth and other types still get
    # copy.deepcopy, so no shape shares a part with the record.
    deep: list[Any] = [0]
    for _ in range(200):  # deeper than the walk goes
        deep = [deep]
    cyclic: list[Any] = ["x"]
    cyclic.append(cyclic)
    messages: list[Any] = [
        {"role": "user", "content": "", "x": [[[[0]]]], "y": {"z": [1, {"w": 2}]}},
        {"role": "user", "content": "", "deep": deep},
        {"role": "user", "content": "", "cyclic": cyclic},
        {"role": "user", "content": "", "tuple": ([1],), "set": {1, 2}},
    ]
    copied = copy_messages(messages)
    assert copied[0] == messages[0] and copied[1] == messages[1]
    copied[0]["x"][0][0][0].append(1)
    copied[0]["y"]["z"][1]["w"] = 3
    assert messages[0]["x"] == [[[[0]]]] and messages[0]["y"] == {"z": [1, {"w": 2}]}
    copied[1]["deep"][0][0].append("edited")
    assert messages[1]["deep"] == deep and len(deep[0][0]) == 1
    assert copied[2]["cyclic"][1] is copied[2]["cyclic"] and copied[2]["cyclic"] is not cyclic
    copied[3]["tuple"][0].append(2)
    assert messages[3]["tuple"] == ([1],)


class ScoresAnInt(SessionInteraction):
    """Scores its turns with an ``int`` (accepted) or a NaN (refused), as the sample says."""

    async def respond(self, state: Any, messages: Any, **kwargs: Any) -> InteractionResult:
        return InteractionResult(True, "", kwargs["turn_score"])

    async def score(self, state: Any, **kwargs: Any) -> Any:
        return kwargs["final"]


@pytest.mark.parametrize(
    ("turn_score", "final", "problem"),
    [
        (1, 1, None),
        (float("nan"), 1.0, "must be finite"),
        (1.0, float("inf"), "must be finite"),
        ("1", 1.0, "must be a float"),
        (1.0, "1", "must be a float"),
    ],
)
async def test_scores_are_checked_on_the_fast_path_as_before(
    turn_score: Any, final: Any, problem: str | None
) -> None:
    sample = {
        "prompt": [{"role": "user", "content": "q"}],
        "responses": ["a"],
        "interaction_kwargs": {"name": "s", "turn_score": turn_score, "final": final},
    }
    record = await EpisodeLoop(ReplayPolicy(), {"s": ScoresAnInt()}).run(sample)
    if problem is None:
        assert record.errors == [] and record.final_score == 1.0
    else:
        assert record.end_reason == "error" and problem in record.errors[0]["message"]


async def test_a_failing_session_call_is_still_one_call_error() -> None:
    class Broken(SessionInteraction):
        async def respond(self, state: Any, messages: Any, **kwargs: Any) -> InteractionResult:
            raise KeyError("lost")

    session = Session(Broken(), "broken", "id-1")
    await session.start()
    with pytest.raises(InteractionCallError, match="generate_response"):
        await session.respond([{"role": "assistant", "content": "a"}])
    assert await session.finalize() is None


async def test_an_episode_that_raises_past_the_loop_still_has_a_record() -> None:
    class Raising(EpisodeLoop):
        async def run(self, sample: Any, index: int = 0, repeat: int = 0) -> Any:
            raise RuntimeError("past the loop")

    from interactions_core.runtime.runner import Runner

    runner = Runner(ReplayPolicy(), None, observe=False, concurrency=3)
    runner.loop.run = Raising(ReplayPolicy()).run  # type: ignore[method-assign]
    summary = await runner.run([{"prompt": []}] * 5, keep_records=True)
    assert summary.records is not None and len(summary.records) == 5
    assert {r.errors[0]["where"] for r in summary.records} == {"episode"}
    summary = await run_episodes([{"prompt": [], "responses": ["a"]}] * 5, ReplayPolicy())
    assert summary.episodes == 5 and summary.errors == 0


def test_a_name_of_megabytes_is_refused_without_comparing_it() -> None:
    """The did-you-mean compared a served client's 12 MB name with every name, holding
    the event loop 3 s, and echoed it whole in the error."""
    import time

    from interactions_core._names import suggest

    name = "gsm8k" * 2_000_000
    started = time.perf_counter()
    assert suggest(name, ["gsm8k", "weather"], n=1) == ""
    assert time.perf_counter() - started < 0.5
    assert suggest("gsm8kk", ["gsm8k", "weather"], n=1) == "; did you mean 'gsm8k'?"


def test_a_plugin_error_of_megabytes_is_cut_in_its_message() -> None:
    """A plugin's 50 MB error message was sent whole to a served client and logged whole."""
    from interactions_core.runtime.session import call_error

    error = call_error("x", "s-1", "generate_response", ValueError("y" * 5_000_000))
    assert len(str(error)) < 11_000 and "more characters" in str(error)
