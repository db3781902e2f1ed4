"""The trace writer: an observer-hook plugin whose hooks are the specification's own."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pluggy
import pytest

from interactions_core._spec import PROJECT_NAME, PluginSpec
from interactions_core.registry import get_registry
from interactions_core.runtime.observers import TraceWriter, tracing
from interactions_core.runtime.records import LineWriter

OBSERVER_HOOKS = ("on_session_start", "on_turn", "on_session_end")


def manager_with(writer: TraceWriter) -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(PluginSpec)
    manager.register(writer)
    return manager


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("hook", OBSERVER_HOOKS)
def test_each_hook_receives_exactly_the_arguments_the_spec_declares(
    tmp_path: Path, hook: str
) -> None:
    with TraceWriter(tmp_path / "t.jsonl") as writer:
        (impl,) = getattr(manager_with(writer).hook, hook).get_hookimpls()
        declared = tuple(inspect.signature(getattr(PluginSpec, hook)).parameters)[1:]
        assert impl.argnames == declared
        assert impl.function.__name__ == hook


def test_a_session_written_through_the_plugin_manager(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path)
    hook = manager_with(writer).hook
    hook.on_session_start(interaction_name="g", instance_id="i1", kwargs={"a": 1})
    messages = [{"role": "assistant", "content": "first"}, {"role": "user", "content": "q"}]
    messages.append({"role": "assistant", "content": "second"})
    result = SimpleNamespace(should_terminate=True, content="ok", score=1.0, extra={"k": 2})
    hook.on_turn(interaction_name="g", instance_id="i1", turn=2, messages=messages, result=result)
    record = SimpleNamespace(index=3, repeat=2, end_reason="terminated", turns=2, final_score=1)
    hook.on_session_end(
        interaction_name="g", instance_id="i1", record=record, error=ValueError("bad")
    )
    writer.close()
    start, turn, end = lines(path)
    assert list(start) == ["event", "time", "interaction", "instance_id", "kwargs"]
    assert start["event"] == "session_start" and start["kwargs"] == {"a": 1}
    assert list(turn)[:5] == ["event", "time", "interaction", "instance_id", "turn"]
    assert turn["assistant"] == "second"  # the last assistant message: the turn's answer
    assert (turn["turn"], turn["score"], turn["extra"]) == (2, 1.0, {"k": 2})
    assert end["event"] == "session_end" and (end["index"], end["repeat"]) == (3, 2)
    assert end["error"] == "ValueError: bad"


def test_the_trace_writer_is_a_line_writer(tmp_path: Path) -> None:
    """Opened like records (append continues after a crash's partial line)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"event": "turn"}\n{"event": "tur')
    writer = TraceWriter(path, append=True)
    assert isinstance(writer, LineWriter)
    writer.on_session_start("g", "i2", {})  # positionally, as pluggy calls it
    writer.close()
    assert [line["event"] for line in lines(path)] == ["turn", "session_start"]


def test_tracing_registers_the_writer_for_the_block_only(tmp_path: Path) -> None:
    registry = get_registry()
    host = registry.plugin_host
    with tracing(registry, tmp_path / "t.jsonl") as writer:
        assert host.manager.is_registered(writer)
        assert host.observer("on_turn") is not None
    assert not host.manager.is_registered(writer)
    assert writer._fd is None  # closed on the way out


def test_a_session_id_of_megabytes_is_cut_on_every_line(tmp_path: Path) -> None:
    # A plugin's start_interaction chooses the id: one of 1 MB, repeated on each of an
    # episode's lines, made a 1.2 GB trace beside 6 MB of records.
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path)
    huge = "\x1b" * 1_000_000
    for _ in range(3):
        writer.on_session_start("g", huge, {})
    writer.on_session_start("g", "short-id", {})
    writer.close()
    *cut, short = lines(path)
    assert all(len(json.dumps(line)) < 10_000 for line in cut)
    assert all(line["instance_id"].endswith("[... 999,000 more characters]") for line in cut)
    assert short["instance_id"] == "short-id"


SHARED_EXTRA = """
from interactions_core import InteractionResult, SessionInteraction

DOC = list(range(50))


class Shares(SessionInteraction):
    def respond(self, state, messages, **kwargs):
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return InteractionResult(turn >= 5, "fb", 0.5, {"doc": DOC})
"""


def test_session_end_tells_what_the_record_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An episode whose extras could not be written (their shared part counted each time)
    was recorded as an error with no score, and its trace line said terminated, 0.5 and
    no error: the hooks were told before the record was made plain data."""
    from interactions_core import _files
    from interactions_core.cli import main

    monkeypatch.setattr(_files, "MAX_VALUES", 200)  # five turns of the same 50 values: 250
    (tmp_path / "shares_extra.py").write_text(SHARED_EXTRA, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: s\n    class_name: shares_extra.Shares\n")
    data, out, trace = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "t.jsonl"
    row = {"prompt": [{"role": "user", "content": "q"}], "responses": ["r"] * 9}
    row["interaction_kwargs"] = {"name": "s"}
    data.write_text(json.dumps(row) + "\n")
    command = ["run", str(config), "--data", str(data), "--output", str(out), "--trace", str(trace)]
    assert main(command) == 1
    (record,) = lines(out)
    assert (record["end_reason"], record["final_score"]) == ("error", None)
    (end,) = [e for e in lines(trace) if e["event"] == "session_end"]
    assert (end["end_reason"], end["final_score"]) == ("error", None), end
    assert end["error"] and "cannot be written as JSON" in end["error"], end
