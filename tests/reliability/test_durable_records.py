"""Finished records survive: long tails, SIGTERM, kill -9, and ``--resume``.

Real ``interactions run`` processes play a tiny installed plugin (``slow``)
whose episodes take as long as their sample says; the tests signal or kill
them midway and read what reached the files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SLOW = """
import asyncio
import sys
from interactions_core import BaseInteraction, InteractionResult


class Slow(BaseInteraction):
    def __init__(self, config):
        super().__init__(config)
        self.sessions = {}

    async def start_interaction(self, instance_id=None, delay=0, fail=False, tag="", **kw):
        sys.stderr.write(f"RAN {tag}\\n")
        sys.stderr.flush()
        self.sessions[instance_id] = (delay, fail)
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        delay, fail = self.sessions[instance_id]
        if delay >= 30:
            sys.stderr.write("SLOW\\n")
            sys.stderr.flush()
        await asyncio.sleep(delay)
        if fail:
            raise ValueError("this sample always fails")
        return InteractionResult(True, "fine", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0

    async def finalize_interaction(self, instance_id, **kwargs):
        delay, _ = self.sessions.pop(instance_id)
        if delay >= 30:
            sys.stderr.write("FINALIZED\\n")
            sys.stderr.flush()
"""


@pytest.fixture
def slow(make_dist, forget_modules, tmp_path: Path, site_dir: Path) -> dict[str, Any]:
    make_dist(
        "acme-slow",
        "1.0",
        {"interactions_core.interactions": {"slow": "acme_slow:Slow"}},
        {"acme_slow": SLOW},
    )
    config = tmp_path / "config.yaml"
    config.write_text("interaction:\n  - name: slow\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(site_dir),
        "INTERACTIONS_DISABLE": "interactions-reasoning-gym",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return {"config": config, "env": env, "tmp": tmp_path}


def write_data(path: Path, delays: list[float], fail: set[int] = frozenset()) -> Path:  # type: ignore[assignment]
    rows = []
    for i, delay in enumerate(delays):
        kwargs = {"name": "slow", "delay": delay, "tag": f"s{i}", "fail": i in fail}
        rows.append(
            {
                "id": f"s{i}",
                "prompt": [{"role": "user", "content": "hi"}],
                "responses": ["4"],
                "extra_info": {"interaction_kwargs": kwargs},
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def start(slow: dict[str, Any], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "interactions_core", "run", str(slow["config"]), *args,
         "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=slow["env"],
    )  # fmt: skip


def wait_for_markers(proc: subprocess.Popen[str], marker: str, count: int) -> list[str]:
    assert proc.stderr is not None
    seen, lines = 0, []
    deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "the run ended early:\n" + "".join(lines)
        lines.append(line)
        seen += line.strip() == marker
    return lines


def whole_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "the file ends with a partial line"
    return [json.loads(line) for line in text.splitlines()]


def wait_for_lines(path: Path, count: int, within: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if path.exists() and path.read_text().count("\n") >= count:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{path.name} did not reach {count} lines within {within} s")


def test_records_reach_the_files_while_the_last_episodes_are_slow(
    slow: dict[str, Any],
) -> None:
    data = write_data(slow["tmp"] / "data.jsonl", [0] * 10 + [60, 60])
    out, trace = slow["tmp"] / "records.jsonl", slow["tmp"] / "trace.jsonl"
    proc = start(slow, "--data", str(data), "--output", str(out), "--trace", str(trace))
    try:
        wait_for_markers(proc, "SLOW", 2)
        # the ten fast episodes are over: their records must be on disk within a second
        wait_for_lines(out, 10, within=3.0)
        wait_for_lines(trace, 10 * 3, within=3.0)
        proc.kill()  # kill -9: nothing is flushed at exit
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    records = whole_lines(out)
    assert sorted(r["index"] for r in records) == list(range(10))
    assert whole_lines(trace)


@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated")])
def test_sigterm_is_handled_like_the_first_ctrl_c(
    slow: dict[str, Any], sig: int, code: int, word: str
) -> None:
    data = write_data(slow["tmp"] / "data.jsonl", [0] * 10 + [60, 60])
    out = slow["tmp"] / "records.jsonl"
    proc = start(slow, "--data", str(data), "--output", str(out))
    wait_for_markers(proc, "SLOW", 2)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    assert stderr.count("FINALIZED") == 2
    assert f"{word} after 10 episode(s)" in stderr and "(0 left open)" in stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    assert "interrupted       yes" in stdout
    assert len(whole_lines(out)) == 10


def ran(stderr: str) -> set[str]:
    return {line.split()[1] for line in stderr.splitlines() if line.startswith("RAN ")}


def test_resume_after_kill_9_runs_exactly_the_missing_samples(slow: dict[str, Any]) -> None:
    n = 60
    data = write_data(slow["tmp"] / "data.jsonl", [0.05] * n, fail={7})
    out = slow["tmp"] / "records.jsonl"
    args = ["--data", str(data), "--output", str(out), "--concurrency", "2"]
    proc = start(slow, *args)
    try:
        wait_for_lines(out, 10, within=30)
        proc.kill()
        proc.wait(10)
    finally:
        proc.communicate()
    before = whole_lines(out)
    assert 10 <= len(before) < n
    done = {r["sample_id"] for r in before}
    assert all(r["config_hash"] and r["data_hash"] for r in before)

    proc = start(slow, *args, "--resume", "--json")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr  # sample 7 errors, in either run
    assert ran(stderr) == {f"s{i}" for i in range(n)} - done, stderr
    summary = json.loads(stdout)
    assert summary["episodes"] == n and summary["errors"] == 1
    assert f"{len(before)} episode(s) from earlier runs, {n - len(before)} played now" in stderr
    after = whole_lines(out)
    assert after[: len(before)] == before  # appended, nothing rewritten
    assert sorted(r["index"] for r in after) == list(range(n))  # each sample once

    # A finished file: nothing runs, and the summary still covers the whole dataset.
    proc = start(slow, *args, "--resume", "--json")
    stdout, stderr = proc.communicate(timeout=60)
    assert ran(stderr) == set()
    assert json.loads(stdout)["episodes"] == n and proc.returncode == 1
    assert len(whole_lines(out)) == n

    # --retry-errors plays the errored sample again, and only it.
    proc = start(slow, *args, "--retry-errors", "--json")
    stdout, stderr = proc.communicate(timeout=60)
    assert ran(stderr) == {"s7"}
    summary = json.loads(stdout)
    assert summary["episodes"] == n and summary["errors"] == 1
    assert len(whole_lines(out)) == n + 1


def test_resume_refuses_records_of_another_config_or_dataset(slow: dict[str, Any]) -> None:
    data = write_data(slow["tmp"] / "data.jsonl", [0] * 5)
    out = slow["tmp"] / "records.jsonl"
    proc = start(slow, "--data", str(data), "--output", str(out))
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    saved = out.read_bytes()

    other = write_data(slow["tmp"] / "other.jsonl", [0] * 6)
    proc = start(slow, "--data", str(other), "--output", str(out), "--resume")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "another dataset" in stderr and "Traceback" not in stderr

    proc = start(slow, "--data", str(data), "--output", str(out), "--resume",
                 "--max-assistant-turns", "3")  # fmt: skip
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "another config" in stderr
    assert out.read_bytes() == saved  # refused before anything was written


def test_resume_cuts_a_partial_last_line_and_plays_that_sample(slow: dict[str, Any]) -> None:
    data = write_data(slow["tmp"] / "data.jsonl", [0] * 4)
    out = slow["tmp"] / "records.jsonl"
    proc = start(slow, "--data", str(data), "--output", str(out))
    proc.communicate(timeout=60)
    lines = out.read_text().splitlines(keepends=True)
    by_index = sorted(lines, key=lambda line: json.loads(line)["index"])
    out.write_text("".join(by_index[:3]) + by_index[3][:25])  # a crash mid-write
    proc = start(slow, "--data", str(data), "--output", str(out), "--resume")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert ran(stderr) == {"s3"}
    assert sorted(r["index"] for r in whole_lines(out)) == [0, 1, 2, 3]


def test_resume_needs_an_output_and_refuses_overwrite(slow: dict[str, Any]) -> None:
    data = write_data(slow["tmp"] / "data.jsonl", [0])
    proc = start(slow, "--data", str(data), "--resume")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "--resume needs --output" in stderr
    out = slow["tmp"] / "r.jsonl"
    proc = start(slow, "--data", str(data), "--output", str(out), "--resume", "--overwrite")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "choose one" in stderr


def test_the_documented_resume_command(slow: dict[str, Any]) -> None:
    import re
    import shlex

    doc = (Path(__file__).resolve().parents[2] / "docs" / "run.md").read_text(encoding="utf-8")
    section = doc.split("### Resuming a stopped run", 1)[1]
    command = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert command is not None
    words = shlex.split(command.group(1))
    assert words[:2] == ["interactions", "run"] and "--resume" in words
    tmp = slow["tmp"]
    files = {"config.yaml": str(slow["config"]), "data.jsonl": str(tmp / "data.jsonl"),
             "records.jsonl": str(tmp / "records.jsonl")}  # fmt: skip
    write_data(tmp / "data.jsonl", [0] * 5)
    (tmp / "records.jsonl").write_text("")
    args = [files.get(w, w) for w in words[2:]]
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", "run", *args, "--no-progress"],
        capture_output=True, text=True, env=slow["env"], timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(whole_lines(tmp / "records.jsonl")) == 5
