"""Every sample is accounted for, whatever class of exception a plugin raises.

A tiny installed plugin (``wild``) raises, on the samples that ask for it,
``asyncio.CancelledError``, a ``BaseException`` subclass, ``SystemExit(3)``,
``KeyboardInterrupt`` or ``GeneratorExit`` from one lifecycle method. Each must
end that episode only, as an error record naming the exception; the run goes
on and its summary counts every input sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main as cli_main
from interactions_core.compat.verl import initialize_interactions_from_config
from interactions_core.runtime import ReplayPolicy, Runner, run_episodes

WILD = """
import asyncio
from interactions_core import BaseInteraction, InteractionResult


class Weird(BaseException):
    pass


RAISE = {
    "cancelled": lambda: asyncio.CancelledError("plugin-made cancel"),
    "base": lambda: Weird("odd base exception"),
    "exit": lambda: SystemExit(3),
    "kbint": lambda: KeyboardInterrupt("plugin pressed ctrl-c"),
    "genexit": lambda: GeneratorExit("odd"),
}


class Wild(BaseInteraction):
    def __init__(self, config):
        super().__init__(config)
        self.sessions = {}
        self.finalized = 0

    async def start_interaction(self, instance_id=None, fault=None, where=None, **kwargs):
        self.sessions[instance_id] = (fault, where)
        if where == "start" and fault:
            raise RAISE[fault]()
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        fault, where = self.sessions[instance_id]
        await asyncio.sleep(0)
        if fault and where in (None, "generate"):
            raise RAISE[fault]()
        return InteractionResult(True, "fine", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        fault, where = self.sessions[instance_id]
        if fault and where == "score":
            raise RAISE[fault]()
        return 1.0

    async def finalize_interaction(self, instance_id, **kwargs):
        fault, where = self.sessions.pop(instance_id)
        self.finalized += 1
        if fault and where == "finalize":
            raise RAISE[fault]()
"""

FAULTS = {
    "cancelled": "CancelledError",
    "base": "Weird",
    "exit": "SystemExit",
    "kbint": "KeyboardInterrupt",
    "genexit": "GeneratorExit",
}
METHODS = {
    "start": "start_interaction",
    "generate": "generate_response",
    "score": "calculate_score",
    "finalize": "finalize_interaction",
}


@pytest.fixture
def wild(make_dist, forget_modules, tmp_path: Path) -> Path:
    make_dist(
        "acme-wild",
        "1.0",
        {"interactions_core.interactions": {"wild": "acme_wild:Wild"}},
        {"acme_wild": WILD},
    )
    config = tmp_path / "config.yaml"
    config.write_text("interaction:\n  - name: wild\n")
    return config


def sample(i: int, fault: str | None = None, where: str | None = None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"name": "wild"}
    if fault:
        kwargs.update(fault=fault, where=where)
    return {
        "id": f"s{i}",
        "prompt": [{"role": "user", "content": "2+2?"}],
        "responses": ["4"],
        "extra_info": {"interaction_kwargs": kwargs},
    }


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("concurrency", [1, 16])
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_any_exception_class_ends_only_its_episode(
    wild: Path, fault: str, concurrency: int
) -> None:
    interactions = initialize_interactions_from_config(str(wild))
    runner = Runner(ReplayPolicy(), interactions, observe=False, concurrency=concurrency)
    samples = [sample(i, fault if i == 10 else None) for i in range(40)]
    summary = await runner.run(samples, keep_records=True)
    assert summary.episodes == 40 and summary.errors == 1
    assert not summary.interrupted
    assert sorted(r.index for r in summary.records) == list(range(40))
    [bad] = [r for r in summary.records if r.errors]
    assert bad.index == 10 and bad.end_reason == "error"
    assert bad.errors[0]["type"] == FAULTS[fault]
    assert bad.errors[0]["where"] == "generate_response"
    assert runner.open_sessions == 0 and interactions["wild"].sessions == {}


@pytest.mark.parametrize("where", list(METHODS))
async def test_every_lifecycle_method_is_fenced(wild: Path, where: str) -> None:
    interactions = initialize_interactions_from_config(str(wild))
    samples = [sample(i, "base" if i == 1 else None, where) for i in range(3)]
    summary = await run_episodes(samples, ReplayPolicy(), interactions, keep_records=True)
    assert summary.episodes == 3 and summary.errors == 1
    [bad] = [r for r in summary.records if r.errors]
    assert bad.errors[0]["where"] == METHODS[where] and bad.errors[0]["type"] == "Weird"
    # a start_interaction that raised opened no session: only the others are finalized
    assert interactions["wild"].finalized == (2 if where == "start" else 3)


async def test_a_real_cancellation_still_stops_the_run(wild: Path) -> None:
    interactions = initialize_interactions_from_config(str(wild))
    runner = Runner(ReplayPolicy(), interactions, observe=False, concurrency=4)
    endless = (sample(i) for i in range(10**9))
    task = asyncio.ensure_future(runner.run(endless))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert runner.open_sessions == 0


@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_cli_counts_every_sample_and_exits_1(wild: Path, tmp_path: Path, fault: str) -> None:
    data = tmp_path / "data.jsonl"
    rows = [sample(i, fault if i in (5, 50) else None) for i in range(100)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "records.jsonl"
    code, stdout, stderr = run_cli(
        "run", str(wild), "--data", str(data), "--output", str(out),
        "--concurrency", "1", "--json", "--no-progress",
    )  # fmt: skip
    assert code == 1, stderr
    summary = json.loads(stdout)
    assert summary["episodes"] == 100 and summary["errors"] == 2
    assert summary["interrupted"] is False
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(100))
    assert {r["errors"][0]["type"] for r in records if r["errors"]} == {FAULTS[fault]}
    assert "2 of 100 episode(s) errored" in stderr and "Traceback" not in stderr


async def test_plugin_edits_never_reach_the_callers_sample(wild: Path) -> None:
    class Editor:
        async def start_interaction(self, instance_id=None, **kwargs):  # type: ignore[no-untyped-def]
            return instance_id

        async def generate_response(self, instance_id, messages, **kwargs):  # type: ignore[no-untyped-def]
            messages[0]["content"] = "EDITED"
            messages[1]["content"].append("EDITED")
            return (True, "ok", 1.0, {})

        async def calculate_score(self, instance_id, **kwargs):  # type: ignore[no-untyped-def]
            return 1.0

        async def finalize_interaction(self, instance_id, **kwargs):  # type: ignore[no-untyped-def]
            return None

    row = {
        "prompt": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": ["a", "list", "of", "parts"]},
        ],
        "responses": ["4"],
        "interaction_kwargs": {"name": "editor"},
    }
    before = json.dumps(row)
    summary = await run_episodes([row], ReplayPolicy(), {"editor": Editor()}, keep_records=True)
    assert summary.errors == 0
    assert json.dumps(row) == before


async def test_a_policy_raising_systemexit_costs_only_its_episode(wild: Path) -> None:
    class Quitter(ReplayPolicy):
        def reply(self, state, messages):  # type: ignore[no-untyped-def]
            if messages[0]["content"] == "quit":
                raise SystemExit(2)
            return super().reply(state, messages)

    interactions = initialize_interactions_from_config(str(wild))
    samples = [sample(i) for i in range(5)]
    samples[2]["prompt"] = [{"role": "user", "content": "quit"}]
    summary = await run_episodes(samples, Quitter(), interactions, keep_records=True)
    assert summary.episodes == 5 and summary.errors == 1
    [bad] = [r for r in summary.records if r.errors]
    assert bad.index == 2 and bad.errors[0]["where"] == "policy.reply"
    assert bad.errors[0]["type"] == "SystemExit"
    assert interactions["wild"].sessions == {}
