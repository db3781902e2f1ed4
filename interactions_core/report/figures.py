"""How the report writes figures: numbers in one format, and plots drawn as SVG.

Numbers: counts get thousands separators, scores four decimals, shares a
percentage, durations the unit that suits them (they span nine orders of
magnitude), and a figure that does not exist is ``-``. Tables right-align
numeric cells.

Plots are SVG text written here rather than drawn by a chart library: the
report must open offline, years later, from an e-mail attachment or a CI
artifact. A bundled JavaScript chart library would add hundreds of kilobytes to
every report and a dependency to keep updated; a CDN link breaks offline. The
report's charts are few and simple (lines over turns, grouped bars), so a
hundred lines of SVG give crisp, searchable, printable plots that any browser
renders without running a script. Every chart takes *series*: ``(label,
colour, values)``; colours come from :data:`PALETTE`, chosen to stay
distinguishable for common colour blindness.

Curves (solved by turn *k*, mean score by turn) have one line per interaction
of each run, so interactions that behave differently stay apart. Shares (end
reasons, assistant turns, durations) have one bar series per run, as shares of
that run's episodes, so runs of different sizes compare directly.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from ..runtime.record import END_REASONS

if TYPE_CHECKING:
    from ..runtime.stats import GroupStats
    from . import RunData

__all__ = ["PALETTE", "bar_chart", "charts", "line_chart", "num", "pct", "seconds", "table"]


def num(value: Any, digits: int = 4) -> str:
    """A count (``12,345``) or a score (``0.5000``); ``-`` for none or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    # a score near the float limit is 309 digits in fixed notation
    return f"{value:.{digits}f}" if abs(value) < 1e9 else f"{value:.{digits}g}"


def pct(value: float | None) -> str:
    """A share as a percentage with one decimal (``36.4%``); ``-`` for none."""
    return "-" if value is None else f"{100 * value:.1f}%"


def seconds(value: float) -> str:
    """``45µs``, ``12ms``, ``3.4s``, ``2.5min``: durations span nine orders of magnitude."""
    if value < 1e-3:
        return f"{value * 1e6:.3g}µs"
    if value < 1:
        return f"{value * 1e3:.3g}ms"
    if value < 60:
        return f"{value:.3g}s"
    return f"{value / 60:.3g}min"


def _cell(text: str) -> str:
    """A table cell; numbers (and ``-`` for none) are right-aligned."""
    numeric = text[:1].isdigit() or text == "-" or text.startswith("-0")
    return f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """An HTML table; ``headers`` are escaped here, the cells must be HTML already."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# -- SVG plots ------------------------------------------------------------

#: Okabe & Ito's colour-blind safe palette (minus yellow, too pale on white).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")

WIDTH, HEIGHT = 520, 250
#: The most x values (turns) a line chart draws; see :func:`line_chart`.
POINTS_DRAWN = 200
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 14, 42

Series = tuple[str, str, Mapping[int, float]]


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (an axis end).

    Scores may be any finite float: an end past the largest float is that float.
    """
    if not value > 0:  # zero, negative, or NaN
        return 1.0
    if not math.isfinite(value):
        return sys.float_info.max
    exp = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        top = step * 10.0**exp
        if top >= value * (1 - 1e-9):
            return top if math.isfinite(top) else sys.float_info.max
    return sys.float_info.max


def _fmt(value: float, percent: bool) -> str:
    if percent:
        return f"{100 * value:.3g}%"
    if abs(value) >= 1e9:  # an axis end near the float limit: 309 digits otherwise
        return f"{value:.3g}"
    if value == int(value):
        return f"{int(value)}"
    return f"{value:.2g}" if abs(value) < 0.1 else f"{value:.2f}".rstrip("0")


def _frame(title: str, x_label: str, y_label: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
        + "".join(body)
        + f'<text class="axis-label" x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" '
        f'y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text class="axis-label" transform="translate(12 {TOP + (HEIGHT - TOP - BOTTOM) / 2}) '
        f'rotate(-90)" text-anchor="middle">{escape(y_label)}</text></svg>'
    )


def _y_axis(top: float, percent: bool) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    out = []
    for i in range(5):
        value = top / 4 * i  # not top * i: four times a score near the float limit overflows
        y = TOP + plot_h * (1 - i / 4)
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_fmt(value, percent)}</text>"
        )
    return out


