"""``--rewards turn|final``: what each step's reward carries, on the hub and from the CLI.

The server half (a real process driven by OpenEnv's client) is in
``test_server_rewards.py``; these need only the core.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from interactions_core.cli import main
from interactions_core.serve import Hub, ServedEpisode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_plugins import Logged

#: Logged answers "right" (score 1) to the ground truth, else "wrong" (score 0);
#: its calculate_score is always 0.25, so the final reward is told from a turn score.
FINAL = 0.25


def hub(**options: object) -> Hub:
    return Hub({"logged": Logged({})}, default="logged", **options)  # type: ignore[arg-type]


async def play(h: Hub, answers: list[str]) -> list[dict[str, object]]:
    episode = ServedEpisode(h)
    await episode.start("q", {"ground_truth": "x"})
    return [await episode.step(answer) for answer in answers]


async def test_turn_is_the_default_and_gives_each_step_its_turn_score() -> None:
    h = hub()
    assert h.rewards == "turn"
    steps = await play(h, ["a", "x"])
    assert [(s["reward"], s["done"]) for s in steps] == [(0.0, False), (1.0, True)]
    assert steps[-1]["final_score"] == FINAL
    assert h.describe()["rewards"] == "turn"


async def test_final_gives_zero_until_the_last_step_which_carries_the_score() -> None:
    h = hub(rewards="final")
    steps = await play(h, ["a", "b", "x"])
    assert [(s["reward"], s["done"]) for s in steps] == [(0.0, False), (0.0, False), (FINAL, True)]
    assert sum(s["reward"] for s in steps) == steps[-1]["final_score"] == FINAL  # type: ignore[misc]
    assert h.describe()["rewards"] == "final"
    assert "final rewards" in h.summary()


async def test_final_rewards_a_right_first_turn_with_the_score_not_the_turn_score() -> None:
    steps = await play(hub(rewards="final"), ["x"])
    assert [(s["reward"], s["done"]) for s in steps] == [(FINAL, True)]


async def test_final_also_ends_at_the_turn_limit_with_the_score() -> None:
    steps = await play(hub(rewards="final", max_turns=2), ["a", "b"])
    assert [(s["reward"], s["done"]) for s in steps] == [(0.0, False), (FINAL, True)]


def test_an_unknown_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="rewards must be one of turn, final, not 'sum'"):
        hub(rewards="sum")


def test_the_cli_refuses_an_unknown_mode_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n")
    with pytest.raises(SystemExit) as exc:
        main(["serve", str(config), "--rewards", "sum"])
    assert exc.value.code == 2
    assert "invalid choice: 'sum'" in capsys.readouterr().err
