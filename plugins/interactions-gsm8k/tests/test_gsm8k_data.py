"""The gsm8k interaction on the real GSM8K test split and recorded model solutions.

The data is read from the shared folder (fixture ``gsm8k_data``); these tests skip
when it is absent. Expected values are the facts stated in the data's README.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from interactions_gsm8k import Gsm8kInteraction, compute_score

ROWS = 1319
#: Fraction of each key's solutions the dataset's authors labelled correct.
LABELLED_CORRECT = {
    "6b_finetuning": 0.2168,
    "6b_verification": 0.3904,
    "175b_finetuning": 0.3472,
    "175b_verification": 0.5625,
}
KEYS = list(LABELLED_CORRECT)


@cache
def read_jsonl(path: Path) -> tuple[dict[str, Any], ...]:
    with path.open(encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def after_last(text: str, marker: str) -> str:
    """The text after the last ``marker``, commas removed: the reference answer."""
    return text.rsplit(marker, 1)[1].strip().replace(",", "")


def chat(solution: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Solve it."}, {"role": "assistant", "content": solution}]


# -- test.jsonl: the reference solutions, strict extraction ------------------------


def test_strict_scores_every_reference_solution_one(gsm8k_data: Path) -> None:
    rows = read_jsonl(gsm8k_data / "test.jsonl")
    assert len(rows) == ROWS
    scores = [compute_score(r["answer"], after_last(r["answer"], "#### ")) for r in rows]
    assert scores == [1.0] * ROWS


def test_strict_scores_every_perturbed_solution_zero(gsm8k_data: Path) -> None:
    rows = read_jsonl(gsm8k_data / "test.jsonl")
    scores = []
    for r in rows:
        truth = after_last(r["answer"], "#### ")
        body = r["answer"].rsplit("#### ", 1)[0]
        perturbed = f"{body}#### {int(truth) + 1}"
        scores.append(compute_score(perturbed, truth))
    assert scores == [0.0] * ROWS


async def test_strict_reference_solutions_through_the_lifecycle(gsm8k_data: Path) -> None:
    """Integer ground truths (as a dataset loader would produce them) end each episode."""
    rows = read_jsonl(gsm8k_data / "test.jsonl")
    interaction = Gsm8kInteraction({"name": "gsm8k"})
    outcomes = set()
    for i, r in enumerate(rows):
        sid = await interaction.start_interaction(
            f"test-{i}", ground_truth=int(after_last(r["answer"], "#### "))
        )
        terminate, _, score, _ = await interaction.generate_response(sid, chat(r["answer"]))
        outcomes.add((terminate, score, await interaction.calculate_score(sid)))
        await interaction.finalize_interaction(sid)
    assert outcomes == {(True, 1.0, 1.0)}
    assert interaction.open_sessions == 0


# -- example_model_solutions.jsonl: model solutions, flexible extraction -----------


@pytest.mark.parametrize("key", KEYS)
def test_labelled_correct_fractions(gsm8k_data: Path, key: str) -> None:
    rows = read_jsonl(gsm8k_data / "example_model_solutions.jsonl")
    assert len(rows) == ROWS
    correct = sum(r[key]["is_correct"] for r in rows)
    assert round(correct / ROWS, 4) == LABELLED_CORRECT[key]


@pytest.mark.parametrize("key", KEYS)
def test_flexible_agrees_with_the_labels(gsm8k_data: Path, key: str) -> None:
    rows = read_jsonl(gsm8k_data / "example_model_solutions.jsonl")
    disagreements = [
        i
        for i, r in enumerate(rows)
        if compute_score(r[key]["solution"], after_last(r["ground_truth"], "A: "), "flexible")
        != float(r[key]["is_correct"])
    ]
    assert disagreements == []


@pytest.mark.parametrize("key", KEYS)
async def test_flexible_agrees_with_the_labels_through_the_lifecycle(
    gsm8k_data: Path, key: str
) -> None:
    rows = read_jsonl(gsm8k_data / "example_model_solutions.jsonl")
    interaction = Gsm8kInteraction({"name": "gsm8k_flexible", "method": "flexible"})
    disagreements = []
    for i, r in enumerate(rows):
        sid = await interaction.start_interaction(
            f"{key}-{i}", ground_truth=after_last(r["ground_truth"], "A: ")
        )
        terminate, _content, score, _extra = await interaction.generate_response(
            sid, chat(r[key]["solution"])
        )
        assert type(score) is float
        expected = r[key]["is_correct"]
        if (terminate, score == 1.0, await interaction.calculate_score(sid) == 1.0) != (
            expected,
            expected,
            expected,
        ):
            disagreements.append(i)
        await interaction.finalize_interaction(sid)
    assert disagreements == []
    assert interaction.open_sessions == 0


async def test_self_correction_episodes(gsm8k_data: Path) -> None:
    """Replay the four solutions as attempts of one multi-turn episode per problem.

    The interaction must judge only the latest attempt and stop at the first
    correct one; the outcome counts are the ones measured on the data.
    """
    rows = read_jsonl(gsm8k_data / "example_model_solutions.jsonl")
    interaction = Gsm8kInteraction({"name": "gsm8k_flexible", "method": "flexible"})
    solved_at = {attempt: 0 for attempt in range(1, len(KEYS) + 1)}
    failed = 0
    for i, r in enumerate(rows):
        sid = await interaction.start_interaction(
            f"episode-{i}", ground_truth=after_last(r["ground_truth"], "A: ")
        )
        messages: list[dict[str, Any]] = [{"role": "user", "content": r["question"]}]
        for attempt, key in enumerate(KEYS, start=1):
            messages.append({"role": "assistant", "content": r[key]["solution"]})
            terminate, feedback, score, _ = await interaction.generate_response(sid, messages)
            if terminate:
                assert score == await interaction.calculate_score(sid) == 1.0
                solved_at[attempt] += 1
                break
            messages.append({"role": "user", "content": feedback})
        else:
            failed += 1
            assert await interaction.calculate_score(sid) == 0.0
        await interaction.finalize_interaction(sid)
    assert solved_at == {1: 286, 2: 293, 3: 119, 4: 189}
    assert sum(solved_at.values()) == 887
    assert failed == 432
    assert interaction.open_sessions == 0