def line_chart(
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    percent: bool = False,
    y_top: float | None = None,
) -> str:
    """Lines with markers over integer x values (turns); one line per series.

    At most ``POINTS_DRAWN`` x values are drawn, evenly spread and the last one
    kept: a record may list 100,000 turn scores, and each point is a marker.
    """
    xs = sorted({x for _, _, values in series for x in values})
    if len(xs) > POINTS_DRAWN:
        drawn = {*xs[:: math.ceil(len(xs) / POINTS_DRAWN)], xs[-1]}
        series = [(n, c, {x: y for x, y in v.items() if x in drawn}) for n, c, v in series]
        xs = sorted(drawn)
    if not xs:
        return _frame(
            title, x_label, y_label, ['<text class="empty" x="50%" y="50%">no data</text>']
        )
    # A mean of scores near the float limit can overflow to infinity: not drawn.
    series = [(n, c, {x: y for x, y in v.items() if math.isfinite(y)}) for n, c, v in series]
    ys = [y for _, _, values in series for y in values.values()] or [0.0]
    top = y_top if y_top is not None else _nice_max(max(ys))
    bottom = min(0.0, min(ys))
    span = (top / 2 - bottom / 2) or 1.0  # halves: top - bottom may pass the float limit
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    lo, hi = xs[0], xs[-1]

    def px(x: int) -> float:
        return LEFT + (plot_w / 2 if hi == lo else plot_w * (x - lo) / (hi - lo))

    def py(y: float) -> float:
        return TOP + plot_h * (1 - (y / 2 - bottom / 2) / span)

    body = _y_axis(top, percent)
    step = max(1, math.ceil(len(xs) / 12))
    for x in xs[::step]:
        body.append(
            f'<text class="tick" x="{px(x):.1f}" y="{TOP + plot_h + 16}" '
            f'text-anchor="middle">{x}</text>'
        )
    for label, colour, values in series:
        points = sorted(values.items())
        if not points:
            continue
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(points)
        )
        body.append(
            f'<g class="series" data-series="{escape(label)}"><path d="{path}" fill="none" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        for x, y in points:
            body.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}">'
                f"<title>{escape(label)}: {x} -> {_fmt(y, percent)}</title></circle>"
            )
        body.append("</g>")
    return _frame(title, x_label, y_label, body)


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    *,
    x_label: str,
    y_label: str,
    percent: bool = False,
) -> str:
    """Grouped vertical bars: one group per category, one bar per series."""
    values = [v for _, _, vs in series for v in vs]
    if not categories or not values:
        return _frame(
            title, x_label, y_label, ['<text class="empty" x="50%" y="50%">no data</text>']
        )
    top = _nice_max(max(values))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    group_w = plot_w / len(categories)
    bar_w = max(group_w * 0.8 / max(len(series), 1), 1.0)
    body = _y_axis(top, percent)
    step = max(1, math.ceil(len(categories) / 10))
    for i, name in enumerate(categories):
        x0 = LEFT + group_w * i + group_w * 0.1
        if i % step == 0:
            body.append(
                f'<text class="tick" x="{LEFT + group_w * (i + 0.5):.1f}" '
                f'y="{TOP + plot_h + 16}" text-anchor="middle">{escape(name)}</text>'
            )
        for j, (label, colour, vs) in enumerate(series):
            value = vs[i] if i < len(vs) else 0.0
            h = plot_h * value / top
            body.append(
                f'<rect class="bar" x="{x0 + j * bar_w:.1f}" y="{TOP + plot_h - h:.1f}" '
                f'width="{bar_w:.1f}" height="{h:.1f}" fill="{colour}">'
                f"<title>{escape(label)}: {escape(name)} -> {_fmt(value, percent)}</title></rect>"
            )
    return _frame(title, x_label, y_label, body)


# -- the report's charts -------------------------------------------------

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


def _series(runs: Sequence[RunData]) -> list[tuple[str, GroupStats]]:
    """(legend label, figures) for every run x interaction pair the table shows."""
    out = []
    for run in runs:
        for name, group in run.shown_groups()[0]:
            out.append((name if len(runs) == 1 else f"{run.label} · {name}", group))
    return out


def _curve_charts(runs: Sequence[RunData]) -> list[str]:
    """Solved by turn k and mean score by turn, one line per interaction of each run."""
    series = _series(runs)
    colours = [PALETTE[k % len(PALETTE)] for k in range(len(series))]
    legend = _legend([label for label, _ in series])
    solved = [(label, colours[k], g.solved_by_turn()) for k, (label, g) in enumerate(series)]
    by_turn = [(label, colours[k], g.score_by_turn()) for k, (label, g) in enumerate(series)]
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


#: The most bars the assistant-turns chart draws: past it, turns are counted in ranges
#: of equal width. One bar per turn count had made a page of 12 MB (100,000 bars) from
#: one record of 100,000 turns.
TURN_BARS = 40


def _turns(runs: Sequence[RunData], bars: _ShareBars) -> str:
    """Assistant turns from 1 (from 0 when some episode had none) to the most seen."""
    most = max((max(run.stats.total.turns, default=0) for run in runs), default=0)
    first = 0 if any(0 in r.stats.total.turns for r in runs) else 1
    width = max(1, math.ceil((most - first + 1) / TURN_BARS))
    starts = list(range(first, most + 1, width))
    if width == 1:
        labels = [str(t) for t in starts]
    else:
        labels = [f"{lo}-{min(lo + width - 1, most)}" for lo in starts]

    def binned(run: RunData) -> dict[int, int]:
        counts: dict[int, int] = {}
        for turns, n in run.stats.total.turns.items():
            start = first + (turns - first) // width * width
            counts[start] = counts.get(start, 0) + n
        return counts

    return bars.figure(
        "turns",
        "Assistant turns per episode (share of episodes)",
        "assistant turns",
        labels,
        bars.counted(starts, binned),
        "assistant turns",
    )


def _durations(runs: Sequence[RunData], bars: _ShareBars) -> str:
    labels, shares = _duration_bins(runs)  # none when no record has a duration_s
    series = [(run.label, bars.colours[i], shares[i]) for i, run in enumerate(runs) if labels]
    return bars.figure(
        "duration",
        "Episode duration (share of episodes)",
        "episode duration",
        labels,
        series,
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
