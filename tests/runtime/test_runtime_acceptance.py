"""Acceptance on real data: the GSM8K self-correction replay through gsm8k (flexible).

Each of the 1,319 test problems is one episode whose replies are the four recorded
model solutions in order; the interaction stops at the first correct one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interactions_core.loader import load_config
from interactions_core.runtime import ReplayPolicy, SampleReader, run_episodes

KEYS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
EXPECTED = {
    "episodes": 1319,
    "terminated": 887,
    "turns": {"1": 286, "2": 293, "3": 119, "4": 621},
    "errors": 0,
}
CONFIG = "interaction:\n  - name: gsm8k\n    config: {method: flexible}\n"


@pytest.fixture
def replay_files(gsm8k_data: Path, tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "gsm8k_replay.jsonl"
    source = gsm8k_data / "example_model_solutions.jsonl"
    with source.open(encoding="utf-8") as src, data.open("w", encoding="utf-8") as out:
        for line in src:
            row = json.loads(line)
            truth = row["ground_truth"].rsplit("A: ", 1)[1].strip().replace(",", "")
            sample = {
                "prompt": [{"role": "user", "content": row["question"]}],
                "interaction_kwargs": {"name": "gsm8k", "ground_truth": truth},
                "responses": [row[key]["solution"] for key in KEYS],
            }
            out.write(json.dumps(sample) + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    return config, data


async def test_acceptance_through_the_library(replay_files: tuple[Path, Path]) -> None:
    config, data = replay_files
    interactions = load_config(config).instantiate()
    summary = await run_episodes(
        SampleReader(data), ReplayPolicy(), interactions, concurrency=32, observe=False
    )
    result = summary.as_dict()
    assert {k: result[k] for k in EXPECTED} == EXPECTED
    assert result["final_score_mean"] == pytest.approx(887 / 1319)
    assert result["end_reasons"] == {"terminated": 887, "exhausted": 432}
    assert interactions["gsm8k"].open_sessions == 0


def test_acceptance_through_the_cli(replay_files: tuple[Path, Path], tmp_path: Path) -> None:
    config, data = replay_files
    records = tmp_path / "records.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "interactions_core",
            "run",
            str(config),
            "--data",
            str(data),
            "--output",
            str(records),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {k: result[k] for k in EXPECTED} == EXPECTED
    assert result["final_score_mean"] == pytest.approx(887 / 1319)
    lines = records.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1319
    assert sum(json.loads(line)["end_reason"] == "terminated" for line in lines) == 887
