"""``interactions run`` and ``interactions data`` end to end."""

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

from interactions_core.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = str(ROOT / "examples" / "config.yaml")
EXAMPLE_DATA = str(ROOT / "examples" / "gsm8k_demo.jsonl")


def rows(path: Path, items: list[Any]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


def row(responses: list[str], **kwargs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"prompt": [{"role": "user", "content": "2+2?"}], "responses": responses}
    if kwargs:
        out["extra_info"] = {"interaction_kwargs": kwargs}
    return out


def test_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA]) == 0
    out = capsys.readouterr().out
    assert "episodes          11  (11 ok, 0 errored)" in out
    assert "terminated        9 (81.8%)" in out
    assert "assistant turns   1: 4  2: 4  3: 3" in out


def test_json_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"episodes", "terminated", "turns", "final_score_mean", "errors"} <= set(data)
    assert data["turns"] == {"1": 4, "2": 4, "3": 3} and data["errors"] == 0
    assert data["final_score_mean"] == pytest.approx(9 / 11)


def test_output_is_never_silently_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "records.jsonl"
    out.write_text("keep me\n")
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--output", str(out)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert out.read_text() == "keep me\n"
    args = ["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--output", str(out), "--overwrite"]
    assert main(args) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["sample_id"] for r in records)[0] == "demo-01" and len(records) == 11


def test_trace_file(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--trace", str(trace)]) == 0
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.count("session_start") == kinds.count("session_end") == 11
    assert kinds.count("turn") == 4 + 2 * 4 + 3 * 3
    turn = next(e for e in events if e["event"] == "turn")
    assert {"assistant", "content", "score", "should_terminate", "turn"} <= set(turn)


def test_errored_episodes_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = rows(
        tmp_path / "d.jsonl",
        [row(["4"], name="gsm8k", ground_truth="4"), row(["4"], name="gsmk8", ground_truth="4")],
    )
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data)]) == 1
    captured = capsys.readouterr()
    assert "episodes          2  (1 ok, 1 errored)" in captured.out
    assert "1 of 2 episode(s) errored" in captured.err
    assert "did you mean 'gsm8k'" in captured.err


def test_bad_rows_skipped_or_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(row(["4"], name="gsm8k", ground_truth="4")) + "\n{broken\n")
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["skipped_rows"] == 1
    assert f"{data}:2: invalid JSON" in captured.err
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "--strict"]) == 1
    assert "d.jsonl:2: invalid JSON" in capsys.readouterr().err


