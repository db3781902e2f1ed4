"""Episode rows from reasoning-gym, played by the runtime: reference 1.0, wrong 0.0, every time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from interactions_reasoning_gym import build_rows

from interactions_core.cli import main

CONFIG = "interaction:\n  - name: rg/countdown\n    config: {max_attempts: 2}\n"


def test_rows_have_verl_shape_and_are_reproducible() -> None:
    first = list(build_rows("countdown", count=4, seed=9))
    assert first == list(build_rows("countdown", count=4, seed=9))
    assert first != list(build_rows("countdown", count=4, seed=10))
    row = first[2]
    assert row["id"] == "rg/countdown/9/2"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert "<answer>" in row["prompt"][0]["content"]
    kwargs = row["extra_info"]["interaction_kwargs"]
    assert kwargs == {
        "name": "rg/countdown",
        "index": 2,
        "seed": 9,
        "size": 4,
        "dataset_options": {},
    }
    assert row["responses"] == [f"<answer>{row['reward_model']['ground_truth']}</answer>"]
    json.dumps(first)  # rows are plain JSON


def test_response_modes_and_options() -> None:
    wrong = next(iter(build_rows("countdown", count=1, responses="wrong", attempts=4)))
    assert len(wrong["responses"]) == 4
    none = next(iter(build_rows("countdown", count=1, responses="none")))
    assert "responses" not in none
    sized = next(
        iter(build_rows("countdown", count=1, size=1000, dataset_options='{"max_numbers": 4}'))
    )
    kwargs = sized["extra_info"]["interaction_kwargs"]
    assert kwargs["size"] == 1000 and kwargs["dataset_options"] == {"max_numbers": 4}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dataset": "nope"}, "unknown reasoning-gym dataset"),
        ({"count": 0}, "count must be at least 1"),
        ({"responses": "maybe"}, "responses must be one of"),
        ({"system_prompt": "pirate"}, "unknown system_prompt"),
        ({"dataset_options": "{bad json"}, "JSON object"),
        ({"dataset_options": "[1]"}, "JSON object"),
        ({"dataset_options": {"min_numbers": 0}}, "refused the options"),
    ],
)
def test_bad_options_are_value_errors(options: dict[str, Any], message: str) -> None:
    arguments = {"dataset": "countdown", **options}
    with pytest.raises(ValueError, match=message):
        list(build_rows(**arguments))


def _data(tmp_path: Path, name: str, *options: str) -> Path:
    out = tmp_path / name
    code = main(
        ["data", "rg/countdown", "--count", "200", "--seed", "3", *options, "--output", str(out)]
    )
    assert code == 0
    return out


def _run(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, list]:
    config = tmp_path / "rg.yaml"
    config.write_text(CONFIG)
    records = tmp_path / f"{data.stem}.records.jsonl"
    capsys.readouterr()
    code = main(
        [
            "run",
            str(config),
            "--data",
            str(data),
            "--json",
            "--no-progress",
            "--concurrency",
            "8",
            "--output",
            str(records),
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert code == 0, summary
    return summary, rows


def test_replay_of_200_generated_problems_scores_one_then_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = _data(tmp_path, "countdown.jsonl")
    assert len(reference.read_text().splitlines()) == 200
    summary, records = _run(tmp_path, reference, capsys)
    assert summary["episodes"] == 200 and summary["errors"] == 0
    assert summary["final_score_mean"] == 1.0
    assert {r["final_score"] for r in records} == {1.0}
    assert {r["turns"] for r in records} == {1}

    wrong = _data(tmp_path, "wrong.jsonl", "--responses", "wrong")
    summary, records = _run(tmp_path, wrong, capsys)
    assert summary["episodes"] == 200 and summary["errors"] == 0
    assert summary["final_score_mean"] == 0.0
    assert {r["final_score"] for r in records} == {0.0}
    assert {r["turns"] for r in records} == {2}  # max_attempts from the config


@pytest.mark.slow
def test_reference_answers_solve_every_dataset_that_has_one() -> None:
    """Sweep every registered dataset (a few seconds): documented exceptions only."""
    import asyncio

    from interactions_reasoning_gym import ReasoningGymInteraction, dataset_names, wrong_answer

    from interactions_core.testing import SessionDriver

    no_reference = {"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}
    lenient = {"game_of_life_halting"}  # its scorer accepts any non-empty answer
    failures = []

    async def sweep() -> None:
        for name in dataset_names():
            if name == "composite":
                continue  # needs dataset_options naming the datasets to mix
            row = next(iter(build_rows(name, count=1, seed=1)))
            driver = SessionDriver(ReasoningGymInteraction({"dataset": name}))
            kwargs = row["extra_info"]["interaction_kwargs"]
            right = await driver.play(row["responses"], **kwargs)
            wrong = await driver.play([f"<answer>{wrong_answer()}</answer>"] * 3, **kwargs)
            expect_right = 0.0 if name in no_reference else 1.0
            expect_wrong = 1.0 if name in lenient else 0.0
            if (right.final_score, wrong.final_score) != (expect_right, expect_wrong):
                failures.append((name, right.final_score, wrong.final_score))

    asyncio.run(sweep())
    assert not failures
