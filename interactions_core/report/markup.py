"""How the report writes figures and tables: one number format for the whole page.

Counts get thousands separators, scores four decimals, shares a percentage,
durations the unit that suits them (they span nine orders of magnitude), and a
figure that does not exist is ``-``. Tables right-align numeric cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

__all__ = ["num", "pct", "seconds", "table"]


def num(value: Any, digits: int = 4) -> str:
    """A count (``12,345``) or a score (``0.5000``); ``-`` for none or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


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
