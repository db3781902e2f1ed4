"""Server faults: every episode ends scored or as an error naming the failing call.

The simulator and judge server fails 10 % of requests with HTTP 503 and drops
2 % of connections after reading the request. With one retry per request some
episodes still fail; each such record says which call failed after which turn,
and ``--retry-errors`` (a ``--resume`` that replays errored samples too)
completes the run: every sample ends with exactly one scored record in the end.
A run stopped part-way (SIGTERM) is completed the same way, ``--resume`` first.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from usersim_server import ScriptedServer
from usersim_support import config_text, samples, script, write_jsonl

EPISODES = 120
FAILED_CALL = re.compile(
    r"ModelCallError: usersim: the (simulator|judge) call after assistant turn \d+ failed: "
    r"http://127\.0\.0\.1:\d+/v1/chat/completions failed 2 times; last error: "
)


def run(folder: Path, *args: str) -> tuple[int, dict]:
    command = [sys.executable, "-m", "interactions_core", "run", "config.yaml", "--data"]
    command += ["data.jsonl", "--output", "out.jsonl", "--no-progress", "--json", *args]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600)
    return done.returncode, json.loads(done.stdout)


def final_records(path: Path) -> dict[str, dict]:
    """The last record of every sample (what a resumed run's summary counts)."""
    last = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        last[record["sample_id"]] = record
    return last


def test_faults_end_episodes_as_named_errors_and_a_resume_completes_the_run(
    tmp_path: Path,
) -> None:
    server = ScriptedServer(script, fail_rate=0.10, drop_rate=0.02, seed=7)
    try:
        options = {"retries": 1, "backoff": 0.01, "timeout": 10}
        (tmp_path / "config.yaml").write_text(config_text(server.url, **options), "utf-8")
        write_jsonl(tmp_path / "data.jsonl", samples(EPISODES))
        code, summary = run(tmp_path, "--concurrency", "32")
        first = final_records(tmp_path / "out.jsonl")
        assert len(first) == EPISODES  # every sample accounted for
        errored = [r for r in first.values() if r["errors"]]
        assert errored, "with one retry, some episodes must fail at 12 % faults"
        assert code == 1 and summary["errors"] == len(errored)
        for record in first.values():
            if record["errors"]:
                assert record["end_reason"] == "error" and record["final_score"] is None
                (error,) = record["errors"]
                assert FAILED_CALL.search(error["message"]), error["message"]
                assert "503" in error["message"] or "Error" in error["message"]
            else:
                assert record["final_score"] in (0.3,)  # the scripted judge's verdict
        assert server.failed > 0 and server.dropped > 0

        for _ in range(10):  # each round replays only what failed
            code, summary = run(tmp_path, "--retry-errors")
            if code == 0:
                break
        assert code == 0, summary
    finally:
        server.close()
    final = final_records(tmp_path / "out.jsonl")
    assert len(final) == EPISODES
    assert all(not r["errors"] and r["final_score"] == 0.3 for r in final.values())
    assert summary["episodes"] == EPISODES and summary["errors"] == 0


def test_a_run_stopped_midway_under_faults_is_completed_by_resume(tmp_path: Path) -> None:
    """SIGTERM part-way through; ``--resume`` then ``--retry-errors`` finish every sample."""
    server = ScriptedServer(script, latency=0.02, fail_rate=0.10, drop_rate=0.02, seed=11)
    try:
        options = {"retries": 1, "backoff": 0.01, "timeout": 10}
        (tmp_path / "config.yaml").write_text(config_text(server.url, **options), "utf-8")
        write_jsonl(tmp_path / "data.jsonl", samples(60))
        command = [sys.executable, "-m", "interactions_core", "run", "config.yaml", "--data"]
        command += ["data.jsonl", "--output", "out.jsonl", "--no-progress", "--concurrency", "4"]
        out = tmp_path / "out.jsonl"
        proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and len(out.read_text(encoding="utf-8").splitlines()) >= 10:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143  # stopped, not finished
        stopped = final_records(out)
        assert 10 <= len(stopped) < 60
        code, summary = run(tmp_path, "--resume")
        for _ in range(10):
            if code == 0:
                break
            code, summary = run(tmp_path, "--retry-errors")
        assert code == 0, summary
    finally:
        server.close()
    final = final_records(out)
    assert sorted(final) == sorted(f"s{i}" for i in range(60))
    assert all(not r["errors"] and r["final_score"] == 0.3 for r in final.values())
    assert summary["episodes"] == 60 and summary["errors"] == 0
