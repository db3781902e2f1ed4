"""Charts drawn as SVG text on the server side.

Why SVG written here rather than a chart library: the report must open offline,
years later, from an e-mail attachment or a CI artifact. A bundled JavaScript
chart library would add hundreds of kilobytes to every report and a dependency
to keep updated; a CDN link breaks offline. The report's charts are few and
simple (lines over turns, grouped bars), so a hundred lines of SVG give crisp,
searchable, printable plots that any browser renders without running a script.

Every chart takes *series*: ``(label, colour, values)``; colours come from
:data:`PALETTE`, chosen to stay distinguishable for common colour blindness.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bar_chart", "line_chart"]

#: Okabe & Ito's colour-blind safe palette (minus yellow, too pale on white).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")

WIDTH, HEIGHT = 520, 250
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 14, 42

Series = tuple[str, str, Mapping[int, float]]


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (an axis end)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        top = step * 10**exp
        if top >= value * (1 - 1e-9):
            return float(top)
    return float(10 ** (exp + 1))


def _fmt(value: float, percent: bool) -> str:
    if percent:
        return f"{100 * value:.3g}%"
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
        value = top * i / 4
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
    """Lines with markers over integer x values (turns); one line per series."""
    xs = sorted({x for _, _, values in series for x in values})
    if not xs:
        return _frame(
            title, x_label, y_label, ['<text class="empty" x="50%" y="50%">no data</text>']
        )
    ys = [y for _, _, values in series for y in values.values()]
    top = y_top if y_top is not None else _nice_max(max(ys))
    bottom = min(0.0, min(ys))
    span = (top - bottom) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    lo, hi = xs[0], xs[-1]

    def px(x: int) -> float:
        return LEFT + (plot_w / 2 if hi == lo else plot_w * (x - lo) / (hi - lo))

    def py(y: float) -> float:
        return TOP + plot_h * (1 - (y - bottom) / span)

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
