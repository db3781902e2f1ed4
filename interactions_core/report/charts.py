"""The report's plots: curves per interaction, and shares of each run's episodes.

Curves (solved by turn *k*, mean score by turn) have one line per interaction
of each run, so interactions that behave differently stay apart. Shares (end
reasons, assistant turns, durations) have one bar series per run, as shares of
that run's episodes, so runs of different sizes compare directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from ..runtime.record import END_REASONS
from .collect import RunData
from .markup import seconds
from .svg import PALETTE, bar_chart, line_chart

__all__ = ["charts"]

#: Duration bin edges in seconds: 1, 2, 5 x 10^k from a microsecond to a day.
_DURATION_EDGES = [m * 10.0**e for e in range(-6, 5) for m in (1, 2, 5)]

#: One bar series: (legend label, colour, a value per bar).
Bars = tuple[str, str, list[float]]


def charts(runs: Sequence[RunData]) -> str:
    """Every chart of the page: the curves per interaction, then the shares per run."""
    return '<div class="charts">' + "".join(_curve_charts(runs) + _share_charts(runs)) + "</div>"


def _legend(labels: Sequence[str]) -> str:
    return (
        '<div class="legend">'
        + "".join(
            f'<span><i style="background:{PALETTE[k % len(PALETTE)]}"></i>{escape(label)}</span>'
            for k, label in enumerate(labels)
        )
        + "</div>"
    )


def _figure(key: str, caption: str, svg: str, legend: str) -> str:
    return (
        f'<figure class="chart" data-chart="{key}"><figcaption>{escape(caption)}</figcaption>'
        f"{svg}{legend}</figure>"
    )


# -- curves: one line per interaction of each run ------------------------------


def _series_names(runs: Sequence[RunData]) -> list[tuple[int, str, str]]:
    """(run index, interaction, legend label) for every run x interaction pair."""
    out = []
    for i, run in enumerate(runs):
        for name in sorted(run.stats.groups):
            label = name if len(runs) == 1 else f"{run.label} · {name}"
            out.append((i, name, label))
    return out


def _curve_charts(runs: Sequence[RunData]) -> list[str]:
    """Solved by turn k and mean score by turn, one line per interaction of each run."""
    names = _series_names(runs)
    colours = [PALETTE[k % len(PALETTE)] for k in range(len(names))]
    legend = _legend([label for _, _, label in names])
    solved = [
        (label, colours[k], runs[i].stats.groups[name].solved_by_turn())
        for k, (i, name, label) in enumerate(names)
    ]
    by_turn = [
        (label, colours[k], runs[i].stats.groups[name].score_by_turn())
        for k, (i, name, label) in enumerate(names)
    ]
    return [
        _figure(
            "solved",
            "Solved by turn k (cumulative share of scored episodes)",
            line_chart(
                "solved by turn",
                solved,
                x_label="turn k",
                y_label="solved",
                percent=True,
                y_top=1.0,
            ),
            legend,
        ),
        _figure(
            "score-by-turn",
            "Mean score by turn",
            line_chart(
                "score by turn", by_turn, x_label="assistant turn", y_label="mean turn score"
            ),
            legend,
        ),
    ]


# -- shares: one bar series per run --------------------------------------------


class _ShareBars:
    """Bar charts of shares of each run's episodes: a colour per run, one legend."""

    def __init__(self, runs: Sequence[RunData]) -> None:
        self.runs = runs
        self.colours = [PALETTE[i % len(PALETTE)] for i in range(len(runs))]
        self.legend = _legend([r.label for r in runs]) if len(runs) > 1 else ""

    def counted(
        self, keys: Sequence[Any], counts: Callable[[RunData], Mapping[Any, int]]
    ) -> list[Bars]:
        """Each run's share of episodes for each key, from the run's counts by key."""
        return [
            (
                run.label,
                self.colours[i],
                [counts(run).get(k, 0) / run.stats.total.episodes for k in keys],
            )
            for i, run in enumerate(self.runs)
        ]

    def figure(
        self, slug: str, title: str, name: str, labels: list[str], series: list[Bars], x: str
    ) -> str:
        """One bar chart with the runs' legend (none for a single run)."""
        chart = bar_chart(name, labels, series, x_label=x, y_label="episodes", percent=True)
        return _figure(slug, title, chart, self.legend)


def _share_charts(runs: Sequence[RunData]) -> list[str]:
    """End reasons, assistant turns and durations as shares of each run's episodes."""
    bars = _ShareBars(runs)
    return [_end_reasons(runs, bars), _turns(runs, bars), _durations(runs, bars)]


def _end_reasons(runs: Sequence[RunData], bars: _ShareBars) -> str:
    """The end reasons that occur, in their documented order."""
    reasons = [r for r in END_REASONS if any(run.stats.total.end_reasons.get(r) for run in runs)]
    return bars.figure(
        "end-reasons",
        "End reasons (share of episodes)",
        "end reasons",
        reasons,
        bars.counted(reasons, lambda run: run.stats.total.end_reasons),
        "end reason",
    )


def _turns(runs: Sequence[RunData], bars: _ShareBars) -> str:
    """Assistant turns from 1 (from 0 when some episode had none) to the most seen."""
    most = max((max(run.stats.total.turns, default=0) for run in runs), default=0)
    first = 0 if any(0 in r.stats.total.turns for r in runs) else 1
    values = list(range(first, most + 1))
    return bars.figure(
        "turns",
        "Assistant turns per episode (share of episodes)",
        "assistant turns",
        [str(t) for t in values],
        bars.counted(values, lambda run: run.stats.total.turns),
        "assistant turns",
    )


def _durations(runs: Sequence[RunData], bars: _ShareBars) -> str:
    labels, shares = _duration_bins(runs)
    series = [(run.label, bars.colours[i], shares[i]) for i, run in enumerate(runs)]
    return bars.figure(
        "duration",
        "Episode duration (share of episodes)",
        "episode duration",
        labels,
        series if labels else [],
        "wall-clock time per episode",
    )


def _duration_bins(runs: Sequence[RunData]) -> tuple[list[str], list[list[float]]]:
    """Log-spaced bins (1, 2, 5 x 10^k seconds) covering every run's durations."""
    lows = [min(r.durations) for r in runs if r.durations]
    highs = [max(r.durations) for r in runs if r.durations]
    if not lows:
        return [], []
    edges = _DURATION_EDGES
    first = max(0, max(i for i, e in enumerate(edges) if e <= max(min(lows), edges[0])))
    last = min(
        len(edges) - 1,
        min((i for i, e in enumerate(edges) if e > max(highs)), default=len(edges) - 1),
    )
    used = edges[first : last + 1]
    labels = [f"<{seconds(e)}" for e in used[1:]] or [f"<{seconds(used[0])}"]
    shares = []
    for run in runs:
        counts = [0] * len(labels)
        for d in run.durations:
            k = 0
            while k < len(labels) - 1 and d >= used[k + 1]:
                k += 1
            counts[k] += 1
        total = len(run.durations) or 1
        shares.append([c / total for c in counts])
    return labels, shares
