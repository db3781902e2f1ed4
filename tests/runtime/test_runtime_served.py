"""Served-model evaluation: one concurrency knob, --repeat with pass@k, usage and latency.

Against real HTTP servers on 127.0.0.1 started by the tests.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_server import LearningServer

from interactions_core.cli import main

QUESTIONS = {f"What is {i} + {i}?": str(2 * i) for i in range(1, 7)}
CONFIG = "interaction:\n  - name: gsm8k\n"


@pytest.fixture
def server() -> Iterator[LearningServer]:
    srv = LearningServer(QUESTIONS)
    yield srv
    srv.close()


def write_data(folder: Path, questions: dict[str, str] = QUESTIONS) -> tuple[str, str]:
    data = folder / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "prompt": [{"role": "user", "content": q}],
                    "interaction_kwargs": {"name": "gsm8k", "ground_truth": a},
                }
            )
            + "\n"
            for i, (q, a) in enumerate(questions.items())
        )
    )
    config = folder / "gsm8k.yaml"
    config.write_text(CONFIG)
    return str(config), str(data)


def run_json(
    capsys: pytest.CaptureFixture[str], url: str, config: str, data: str, *extra: str
) -> tuple[int, dict[str, Any]]:
    code = main(
        [
            "run",
            config,
            "--data",
            data,
            "--policy",
            "openai",
            "--model",
            "tiny",
            "--base-url",
            url,
            "--max-assistant-turns",
            "1",
            "--json",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_repeat_gives_exact_pass_at_k_usage_and_distinct_seeds(
    server: LearningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, data = write_data(tmp_path)
    out = tmp_path / "records.jsonl"
    code, summary = run_json(
        capsys,
        server.url,
        config,
        data,
        "--repeat",
        "2",
        "-p",
        "seed=7",
        "-p",
        "temperature=0.8",
        "-p",
        'extra_body={"top_k": 20}',
        "--output",
        str(out),
    )
    assert code == 0, summary
    n = len(QUESTIONS)
    assert summary["episodes"] == 2 * n
    # Each question: first request wrong, second right, whatever the order.
    assert summary["pass_at_k"] == {"1": 0.5, "2": 1.0}
    groups = summary["prompt_groups"]
    assert groups["repeat"] == 2 and groups["prompts"] == n
    assert groups["by_interaction"]["gsm8k"]["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert groups["uniform_groups"] == 0
    assert groups["score_std_mean"] == pytest.approx(2**-0.5)  # scores {0, 1}: std 1/sqrt(2)

    usage = summary["usage"]
    assert usage["prompt_tokens"] == server.sent_prompt_tokens
    assert usage["completion_tokens"] == server.sent_completion_tokens
    assert usage["requests"] == len(server.requests) == 2 * n
    assert usage["prompt_tokens_per_episode"] == pytest.approx(server.sent_prompt_tokens / (2 * n))
    latency = usage["latency_s"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]

    records = read_records(out)
    assert sorted((r["index"], r["repeat"]) for r in records) == [
        (i, r) for i in range(n) for r in range(2)
    ]
    assert sum(r["usage"]["prompt_tokens"] for r in records) == server.sent_prompt_tokens
    assert sum(r["usage"]["completion_tokens"] for r in records) == server.sent_completion_tokens
    for r in records:
        (turn,) = r["usage"]["turns"]
        assert turn["prompt_tokens"] == r["usage"]["prompt_tokens"] and turn["latency_s"] > 0

    # Sampling parameters pass through; repeat r of every prompt gets seed 7 + r.
    seeds: dict[str, set[int]] = {}
    for body in server.requests:
        assert body["temperature"] == 0.8 and body["top_k"] == 20 and body["model"] == "tiny"
        seeds.setdefault(body["messages"][-1]["content"], set()).add(body["seed"])
    assert all(s == {7, 8} for s in seeds.values()) and len(seeds) == n


def test_text_summary_under_repeat(
    server: LearningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, data = write_data(tmp_path)
    args = ["run", config, "--data", data, "--policy", "openai", "--model", "tiny"]
    args += ["--base-url", server.url, "--max-assistant-turns", "1", "--repeat", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    # c = 2 of n = 3 per prompt: pass@1 = 2/3, pass@2 = pass@3 = 1.
    assert "pass@k            1: 0.667  2: 1.000  3: 1.000  (6 prompts)" in out
    assert "mean score std 0.577; 0 of 6 groups all equal" in out
    tokens = f"prompt {server.sent_prompt_tokens:,} "
    assert tokens in out and "request latency   p50 " in out and "(18 requests" in out


def test_concurrency_is_one_knob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv = LearningServer(QUESTIONS, latency=0.15)
    try:
        config, data = write_data(tmp_path)
        code, summary = run_json(
            capsys, srv.url, config, data, "--repeat", "2", "--concurrency", "6"
        )
        assert code == 0
        # 12 episodes, 6 in flight, and the policy follows: 6 requests at once.
        assert summary["requests_in_flight_max"] == 6 and srv.max_in_flight == 6
        code, summary = run_json(
            capsys, srv.url, config, data, "--concurrency", "6", "-p", "concurrency=2"
        )
        assert code == 0
        assert summary["requests_in_flight_max"] == 2  # an explicit cap still wins
    finally:
        srv.close()


def test_records_without_usage_report_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, data = write_data(tmp_path)
    out = tmp_path / "r.jsonl"
    replay = tmp_path / "replay.jsonl"
    replay.write_text(
        "".join(
            json.dumps({**json.loads(line), "responses": ["#### 2"]}) + "\n"
            for line in Path(data).read_text().splitlines()
        )
    )
    assert main(["run", config, "--data", str(replay), "--json", "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["usage"] is None and summary["requests_in_flight_max"] is None
    assert summary["pass_at_k"] == {"1": 1 / 6}  # only "What is 1 + 1?" is answered 2
    assert all(r["usage"] is None and r["repeat"] == 0 for r in read_records(out))


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_counts_episodes_not_samples(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess

    data = tmp_path / "d.jsonl"
    row = {"prompt": [{"role": "user", "content": "q"}], "responses": [["a"], ["b"], ["c"]]}
    data.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "interactions_core",
                "run",
                "--data",
                str(data),
                "--repeat",
                "3",
            ],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=60,
        )
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert b"/6  " in shown  # 2 samples x 3 repeats


@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_NOFILE")
def test_concurrency_beyond_the_open_file_limit_waits_instead_of_failing(tmp_path: Path) -> None:
    """--concurrency 100 in a process allowed 80 open files: requests queue, none fails."""
    import resource
    import subprocess

    questions = {f"What is {i} times 1?": str(i) for i in range(100)}
    config, data = write_data(tmp_path, questions)
    srv = LearningServer(questions, latency=0.1)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "interactions_core", "run", config, "--data", data),
                *("--policy", "openai", "--model", "m", "--base-url", srv.url, "--json"),
                *("--concurrency", "100", "--max-assistant-turns", "1"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (80, hard)),
        )
    finally:
        srv.close()
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["episodes"] == 100 and summary["errors"] == 0
    assert summary["requests_in_flight_max"] == 16  # 80 files less a margin of 64
    assert srv.max_in_flight <= 16


def test_a_lone_surrogate_in_the_conversation_is_sent_escaped(
    server: LearningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prompt holding a lone surrogate (valid JSON "\\ud800") failed its episode before
    any request: `'utf-8' codec can't encode character '\\ud800'`."""
    question = "What is 1 + 1? caf\ud800"
    config, data = write_data(tmp_path, {question: "2"})
    code, summary = run_json(capsys, server.url, config, data)
    assert code == 0 and summary["errors"] == 0, summary["error_examples"]
    (request,) = server.requests
    assert request["messages"][0]["content"] == question  # the server read it back whole


def test_a_resumed_summary_counts_the_earlier_records_usage(
    server: LearningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After --resume the summary's tokens and requests covered only the episodes played
    then (6 of 10), and resuming a complete file printed no usage at all."""
    config, data = write_data(tmp_path)
    out = tmp_path / "records.jsonl"
    code, _ = run_json(capsys, server.url, config, data, "--output", str(out))
    assert code == 0
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:4]) + "\n")  # as if stopped after four episodes
    for _ in range(2):  # then again, with nothing left to play
        code, summary = run_json(capsys, server.url, config, data, "--output", str(out), "--resume")
        assert code == 0
        records = read_records(out)
        usage = summary["usage"]
        assert usage["episodes"] == len(records) == len(QUESTIONS)
        assert usage["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in records)
        assert usage["completion_tokens"] == sum(r["usage"]["completion_tokens"] for r in records)
        assert usage["requests"] == sum(len(r["usage"]["turns"]) for r in records)
