"""Fault injection: a misbehaving plugin costs its own episode, never the run.

One installed plugin (``faulty``, a real generated distribution) misbehaves on
demand, chosen per sample by ``interaction_kwargs["fault"]``: it raises in each
lifecycle method in turn, hangs, returns the wrong types, a NaN or infinite
score, or a huge feedback string. The same faults go through ``interactions
run``, the library's :class:`~interactions_core.runtime.Runner`, and the
verl-compatible loader with direct calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from interactions_core import ConfigError, InteractionResult
from interactions_core.cli import main as cli_main
from interactions_core.compat.verl import initialize_interactions_from_config
from interactions_core.runtime import (
    InteractionCallError,
    ReplayPolicy,
    Runner,
    Session,
    SessionTracker,
)

FAULTY = """
import asyncio
import sys
import uuid
from interactions_core import BaseInteraction, InteractionResult

HUGE = "x" * (8 * 1024 * 1024)


class FaultyInteraction(BaseInteraction):
    '''verl-style: its own per-session dict, misbehaving on demand.'''

    def __init__(self, config):
        super().__init__(config)
        if self.config.get("fail_init"):
            raise RuntimeError("cannot initialise")
        self._instance_dict = {}
        self.finalized = []

    async def start_interaction(self, instance_id=None, fault=None, **kwargs):
        instance_id = instance_id or str(uuid.uuid4())
        if fault == "start":
            raise RuntimeError("boom in start")
        if fault == "start_hang":
            await asyncio.sleep(3600)
        self._instance_dict[instance_id] = fault
        if fault == "start_returns_int":
            return 42
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        fault = self._instance_dict[instance_id]
        if fault == "generate":
            raise ValueError("boom in generate")
        if fault == "hang":
            sys.stderr.write("HANGING\\n")
            sys.stderr.flush()
            await asyncio.sleep(3600)
        if fault == "wrong_result":
            return "not a result"
        if fault == "wrong_field":
            return (True, None, 1.0, {})
        if fault == "nan":
            return InteractionResult(True, "nan", float("nan"))
        if fault == "inf":
            return InteractionResult(True, "inf", float("inf"))
        if fault == "huge":
            return InteractionResult(True, HUGE, 1.0)
        return InteractionResult(True, "fine", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        fault = self._instance_dict[instance_id]
        if fault == "score":
            raise KeyError("boom in score")
        if fault == "score_type":
            return "1.0"
        if fault == "score_nan":
            return float("nan")
        return 1.0

    async def finalize_interaction(self, instance_id, **kwargs):
        fault = self._instance_dict.pop(instance_id, None)
        self.finalized.append(instance_id)
        if fault == "hang":
            sys.stderr.write("FINALIZED\\n")
        if fault == "finalize":
            raise OSError("boom in finalize")
"""

#: fault -> the lifecycle method the error must name (None: the episode succeeds).
FAULTS: dict[str, str | None] = {
    "start": "start_interaction",
    "generate": "generate_response",
    "score": "calculate_score",
    "finalize": "finalize_interaction",
    "wrong_result": "generate_response",
    "wrong_field": "generate_response",
    "score_type": "calculate_score",
    "hang": "generate_response",  # with a timeout
    "start_hang": "start_interaction",  # with a timeout
    "huge": None,
    "start_returns_int": None,  # the runtime keeps the id it passed
}
#: Non-finite scores: the conformance checker rejects them; the runtime should too.
NON_FINITE = {
    "nan": "generate_response",
    "inf": "generate_response",
    "score_nan": "calculate_score",
}

CONFIG = "interaction:\n  - name: faulty\n"


@pytest.fixture
def installed(make_dist, forget_modules, tmp_path: Path) -> Path:
    make_dist(
        "acme-faulty",
        "1.0",
        {"interactions_core.interactions": {"faulty": "acme_faulty:FaultyInteraction"}},
        {"acme_faulty": FAULTY},
    )
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    return config


def sample(fault: str | None, i: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"name": "faulty"}
    if fault is not None:
        kwargs["fault"] = fault
    return {
        "id": f"{fault or 'ok'}-{i}",
        "prompt": [{"role": "user", "content": "2+2?"}],
        "responses": ["4"],
        "extra_info": {"interaction_kwargs": kwargs},
    }


def dataset(tmp_path: Path, faults: list[str | None]) -> Path:
    path = tmp_path / "data.jsonl"
    rows = [sample(f, i) for i, f in enumerate(faults)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def strict_json(line: str) -> Any:
    """``json.loads`` that refuses NaN and Infinity, as most JSON readers do."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


# -- through the library ---------------------------------------------------------------------


async def play(config: Path, faults: list[str | None], **options: Any) -> tuple[Any, Any, Any]:
    interactions = initialize_interactions_from_config(str(config))
    runner = Runner(ReplayPolicy(), interactions, observe=False, **options)
    samples = [sample(f, i) for i, f in enumerate(faults)]
    summary = await runner.run(samples, keep_records=True)
    return summary, runner, interactions["faulty"]


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_each_fault_costs_only_its_episode(installed: Path, fault: str) -> None:
    faults: list[str | None] = [None, fault, None, None]
    summary, runner, plugin = await play(installed, faults, concurrency=4, timeout=0.5)
    records = {r.index: r for r in summary.records}
    assert summary.episodes == 4
    for i in (0, 2, 3):
        assert records[i].ok and records[i].end_reason == "terminated"
    bad = records[1]
    method = FAULTS[fault]
    if method is None:
        assert bad.ok and bad.end_reason == "terminated"
    else:
        assert not bad.ok and bad.end_reason == "error"
        [error] = bad.errors
        assert error["where"] == method
        assert error["interaction"] == "faulty"
        assert error["instance_id"] == bad.instance_id
        message = error["message"]
        assert "'faulty'" in message and repr(bad.instance_id) in message and method in message
        assert summary.errors == 1 and summary.error_examples[0]["where"] == method
    assert runner.open_sessions == 0
    assert plugin._instance_dict == {}  # every session finalized, on every path
    # a start_interaction that raised opened no session: it is not finalized
    assert len(plugin.finalized) == (3 if method == "start_interaction" else 4)


@pytest.mark.parametrize("fault", list(NON_FINITE))
async def test_non_finite_scores_are_errors(installed: Path, fault: str) -> None:
    summary, runner, _ = await play(installed, [None, fault])
    records = {r.index: r for r in summary.records}
    assert records[0].ok
    assert not records[1].ok and records[1].errors[0]["where"] == NON_FINITE[fault]
    assert summary.final_score_mean is not None and math.isfinite(summary.final_score_mean)
    assert runner.open_sessions == 0


async def test_a_hang_without_timeout_blocks_only_its_slot_until_cancelled(
    installed: Path,
) -> None:
    interactions = initialize_interactions_from_config(str(installed))
    plugin = interactions["faulty"]
    runner = Runner(ReplayPolicy(), interactions, observe=False, concurrency=3)
    samples = [sample("hang", 0)] + [sample(None, i) for i in range(1, 9)]
    done: list[Any] = []

    def on_record(record: Any) -> None:
        done.append(record)
        if len(done) == 8:  # every other episode finished; only the hang is left
            asyncio.get_running_loop().call_soon(runner.cancel)

    summary = await asyncio.wait_for(runner.run(samples, on_record=on_record), 10)
    assert summary.interrupted and summary.episodes == 8 and summary.errors == 0
    assert runner.open_sessions == 0 and plugin._instance_dict == {}
    assert len(plugin.finalized) == 9  # the hung session too


async def test_task_cancellation_finalizes_every_open_session(installed: Path) -> None:
    interactions = initialize_interactions_from_config(str(installed))
    plugin = interactions["faulty"]
    runner = Runner(ReplayPolicy(), interactions, observe=False, concurrency=4)
    samples = [sample("hang", i) for i in range(4)] + [sample("start_hang", 4)]
    task = asyncio.ensure_future(runner.run(samples))
    while runner.open_sessions < 4:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runner.open_sessions == 0 and plugin._instance_dict == {}
    assert len(plugin.finalized) == 4


# -- through `interactions run` -------------------------------------------------------------


def test_run_reports_every_fault_in_its_summary(installed: Path, tmp_path: Path) -> None:
    faults: list[str | None] = [None, *FAULTS, None]
    data = dataset(tmp_path, faults)
    out = tmp_path / "records.jsonl"
    code, stdout, stderr = run_cli(
        "run", str(installed), "--data", str(data), "--output", str(out),
        "--timeout", "0.5", "--concurrency", "8", "--json", "--no-progress",
    )  # fmt: skip
    failing = [f for f in FAULTS if FAULTS[f]]
    assert code == 1
    summary = json.loads(stdout)
    assert summary["episodes"] == len(faults)
    assert summary["errors"] == len(failing)
    assert f"{len(failing)} of {len(faults)} episode(s) errored" in stderr
    assert "Traceback" not in stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(faults)
    records = {r["sample_id"]: r for r in map(strict_json, lines)}
    for i, fault in enumerate(faults):
        record = records[f"{fault or 'ok'}-{i}"]
        method = FAULTS.get(fault) if fault else None
        if method is None:
            assert record["errors"] == [] and record["end_reason"] == "terminated"
        else:
            assert record["errors"][0]["where"] == method
            assert record["errors"][0]["instance_id"] == record["instance_id"]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_finalizes_flushes_whole_lines_and_says_so(
    installed: Path, site_dir: Path, tmp_path: Path
) -> None:
    faults: list[str | None] = [None] * 200 + ["hang"] * 3
    data = dataset(tmp_path, faults)
    out = tmp_path / "records.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": str(site_dir),
        "INTERACTIONS_DISABLE": "interactions-reasoning-gym",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "interactions_core", "run", str(installed), "--data", str(data),
         "--output", str(out), "--concurrency", "4", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    hanging = 0
    deadline = time.monotonic() + 60
    while hanging < 3 and time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "the run ended before the hangs started"
        hanging += line.strip() == "HANGING"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.count("FINALIZED") == 3  # every hung session was finalized
    assert "interrupted after 200 episode(s)" in stderr and "(0 left open)" in stderr
    assert "Traceback" not in stderr and "interrupted       yes" in stdout
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == 200
    assert all(strict_json(line)["end_reason"] == "terminated" for line in lines)


def test_run_output_is_never_silently_overwritten(installed: Path, tmp_path: Path) -> None:
    data = dataset(tmp_path, [None, None])
    out = tmp_path / "records.jsonl"
    trace = tmp_path / "trace.jsonl"
    args = ["run", str(installed), "--data", str(data), "--output", str(out), "--no-progress"]
    assert run_cli(*args, "--trace", str(trace))[0] == 0
    before, before_trace = out.read_bytes(), trace.read_bytes()
    code, _, stderr = run_cli(*args)
    assert code == 1 and "refusing to overwrite" in stderr
    code, _, stderr = run_cli(*args[:-3], "--output", str(tmp_path / "new.jsonl"), "--trace",
                              str(trace), "--no-progress")  # fmt: skip
    assert code == 1 and "refusing to overwrite" in stderr
    assert out.read_bytes() == before and trace.read_bytes() == before_trace
    assert not (tmp_path / "new.jsonl").exists()  # refused before anything was written
    assert run_cli(*args, "--overwrite")[0] == 0
    assert len(out.read_text().splitlines()) == 2


def test_output_lines_are_strict_json_even_with_non_finite_scores(
    installed: Path, tmp_path: Path
) -> None:
    data = dataset(tmp_path, ["nan", "inf", None])
    out = tmp_path / "records.jsonl"
    run_cli("run", str(installed), "--data", str(data), "--output", str(out), "--no-progress")
    for line in out.read_text().splitlines():
        strict_json(line)


# -- through the verl-compatible API, calling the methods directly -------------------------


def test_verl_loader_is_all_or_nothing(installed: Path, tmp_path: Path) -> None:
    config = tmp_path / "two.yaml"
    config.write_text(
        "interaction:\n  - name: gsm8k\n  - name: bad\n    plugin: faulty\n"
        "    config: {fail_init: true}\n"
    )
    with pytest.raises(
        ConfigError, match=r"two.yaml:3: interaction\[1\].*'bad'.*cannot initialise"
    ):
        initialize_interactions_from_config(str(config))


@pytest.mark.parametrize("fault", [f for f in FAULTS if FAULTS[f]])
async def test_direct_calls_in_a_session_always_finalize(installed: Path, fault: str) -> None:
    """verl's rollout calls the methods itself; ``Session`` adds naming, timeouts, cleanup."""
    plugin = initialize_interactions_from_config(str(installed))["faulty"]
    tracker = SessionTracker()
    messages = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    with pytest.raises(InteractionCallError) as info:
        async with Session(plugin, instance_id="s-1", timeout=0.5, tracker=tracker) as session:
            await session.start(fault=fault)
            await session.respond(messages)
            await session.score()
    error = info.value
    assert (error.interaction, error.instance_id, error.method) == ("faulty", "s-1", FAULTS[fault])
    assert "'faulty'" in str(error) and "'s-1'" in str(error) and FAULTS[fault] in str(error)
    assert tracker.open == 0 and plugin._instance_dict == {}


async def test_direct_calls_propagate_the_plugins_own_exception(installed: Path) -> None:
    """Without a Session nothing sits between the caller and the plugin (verl's convention)."""
    plugin = initialize_interactions_from_config(str(installed))["faulty"]
    sid = await plugin.start_interaction(None, fault="generate")
    with pytest.raises(ValueError, match="boom in generate"):
        await plugin.generate_response(sid, [{"role": "assistant", "content": "4"}])
    await plugin.finalize_interaction(sid)
    assert plugin._instance_dict == {}


CONTENTS: dict[str, Any] = {
    "None": None,
    "list of parts": [{"type": "text", "text": "#### 4"}, {"type": "image_url", "image_url": {}}],
    "list of strings": ["The answer is ", "#### 4"],
    "an int": 4,
    "a dict": {"text": "#### 4"},
    "huge": "x" * (4 * 1024 * 1024) + " #### 4",
    "empty": "",
}


@pytest.mark.parametrize("label", list(CONTENTS))
async def test_bundled_plugins_accept_any_message_content(tmp_path: Path, label: str) -> None:
    config = tmp_path / "bundled.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n  - name: weather\n")
    interactions = initialize_interactions_from_config(str(config))
    content = CONTENTS[label]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "2+2?"},
        {"role": "tool", "content": content},
        {"role": "assistant", "content": content},
        {"role": "assistant"},  # no content key at all
        {"role": "assistant", "content": content},
    ]
    for name, interaction in interactions.items():
        sid = await interaction.start_interaction(None, ground_truth="4")
        try:
            # A plugin may return verl's plain 4-tuple: coerce checks every field's type.
            result = InteractionResult.coerce(await interaction.generate_response(sid, messages))
            assert isinstance(result.score, float) and math.isfinite(result.score), name
            assert isinstance(result.content, str) and isinstance(result.should_terminate, bool)
            score = await interaction.calculate_score(sid)
            assert isinstance(score, float) and math.isfinite(score)
        finally:
            await interaction.finalize_interaction(sid)
    gsm8k = interactions["gsm8k"]
    if label in ("list of parts", "list of strings", "huge"):
        sid = await gsm8k.start_interaction(None, ground_truth="4")
        _, _, score, _ = await gsm8k.generate_response(sid, messages)
        assert score == 1.0, label
        await gsm8k.finalize_interaction(sid)


@pytest.mark.skipif(sys.platform != "linux", reason="tmpfs mounts are Linux-only")
def test_a_full_disk_leaves_whole_lines_and_a_clear_message(tmp_path: Path) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(target)]
    if subprocess.run(mount, capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        data = tmp_path / "d.jsonl"
        row = {"prompt": [{"role": "user", "content": "q" * 200}], "responses": ["a" * 300]}
        data.write_text((json.dumps(row) + "\n") * 300)
        out = target / "records.jsonl"
        code, _, stderr = run_cli("run", "--data", str(data), "--output", str(out), "--no-progress")
        assert code == 1
        assert "No space left" in stderr and "unexpected" not in stderr, stderr
        text = out.read_text(encoding="utf-8")
        assert text == "" or text.endswith("\n")
        for line in text.splitlines():
            strict_json(line)
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)
