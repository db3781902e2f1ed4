"""Model answers are data: none reaches a reasoning-gym scorer that evaluates it as code
unless it is plain data or bounded arithmetic (``answers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from interactions_reasoning_gym import ReasoningGymInteraction, build_rows
from interactions_reasoning_gym.answers import unsafe_answer

from interactions_core.errors import SessionError
from interactions_core.testing import SessionDriver


@pytest.mark.parametrize(
    "answer",
    [
        "__import__('os').system('touch x')",
        "9**9**9**9",  # held the process in C code for over ten minutes
        "2**x",
        "eval(chr(95))",
        "eval(chr(95))!",  # not Python, but sympy turns `!` into a call
        "99999999!",
        "'x'*10**9",
        "[0]*10**9",
        "().__class__",
        "x.real",
        "(lambda: 0)",
        "[c for c in 'ab']",
        "x" * 10_001,
    ],
)
def test_code_and_unbounded_work_are_refused(answer: str) -> None:
    assert unsafe_answer(answer) is not None


@pytest.mark.parametrize(
    "answer",
    [
        "(100 - 4) * 3 + 7",
        "-3*x**3 + 2*x - 5",
        "2*(2 - 8*x)**(3/2)/3 + C",
        "3*Integral(x**3*cos(3*x), x) + C",
        "['a', 'b']",
        "[[1, 0], [0, 1]]",
        "_ Q _ _\n_ _ _ Q",  # not Python: eval refuses it as well
        "Yes!",
        "42",
    ],
)
def test_data_and_bounded_arithmetic_pass(answer: str) -> None:
    assert unsafe_answer(answer) is None


def countdown_row() -> dict:
    return next(iter(build_rows("countdown", count=1, seed=11)))


async def test_a_model_answer_never_runs_as_code(tmp_path: Path) -> None:
    """`<answer>__import__('os').system(...)</answer>` ran in the run's process (and in
    `serve`'s, from one client message); `9**9**9**9` held it for good."""
    row = countdown_row()
    kwargs = dict(row["extra_info"]["interaction_kwargs"])
    marker = tmp_path / "PWNED"
    driver = SessionDriver(ReasoningGymInteraction({"dataset": "countdown", "max_attempts": 3}))
    evil = [
        f"<answer>__import__('os').system('touch {marker}')</answer>",
        "<answer>9**9**9**9</answer>",
        *row["responses"],
    ]
    transcript = await driver.play(evil, **kwargs)
    assert not marker.exists()
    assert transcript.scores == [0.0, 0.0, 1.0]  # refused twice, then the right answer
    for result in transcript.results[:2]:
        assert "the answer was not scored" in str(result.extra.get("scorer_error")), result.extra


async def test_an_entry_that_a_scorer_would_evaluate_is_not_taken() -> None:
    interaction = ReasoningGymInteraction({"dataset": "polynomial_multiplication"})
    entry = {"question": "q", "answer": "__import__('os').getcwd()", "metadata": {}}
    with pytest.raises(SessionError, match="the entry's answer is refused"):
        await SessionDriver(interaction).play(["<answer>1</answer>"], entry=entry)
