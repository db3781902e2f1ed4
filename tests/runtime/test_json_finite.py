"""``--json`` output is always valid JSON, and huge finite scores keep finite figures."""

from __future__ import annotations

import json
import math
import statistics
import sys
from typing import Any

import pytest

from interactions_core.cli._command import print_json
from interactions_core.runtime.summary import RunSummary, SummaryStats


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses the non-standard ``NaN``/``Infinity`` tokens."""

    def refuse(token: str) -> None:
        raise ValueError(f"not valid JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def summary(scores: list[float]) -> SummaryStats:
    stats = SummaryStats()
    for score in scores:
        stats.add("t", "exhausted", 1, [score], score, ())
    return stats


@pytest.mark.parametrize(
    "scores",
    [[1e308, 1e308, 0.0], [1e308, -1e308], [-1.7e308, 1.7e308, 1.7e308, 3.0]],
)
def test_finite_huge_scores_keep_std_stderr_and_ci95_finite(scores: list[float]) -> None:
    final = summary(scores).total.final_score()
    for key in ("mean", "std", "stderr"):
        assert math.isfinite(final[key]), (key, final)
    assert all(math.isfinite(bound) for bound in final["ci95"])
    expected = statistics.stdev([s / 2.0**1000 for s in scores]) * 2.0**1000
    assert final["std"] == pytest.approx(expected, rel=1e-9)
    assert final["mean"] == pytest.approx(statistics.fmean([s / 4 for s in scores]) * 4)


def test_merged_groups_with_huge_scores_stay_finite() -> None:
    stats = SummaryStats()
    for name, score in [("a", 1e308), ("a", 0.5), ("b", -1e308), ("b", 2.0)]:
        stats.add(name, "exhausted", 1, [score], score, ())
    final = stats.total.final_score()
    assert math.isfinite(final["std"]) and math.isfinite(final["stderr"])
    assert final["ci95"][1] <= sys.float_info.max


def test_small_scores_give_the_same_figures_as_before() -> None:
    scores = [0.25, 3.0, -2.5, 7.75, 0.0]
    final = summary(scores).total.final_score()
    assert final["std"] == pytest.approx(statistics.stdev(scores), rel=1e-12)


def test_summary_with_huge_scores_prints_valid_json(capsys: pytest.CaptureFixture[str]) -> None:
    print_json(summary([1e308, 1e308, 0.0]).as_dict())
    data = strict_loads(capsys.readouterr().out)
    assert isinstance(data, dict)


def test_non_finite_floats_print_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (2.0, math.nan)})
    assert strict_loads(capsys.readouterr().out) == {
        "a": None,
        "b": [None, None, 1.5],
        "c": [2.0, None],
    }


def test_scores_near_the_float_limit_keep_their_means_and_a_short_line() -> None:
    # Two episodes scoring 1.5e308: before, `final_score_mean` and the turn's mean in
    # `score_by_turn` were null in --json ("inf" in text), whose sums overflowed, and the
    # text summary printed the mean in 309 digits (three times in one line).
    run = run_summary([1.5e308, 1.5e308])
    data = run.as_dict()
    assert data["final_score_mean"] == 1.5e308, data["final_score_mean"]
    assert data["score_by_turn"] == {"1": 1.5e308}, data["score_by_turn"]
    text = run.format()
    final = next(line for line in text.splitlines() if line.startswith("final score mean"))
    assert final.startswith("final score mean  1.5e+308") and len(final) < 120, final
    assert "score by turn     1: 1.5e+308" in text, text
    # ordinary scores keep the plain average, digit for digit
    plain = run_summary([0.1, 0.2, 0.3]).as_dict()
    assert plain["score_by_turn"] == {"1": (0.1 + 0.2 + 0.3) / 3}
    assert plain["final_score_mean"] == (0.1 + 0.2 + 0.3) / 3


def run_summary(scores: list[float]) -> RunSummary:
    run = RunSummary()
    run.stats = summary(scores)
    return run


def test_an_error_kind_cannot_add_lines_to_the_text_summary() -> None:
    # A plugin's exception class named "Boom\nepisodes  1 (1 ok, 0 errored)" printed its
    # own lines in the summary: every control character was escaped but the line break.
    run = RunSummary()
    forged = "Boom 1\nepisodes          1  (1 ok, 0 errored)"
    run.stats.add("t", "error", 1, [], None, [{"where": "generate_response", "type": forged}])
    lines = run.format().splitlines()
    assert [line for line in lines if line.startswith("episodes")] == [
        "episodes          1  (0 ok, 1 errored)"
    ], lines
    assert any("Boom 1\\nepisodes" in line for line in lines), lines


def test_a_slow_run_tells_its_rate_in_episodes_per_second() -> None:
    # One episode in 2.99 s read "(0 episodes/s)".
    run = run_summary([0.5])
    run.elapsed_s = 2.99
    assert "(0.33 episodes/s)" in run.format(), run.format()
    run.elapsed_s = 0.01
    assert "(100 episodes/s)" in run.format(), run.format()
