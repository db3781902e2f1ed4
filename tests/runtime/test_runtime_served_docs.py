"""The served-model parts of docs/run.md and docs/policies.md, executed.

The worked example runs as written (its shell blocks, through bash) with the
base URL pointed at a stand-in server on 127.0.0.1, and must print the summary
the page shows, apart from times and latencies.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from chat_server import LearningServer

from interactions_core.runtime import run_episodes
from interactions_core.runtime.policies.openai import OpenAIPolicy

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
URL = "http://127.0.0.1:8000/v1"
VARYING = ("time ", "request latency ")  # lines whose figures depend on the machine


def section(doc: str, title: str) -> str:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    return text.split(title, 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_worked_example_against_a_local_server(gsm8k_data: Path, tmp_path: Path) -> None:
    example = section("run.md", "### Worked example: GSM8K against a local server")
    build, run = blocks(example, "sh")
    (expected,) = blocks(example, "text")
    built = bash(build.replace("../shared/data", str(SHARED)), tmp_path)
    assert built.returncode == 0, built.stderr
    rows = [json.loads(line) for line in (tmp_path / "gsm8k.jsonl").read_text().splitlines()]
    answers = {
        r["extra_info"]["interaction_kwargs"]["query"]: r["reward_model"]["ground_truth"]
        for r in rows
    }
    assert len(answers) == len(rows) == 200  # distinct questions: the stand-in keys on them
    server = LearningServer(answers)
    try:
        assert URL in run
        done = bash(run.replace(URL, server.url), tmp_path)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr

    def steady(text: str) -> list[str]:
        return [line for line in text.strip().splitlines() if not line.startswith(VARYING)]

    assert steady(done.stdout) == steady(expected)
    assert "(800 requests, at most " in done.stdout
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert sorted({(r["index"], r["repeat"]) for r in records}) == [
        (i, r) for i in range(200) for r in range(4)
    ]
    seeds = {(b["messages"][-1]["content"], b["seed"]) for b in server.requests}
    assert len(seeds) == 800 and {s for _, s in seeds} == {1234, 1235, 1236, 1237}
    assert all(b["top_k"] == 50 and b["temperature"] == 1.0 for b in server.requests)


def test_policy_usage_example_has_the_shape_the_policy_records() -> None:
    (shown,) = blocks(section("policies.md", "**Accounting.**"), "json")
    usage = json.loads(shown)
    assert usage["prompt_tokens"] == sum(t["prompt_tokens"] for t in usage["turns"])
    assert usage["completion_tokens"] == sum(t["completion_tokens"] for t in usage["turns"])
    assert usage["latency_s"] == pytest.approx(sum(t["latency_s"] for t in usage["turns"]))
    policy = OpenAIPolicy(model="m")
    state = policy.start({})
    state.turns.extend(usage["turns"])
    assert policy.usage(state) == usage


async def test_writing_a_policy_snippet_runs_with_repeat() -> None:
    (snippet,) = blocks(section("policies.md", "## Writing a policy"), "python")[:1]
    namespace: dict[str, Any] = {"__name__": "snippet"}
    exec(compile(snippet, "docs/policies.md", "exec"), namespace)
    policy = namespace["EchoPolicy"](times=2)
    samples = [{"prompt": [{"role": "user", "content": "hello"}]}]
    summary = await run_episodes(samples, policy, None, repeat=3, keep_records=True, observe=False)
    assert summary.records is not None
    assert sorted(r.repeat for r in summary.records) == [0, 1, 2]
    assert all(r.messages[-1] == {"role": "assistant", "content": "hello"} for r in summary.records)
