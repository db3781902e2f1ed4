"""The run summary's figures: per interaction, uncertainty, solved by turn k, errors by kind."""

from __future__ import annotations

import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main
from interactions_core.cli._command import Progress, duration
from interactions_core.runtime.summary import NO_INTERACTION, SummaryStats

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = str(ROOT / "examples" / "config.yaml")
EXAMPLE_DATA = str(ROOT / "examples" / "gsm8k_demo.jsonl")


def add(stats: SummaryStats, name: str | None, scores: list[float], **kw: Any) -> None:
    stats.add(
        name,
        kw.get("end_reason", "terminated" if scores and scores[-1] >= 1 else "exhausted"),
        kw.get("turns", len(scores)),
        scores,
        kw.get("final_score", scores[-1] if scores else None),
        kw.get("errors", ()),
    )


def test_final_score_matches_the_textbook_formulas() -> None:
    values = [2.0, 5.0, 9.0, 4.0, 7.5, 1.0]  # outside [0, 1]: the normal approximation
    stats = SummaryStats()
    for v in values:
        add(stats, "t", [v], final_score=v)
    final = stats.total.final_score()
    std = statistics.stdev(values)
    se = std / math.sqrt(len(values))
    assert final["n"] == 6
    assert final["mean"] == pytest.approx(statistics.mean(values))
    assert final["std"] == pytest.approx(std)
    assert final["stderr"] == pytest.approx(se)
    assert final["ci95_method"] == "normal"
    lo, hi = final["ci95"]
    assert lo == pytest.approx(statistics.mean(values) - 1.959964 * se)
    assert hi == pytest.approx(statistics.mean(values) + 1.959964 * se)


@pytest.mark.parametrize(
    "values",
    [
        [0.2, 0.5, 0.9, 0.4, 0.75, 0.1],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5],  # the normal low end: -0.05
        [1.0] * 10 + [0.2, 0.2, 0.2],  # the normal high end: above 1
    ],
)
def test_bounded_fractional_scores_get_an_interval_inside_0_1(values: list[float]) -> None:
    stats = SummaryStats()
    for v in values:
        add(stats, "t", [v], final_score=v)
    final = stats.total.final_score()
    assert final["ci95_method"] == "wilson-bounded"
    lo, hi = final["ci95"]
    assert 0.0 <= lo <= final["mean"] <= hi <= 1.0


def test_pass_fail_scores_get_a_wilson_interval_inside_0_1() -> None:
    stats = SummaryStats()
    for v in [1.0] * 9 + [0.0]:
        add(stats, "t", [v])
    final = stats.total.final_score()
    assert final["ci95_method"] == "wilson"
    lo, hi = final["ci95"]
    # Wilson's interval for 9/10 at 95%: 0.5958 to 0.9821 (published tables)
    assert (round(lo, 4), round(hi, 4)) == (0.5958, 0.9821)
    assert 0.0 <= lo < final["mean"] < hi <= 1.0


def test_one_score_has_no_spread() -> None:
    stats = SummaryStats()
    add(stats, "t", [1.0])
    assert stats.total.final_score() == {
        "n": 1,
        "mean": 1.0,
        "std": None,
        "stderr": None,
        "ci95": None,
        "ci95_method": None,
    }
    assert SummaryStats().format_final() == "-"


def test_solved_by_turn_is_cumulative_over_scored_episodes() -> None:
    stats = SummaryStats()
    add(stats, "retry", [1.0])  # solved at 1
    add(stats, "retry", [0.0, 1.0])  # at 2
    add(stats, "retry", [0.0, 0.0, 1.0])  # at 3
    add(stats, "retry", [0.0, 0.0, 0.0])  # never
    add(stats, "retry", [0.5, 0.0], turns=2, end_reason="exhausted")  # partial credit: not solved
    errored = [{"where": "generate_response", "type": "ValueError", "message": "x"}]
    add(stats, "retry", [1.0], errors=errored, end_reason="error")  # errors are not scored
    curve = stats.total.solved_by_turn()
    assert curve == {1: 1 / 5, 2: 2 / 5, 3: 3 / 5}
    assert stats.groups["retry"].scored == 5
    assert stats.total.errors_by_kind == {"generate_response: ValueError": 1}


def test_episodes_without_interaction_are_not_in_the_solved_curve() -> None:
    stats = SummaryStats()
    add(stats, None, [], turns=1, end_reason="single_turn", final_score=None)
    assert stats.total.solved_by_turn() == {}
    assert list(stats.groups) == [NO_INTERACTION]


