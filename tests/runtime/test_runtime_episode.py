"""The episode loop: verl's semantics, routing, end reasons, errors, observers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from runtime_fakes import Faulty, Plain, Recorder, sample

from interactions_core._interaction import InteractionResult
from interactions_core._spec import hookimpl
from interactions_core.registry import Registry
from interactions_core.runtime import EpisodeLoop, Observers, ReplayPolicy


def loop_for(interactions: dict[str, Any] | None, **options: Any) -> EpisodeLoop:
    return EpisodeLoop(ReplayPolicy(), interactions, **options)


async def test_messages_grow_the_verl_way() -> None:
    rec = Recorder()
    loop = loop_for({"rec": rec})
    record = await loop.run(sample(["a", "b", "c"], kwargs={"name": "rec", "answer": "b"}), 7)
    assert record.end_reason == "terminated" and record.turns == 2 and record.user_turns == 1
    assert record.messages == [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "wrong #1"},
        {"role": "assistant", "content": "b"},
    ]
    # generate_response saw the full list each time
    assert [len(m) for m in rec.seen] == [2, 4]
    assert rec.calls[0][2] == {"name": "rec", "answer": "b"}  # verl passes the kwargs through
    assert rec.calls[1][2] == {"name": "rec", "answer": "b"}
    assert record.scores == [0.0, 1.0] and record.final_score == 0.5
    assert record.index == 7 and record.sample_id == 7 and record.interaction == "rec"
    assert record.errors == [] and record.ok and record.duration_s >= 0
    assert rec.finalized == [record.instance_id] and rec.open_sessions == 0


async def test_prompt_is_not_mutated_and_ids_are_fresh() -> None:
    rec = Recorder()
    loop = loop_for({"rec": rec})
    row = sample(["x"], kwargs={"name": "rec"}, id="row-1")
    first = await loop.run(row)
    second = await loop.run(row)
    assert row["prompt"] == [{"role": "user", "content": "question"}]
    assert first.instance_id != second.instance_id
    assert first.sample_id == "row-1"
    assert first.end_reason == second.end_reason == "exhausted"


@pytest.mark.parametrize(
    ("options", "reason", "turns", "user_turns"),
    [
        ({}, "exhausted", 4, 4),
        ({"max_assistant_turns": 2}, "max_assistant_turns", 2, 1),
        ({"max_user_turns": 1}, "max_user_turns", 2, 1),
        ({"max_user_turns": 3, "max_assistant_turns": 3}, "max_assistant_turns", 3, 2),
    ],
)
async def test_end_reasons(
    options: dict[str, int], reason: str, turns: int, user_turns: int
) -> None:
    loop = loop_for({"p": Plain()}, **options)
    record = await loop.run(sample(["1", "2", "3", "4"], kwargs={"name": "p"}))
    assert (record.end_reason, record.turns, record.user_turns) == (reason, turns, user_turns)
    assert len(record.scores) == turns
    assert record.messages[-1]["role"] == ("user" if reason == "exhausted" else "assistant")


async def test_no_interaction_kwargs_is_single_turn() -> None:
    loop = loop_for({"p": Plain()})
    record = await loop.run(sample(["only", "unused"]))
    assert (record.end_reason, record.turns, record.interaction) == ("single_turn", 1, None)
    assert record.final_score is None and record.scores == []
    empty = await loop.run(sample([]))
    assert (empty.end_reason, empty.turns) == ("exhausted", 0)


async def test_no_config_at_all_ignores_interaction_kwargs() -> None:
    record = await loop_for(None).run(sample(["a", "b"], kwargs={"name": "gsm8k"}))
    assert (record.end_reason, record.turns, record.errors) == ("single_turn", 1, [])


async def test_top_level_interaction_kwargs_and_default() -> None:
    rec = Recorder()
    loop = loop_for({"rec": rec, "p": Plain()}, default="rec")
    row = sample(["a"])
    row["interaction_kwargs"] = {"answer": "a"}
    record = await loop.run(row)
    assert (record.interaction, record.end_reason) == ("rec", "terminated")


async def test_missing_name_without_default_names_the_choices() -> None:
    record = await loop_for({"rec": Recorder(), "p": Plain()}).run(
        sample(["a"], kwargs={"answer": "a"})
    )
    assert record.end_reason == "error" and record.final_score is None
    (error,) = record.errors
    assert error["where"] == "sample" and error["type"] == "SampleError"
    assert "rec, p" in error["message"] and "default" in error["message"]


async def test_unknown_name_names_the_configured_ones() -> None:
    record = await loop_for({"gsm8k": Recorder()}).run(sample(["a"], kwargs={"name": "gsm8"}))
    message = record.errors[0]["message"]
    assert (
        "'gsm8'" in message and "did you mean 'gsm8k'" in message and "Configured: gsm8k" in message
    )


async def test_bad_samples_are_errors_not_crashes() -> None:
    loop = loop_for({"rec": Recorder()})
    for bad in ({"prompt": "text"}, "not a mapping", {"responses": ["a"]}):
        record = await loop.run(bad)  # type: ignore[arg-type]
        assert record.end_reason == "error" and record.errors[0]["type"] == "SampleError"
    not_text = await loop.run(sample(["a", 2], kwargs={"name": "rec"}))  # type: ignore[list-item]
    assert not_text.errors[0]["where"] == "policy.reply" and not_text.turns == 1
    assert "reply must be a str or None, not int" in not_text.errors[0]["message"]
    no_responses = await loop.run(sample(None, kwargs={"name": "rec"}))
    assert no_responses.errors[0]["where"] == "policy.start"
    # counted under the interaction the sample names (it read null: "(none)" in the summary)
    assert no_responses.interaction == "rec"
    assert "no 'responses' field" in no_responses.errors[0]["message"]
    with pytest.raises(ValueError, match="default interaction 'x'"):
        loop_for({"rec": Recorder()}, default="x")
    with pytest.raises(ValueError, match="max_user_turns"):
        loop_for({}, max_user_turns=0)


@pytest.mark.parametrize(
    ("fault", "where", "kind"),
    [
        ("start", "start_interaction", "RuntimeError"),
        ("generate", "generate_response", "ValueError"),
        ("bad", "generate_response", "TypeError"),
        ("score", "calculate_score", "KeyError"),
        ("finalize", "finalize_interaction", "OSError"),
    ],
)
async def test_plugin_failures_are_recorded_and_finalized(
    fault: str, where: str, kind: str
) -> None:
    faulty = Faulty({"name": "faulty"})
    loop = loop_for({"faulty": faulty})
    record = await loop.run(sample(["a"], kwargs={"name": "faulty", "fault": fault}))
    assert record.end_reason == "error" and record.final_score is None
    (error,) = record.errors
    assert (error["where"], error["type"], error["interaction"]) == (where, kind, "faulty")
    assert error["instance_id"] == record.instance_id
    assert f"session {record.instance_id!r}" in error["message"]
    assert faulty.open_sessions == 0 and loop.tracker.open == 0


async def test_tuple_results_are_accepted() -> None:
    record = await loop_for({"f": Faulty()}).run(
        sample(["a"], kwargs={"name": "f", "fault": "tuple"})
    )
    assert (record.end_reason, record.scores) == ("terminated", [1.0])


async def test_timeout_ends_only_that_episode() -> None:
    faulty = Faulty({"name": "slow"})
    loop = loop_for({"slow": faulty}, timeout=0.05)
    hung, fine = await asyncio.gather(
        loop.run(sample(["a"], kwargs={"name": "slow", "fault": "hang"})),
        loop.run(sample(["a"], kwargs={"name": "slow"})),
    )
    assert hung.end_reason == "error" and "timed out after 0.05 s" in hung.errors[0]["message"]
    assert hung.errors[0]["where"] == "generate_response"
    assert fine.end_reason == "terminated"
    assert faulty.open_sessions == 0


async def test_cancelled_episode_is_finalized() -> None:
    faulty = Faulty()
    loop = loop_for({"f": faulty})
    task = asyncio.ensure_future(loop.run(sample(["a"], kwargs={"name": "f", "fault": "hang"})))
    while faulty.open_sessions == 0:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert faulty.open_sessions == 0 and loop.tracker.open == 0


class AsyncPolicy:
    """A policy whose reply is a coroutine, echoing the turn number."""

    async def reply(self, state: Any, messages: list[dict[str, Any]]) -> str | None:
        await asyncio.sleep(0)
        return str(len(messages))


async def test_async_policies_are_awaited() -> None:
    loop = EpisodeLoop(AsyncPolicy(), {"p": Plain()}, max_assistant_turns=3)
    record = await loop.run(sample(kwargs={"name": "p"}))
    assert [m["content"] for m in record.messages if m["role"] == "assistant"] == ["1", "3", "5"]


async def test_non_string_replies_are_errors() -> None:
    class Bad:
        def reply(self, state: Any, messages: Any) -> Any:
            return 42

    record = await EpisodeLoop(Bad(), {"p": Plain()}).run(sample(kwargs={"name": "p"}))
    assert record.errors[0]["where"] == "policy.reply" and "not int" in record.errors[0]["message"]


class Watcher:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    @hookimpl
    def on_session_start(self, interaction_name: str, instance_id: str, kwargs: Any) -> None:
        self.events.append(("start", interaction_name, kwargs["name"]))

    @hookimpl
    def on_turn(
        self, interaction_name: str, instance_id: str, turn: int, messages: Any, result: Any
    ) -> None:
        assert type(result) is InteractionResult
        self.events.append(("turn", turn, messages[-1]["content"], result.score))

    @hookimpl
    def on_session_end(
        self, interaction_name: str, instance_id: str, record: Any, error: Any
    ) -> None:
        self.events.append(("end", record.end_reason, error))


async def test_observer_hooks_fire_through_the_plugin_host() -> None:
    registry = Registry.from_classes({})
    watcher = Watcher()
    registry.plugin_host.register_object(watcher, name="watcher")
    observers = Observers.from_registry(registry)
    loop = loop_for({"rec": Recorder()}, observers=observers)
    await loop.run(sample(["a", "b"], kwargs={"name": "rec", "answer": "b"}))
    assert watcher.events == [
        ("start", "rec", "rec"),
        ("turn", 1, "a", 0.0),
        ("turn", 2, "b", 1.0),
        ("end", "terminated", None),
    ]


async def test_no_observers_means_no_calls() -> None:
    registry = Registry.from_classes({})
    observers = Observers.from_registry(registry)
    assert not observers and observers.on_turn is None
    assert loop_for({}, observers=observers).observers is None


async def test_a_failing_observer_is_recorded_and_the_episode_goes_on() -> None:
    class Broken:
        @hookimpl
        def on_turn(
            self, interaction_name: str, instance_id: str, turn: int, messages: Any, result: Any
        ) -> None:
            raise RuntimeError("observer bug")

    registry = Registry.from_classes({})
    registry.plugin_host.register_object(Broken(), name="broken")
    loop = loop_for({"rec": Recorder()}, observers=Observers.from_registry(registry))
    record = await loop.run(sample(["a", "b"], kwargs={"name": "rec", "answer": "b"}))
    assert record.turns == 2 and record.end_reason == "terminated"
    assert [e["where"] for e in record.errors] == ["observer on_turn"] * 2


async def test_record_to_dict_is_json_ready() -> None:
    import json

    record = await loop_for({"rec": Recorder()}).run(
        sample(["a"], kwargs={"name": "rec", "answer": "a"})
    )
    data = json.loads(json.dumps(record.to_dict()))
    assert {
        "index",
        "sample_id",
        "interaction",
        "instance_id",
        "end_reason",
        "turns",
        "scores",
        "final_score",
        "errors",
        "started_at",
        "duration_s",
        "messages",
    } <= set(data)


async def test_a_plugins_own_interaction_call_error_is_told_as_it_raised_it() -> None:
    # A plugin delegating through the public Session raises InteractionCallError: it was
    # recorded as the runtime's own, unchecked: its message whole (5 MB), the method and
    # the names it chose.
    from interactions_core.errors import InteractionCallError

    class Delegating(Plain):
        async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
            raise InteractionCallError("other", "sess-x", "calculate_score", "B" * 5_000_000)

    record = await loop_for({"d": Delegating()}).run(sample(["a"], kwargs={"name": "d"}))
    [error] = record.errors
    assert error["where"] == "generate_response" and error["type"] == "InteractionCallError"
    assert error["interaction"] == "d" and len(error["message"]) < 11_000, error["message"][:300]
    assert error["message"].startswith("interaction 'd', session "), error["message"][:300]


class RaisesEveryTurn:
    @hookimpl
    def on_turn(
        self, interaction_name: str, instance_id: str, turn: int, messages: Any, result: Any
    ) -> None:
        raise ValueError(f"turn {turn} " + "x" * 1000)


async def test_a_hook_failing_every_turn_keeps_a_bounded_record() -> None:
    """One error entry per turn was kept: 6,000 turns of a 10 kB message made a 62 MB
    record and 500 MB of memory for one episode."""
    registry = Registry.from_classes({})
    registry.plugin_host.register_object(RaisesEveryTurn(), name="raises")
    loop = loop_for({"rec": Recorder()}, observers=Observers.from_registry(registry))
    answers = ["a"] * 250
    record = await loop.run(sample(answers, kwargs={"name": "rec", "answer": "b"}))
    assert record.turns == 250 and len(record.errors) == 101, len(record.errors)
    assert all(e["where"] == "observer on_turn" for e in record.errors[:100])
    last = record.errors[-1]
    assert last["type"] == "ErrorsNotKept" and last["left_out"] == 150
    assert last["message"].startswith("150 more error(s) after the first 100 were not kept")


class FailsFirst:
    @hookimpl(tryfirst=True)
    def on_session_start(self, interaction_name: str, instance_id: str, kwargs: Any) -> None:
        raise ValueError("start boom")

    @hookimpl(tryfirst=True)
    def on_turn(
        self, interaction_name: str, instance_id: str, turn: int, messages: Any, result: Any
    ) -> None:
        raise ValueError("turn boom")

    @hookimpl(tryfirst=True)
    def on_session_end(
        self, interaction_name: str, instance_id: str, record: Any, error: Any
    ) -> None:
        raise ValueError("end boom")


async def test_an_observer_that_raises_keeps_no_other_from_the_event() -> None:
    """pluggy's call stops at the first implementation that raises: a `tryfirst` observer's
    bug had kept every other observer, the trace included, from each event."""
    registry = Registry.from_classes({})
    watcher = Watcher()
    registry.plugin_host.register_object(watcher, name="watcher")
    registry.plugin_host.register_object(FailsFirst(), name="fails-first")
    loop = loop_for({"rec": Recorder()}, observers=Observers.from_registry(registry))
    record = await loop.run(sample(["a", "b"], kwargs={"name": "rec", "answer": "b"}))
    assert [e[0] for e in watcher.events] == ["start", "turn", "turn", "end"]
    assert [e["where"] for e in record.errors] == [
        "observer on_session_start",
        "observer on_turn",
        "observer on_turn",
        "observer on_session_end",
    ]