def test_no_config_runs_single_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = rows(tmp_path / "d.jsonl", [row(["a", "b"], name="gsm8k"), row(["c"])])
    assert main(["run", "--data", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["turns"] == {"1": 2} and summary["end_reasons"] == {"single_turn": 2}
    assert "no CONFIG was given, so 1 sample(s)" in captured.err
    assert main(["run", "--data", str(data), "--default-interaction", "gsm8k"]) == 1
    assert "needs a CONFIG" in capsys.readouterr().err


def test_turn_limits_and_policy_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = rows(
        tmp_path / "d.jsonl", [{**row([], name="gsm8k", ground_truth="9"), "alt": ["1", "2", "3"]}]
    )
    args = ["run", EXAMPLE_CONFIG, "--data", str(data), "--json", "-p", "field=alt"]
    assert main([*args, "--max-assistant-turns", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["end_reasons"] == {"max_assistant_turns": 1}
    assert main([*args, "--max-user-turns", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["turns"] == {"2": 1}
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "-p", "feild=alt"]) == 1
    assert "did you mean 'field'" in capsys.readouterr().err
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "--policy", "replai"]) == 1
    assert "did you mean 'replay'" in capsys.readouterr().err


def test_list_policies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--list-policies", "--json"]) == 0
    names = {p["name"] for p in json.loads(capsys.readouterr().out)}
    assert {"replay", "openai", "human"} <= names


BUILDER_PLUGIN = '''
from interactions_core._spec import hookimpl

def build_numbers(*, count: int = 2, name: str = "adder", with_responses: bool = False):
    """Tiny arithmetic rows for tests."""
    if count < 0:
        raise ValueError("count must be >= 0")
    for i in range(count):
        row = {
            "prompt": [{"role": "user", "content": f"{i}+{i}?"}],
            "extra_info": {"interaction_kwargs": {"name": name, "ground_truth": str(2 * i)}},
        }
        if with_responses:
            row["responses"] = [str(2 * i)]
        yield row

@hookimpl
def register_dataset_builders(register):
    register("numbers", build_numbers, description="numbers for tests")
'''


@pytest.fixture
def builder_dist(make_dist: Any, forget_modules: None) -> None:
    make_dist(
        "acme-builders",
        entry_points={"interactions_core.plugins": {"builders": "acme_builders"}},
        modules={"acme_builders": BUILDER_PLUGIN},
    )


def test_data_lists_and_runs_builders(
    builder_dist: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["data", "--json"]) == 0
    (info,) = [b for b in json.loads(capsys.readouterr().out) if b["name"] == "numbers"]
    assert info["distribution"] == "acme-builders" and info["options"]["count"] == 2
    out = tmp_path / "rows.jsonl"
    assert (
        main(
            [
                "data",
                "numbers",
                "--count",
                "3",
                "--with-responses",
                "--name",
                "gsm8k",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert "wrote 3 rows" in capsys.readouterr().err
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written[2]["responses"] == ["4"]
    assert written[2]["extra_info"]["interaction_kwargs"]["ground_truth"] == "4"
    # the rows run as they are
    assert main(["run", EXAMPLE_CONFIG, "--data", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["terminated"] == 3
    assert main(["data", "numbers", "--output", str(out)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err


def test_data_errors_teach(
    builder_dist: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "rows.jsonl")
    assert main(["data", "numbers", "--cuont", "3", "--output", out]) == 1
    assert "did you mean --count" in capsys.readouterr().err
    assert main(["data", "numbers", "--count", "x", "--output", out]) == 1
    assert "'x' is not a valid int" in capsys.readouterr().err
    assert main(["data", "numbers", "--count", "-1", "--output", out]) == 1
    assert "count must be >= 0" in capsys.readouterr().err
    assert not os.path.exists(out)
    assert main(["data", "numbrs", "--output", out]) == 1
    assert "did you mean 'numbers'" in capsys.readouterr().err
    assert main(["data", "numbers", "--help"]) == 0
    assert "--with-responses  (default False)" in capsys.readouterr().out


HANG = """
import asyncio
from interactions_core._interaction import SessionInteraction
from interactions_core._interaction import InteractionResult

class HangInteraction(SessionInteraction):
    async def respond(self, state, messages, **kwargs):
        if state.get("hang"):
            await asyncio.sleep(3600)
        return InteractionResult(True, "ok", 1.0)

    def end_session(self, state):
        print("finalized", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_finalizes_flushes_and_exits_130(tmp_path: Path) -> None:
    (tmp_path / "hangmod.py").write_text(HANG)
    config = tmp_path / "config.yaml"
    config.write_text("interaction:\n  - name: hang\n    class_name: hangmod.HangInteraction\n")
    data = rows(
        tmp_path / "d.jsonl",
        [row(["a"], name="hang")] * 5 + [row(["a"], name="hang", hang=True)] * 4,
    )
    out = tmp_path / "records.jsonl"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "INTERACTIONS_NO_CACHE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "interactions_core",
            "run",
            str(config),
            "--data",
            str(data),
            "--output",
            str(out),
            "--concurrency",
            "4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    finalized = 0
    deadline = time.monotonic() + 30
    while finalized < 5 and time.monotonic() < deadline:  # the 5 quick episodes are done
        if proc.stdout.readline().strip() == "finalized":
            finalized += 1
    time.sleep(0.2)  # the 4 hanging episodes are now open
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stdout.count("finalized") == 4  # every open session was finalized
    assert "interrupted after 5 episode(s)" in stderr and "(0 left open)" in stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line)["end_reason"] == "terminated" for line in lines)