def test_turn_distribution() -> None:
    stats = SummaryStats()
    for turns in [1, 1, 1, 2, 2, 3, 4, 4, 4, 10]:
        add(stats, "t", [0.0] * turns)
    turns = stats.total.assistant_turns()
    assert turns == {"mean": 3.2, "median": 2, "p90": 4, "max": 10}


def test_split_by_interaction_in_the_json_and_text() -> None:
    stats = SummaryStats()
    for _ in range(3):
        add(stats, "easy", [1.0])
    add(stats, "hard", [0.0, 0.0])
    add(stats, "hard", [0.0, 1.0])
    data = stats.as_dict()
    assert set(data["by_interaction"]) == {"easy", "hard"}
    assert data["by_interaction"]["easy"]["solved_by_turn"] == {"1": 1.0}
    assert data["by_interaction"]["hard"]["solved_by_turn"] == {"1": 0.0, "2": 0.5}
    assert data["by_interaction"]["hard"]["assistant_turns"]["mean"] == 2.0
    text = "\n".join(stats.format_lines())
    assert "by interaction" in text
    easy = next(line for line in text.splitlines() if line.strip().startswith("easy"))
    assert easy.split()[:3] == ["easy", "3", "0"] and easy.endswith("100.0%")


def test_cli_summary_has_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # the demo: 4 solved at turn 1, 3 at turn 2, 2 at turn 3, 2 never (9/11 terminated)
    assert data["solved_by_turn"] == pytest.approx({"1": 4 / 11, "2": 7 / 11, "3": 9 / 11})
    assert data["final_score"]["mean"] == pytest.approx(9 / 11)
    assert data["final_score"]["ci95_method"] == "wilson"
    assert data["assistant_turns"]["median"] == 2
    assert data["errors_by_kind"] == {}
    assert list(data["by_interaction"]) == ["gsm8k"]
    assert main(["run", EXAMPLE_CONFIG, "--data", EXAMPLE_DATA]) == 0
    out = capsys.readouterr().out
    assert "solved by turn    1: 36.4%  2: 63.6%  3: 81.8%" in out
    assert "final score mean  0.8182 ± 0.1220 se  (95% CI 0.5230 to 0.9486, wilson; n=11)" in out


def test_errors_by_kind_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": "q"}], "responses": ["#### 4"],
         "interaction_kwargs": {"name": "nope"}},
        {"prompt": [{"role": "user", "content": "q"}], "responses": ["#### 4"],
         "interaction_kwargs": {"name": "gsm8k", "ground_truth": "4"}},
    ]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["run", EXAMPLE_CONFIG, "--data", str(data), "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert sum(summary["errors_by_kind"].values()) == 1
    (kind,) = summary["errors_by_kind"]
    assert "Error" in kind and ":" in kind
    assert summary["by_interaction"]["gsm8k"]["solved_by_turn"] == {"1": 1.0}


def test_progress_shows_an_eta() -> None:
    stream = io.StringIO()
    progress = Progress(stream, total=100)
    now = [progress.started]
    progress.clock = lambda: now[0]
    now[0] += 10.0  # 25 done in 10 s: 75 left at 2.5/s -> 30 s
    progress.update(25, 0, force=True)
    assert "ETA 30s" in stream.getvalue()
    assert "25/100" in stream.getvalue()
    assert (duration(185), duration(7620), duration(0.4)) == ("3m05s", "2h07m", "0s")


def test_the_run_total_merges_the_interactions_exactly() -> None:
    a = [0.2, 0.5, 0.9]
    b = [0.4, 0.75, 0.1, 0.3]
    stats = SummaryStats()
    for v in a:
        add(stats, "a", [0.0, v], final_score=v)
    for v in b:
        add(stats, "b", [v], final_score=v)
    final = stats.total.final_score()
    assert final["mean"] == pytest.approx(statistics.mean(a + b))
    assert final["std"] == pytest.approx(statistics.stdev(a + b))
    assert stats.total.turns == {1: 4, 2: 3} and stats.total.episodes == 7
    assert stats.total.score_by_turn() == pytest.approx({1: sum(b) / 7, 2: sum(a) / 3})
    add(stats, "b", [1.0])  # adding after reading the total refreshes it
    assert stats.total.episodes == 8 and stats.total.solved_by_turn()[1] == pytest.approx(1 / 8)
