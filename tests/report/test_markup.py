"""The report's number formats and tables: one way to write a figure on the whole page."""

from __future__ import annotations

import math

import pytest

from interactions_core.report.figures import num, pct, seconds, table


@pytest.mark.parametrize(
    ("value", "text"),
    [(12345, "12,345"), (0.5, "0.5000"), (None, "-"), (math.nan, "-"), (math.inf, "-")],
)
def test_counts_and_scores(value: object, text: str) -> None:
    assert num(value) == text


def test_shares_and_durations() -> None:
    assert (pct(0.3636), pct(None), pct(1.0)) == ("36.4%", "-", "100.0%")
    assert [seconds(v) for v in (45e-6, 0.012, 3.4, 150.0)] == ["45µs", "12ms", "3.4s", "2.5min"]


def test_numeric_cells_are_right_aligned_and_headers_escaped() -> None:
    html = table(["a<b", "n"], [["text", "1,234"], ["x", "-"], ["y", "-0.5000"]], cls="t")
    assert html.startswith('<table class="t"><thead><tr><th>a&lt;b</th><th>n</th>')
    assert '<td>text</td><td class="num">1,234</td>' in html
    assert '<td class="num">-</td>' in html and '<td class="num">-0.5000</td>' in html
    assert "<td>x</td>" in html
