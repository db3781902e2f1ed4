"""The results table in docs/performance.md is the one ``benchmarks/run.py`` writes.

The figures cannot be checked without running the benchmarks, but their shape can:
the generated block exists, has ``run.py``'s header, and lists exactly the rows
the benchmark modules declare, in order, each with a well-formed goal, figure and
result. A row renamed or added in ``benchmarks/`` without a new full run (or a
table edited by hand) fails here. The table's prose must not quote figures either.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"


@pytest.fixture(scope="module")
def run_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import run

        yield run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def generated_block(run_module) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(run_module.BEGIN) == 1 and text.count(run_module.END) == 1
    block = text.split(run_module.BEGIN, 1)[1].split(run_module.END, 1)[0]
    return [line for line in block.strip().splitlines() if line.strip()]


def cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    # Backquoted code may hold a '|': split only on pipes outside backquotes.
    parts, current, quoted = [], "", False
    for char in line[1:-1]:
        if char == "`":
            quoted = not quoted
        if char == "|" and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


def test_the_block_is_a_full_run_of_every_benchmark(run_module) -> None:
    lines = generated_block(run_module)
    assert re.match(r"Python 3\.\d+\.\d+ on \w+ .*at most \d+ alternating runs", lines[0])
    assert lines[1] == run_module.HEADER
    rows = [cells(line) for line in lines[3:]]
    assert [r[0] for r in rows] == run_module.expected_titles()
    for title, goal, measured, result, detail, reproduce in rows:
        assert re.fullmatch(r"(<=|>=) \d+\.\d\dx|report", goal), title
        assert re.fullmatch(r"\d+\.\d\dx|n/a", measured), title
        assert result in ("pass", "FAIL", "info", "skipped"), title
        if goal != "report" and measured != "n/a":
            limit, value = float(goal[3:-1]), float(measured[:-1])
            passed = value <= limit if goal.startswith("<=") else value >= limit
            # A row may fail on a check besides its figure; its detail then says why.
            expected = "pass" if passed and "FAIL:" not in detail else "FAIL"
            assert result == expected, title
        assert detail, title
        assert re.fullmatch(r"`python benchmarks/run\.py --only \w+`", reproduce), title


def test_the_table_format_is_the_one_run_writes(run_module) -> None:
    from _common import Row

    rows = [Row.at_most("a", 1.1, 1.0, "d", "r"), Row("b", "report", 2.0, None, "d", "r")]
    written = run_module.table(rows).splitlines()
    assert written[0] == run_module.HEADER
    assert cells(written[2])[:4] == ["a", "<= 1.10x", "1.00x", "pass"]
    assert cells(written[3])[:4] == ["b", "report", "2.00x", "info"]


def test_prose_outside_the_block_quotes_no_measurement(run_module) -> None:
    """Goals may be written out; measured ratios and times come only from the block."""
    text = DOC.read_text(encoding="utf-8")
    before, rest = text.split(run_module.BEGIN, 1)
    prose = before + rest.split(run_module.END, 1)[1]
    for figure in re.findall(r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|s)\b|\b\d+\.\d+x\b", prose):
        assert figure in GOALS, f"docs/performance.md quotes {figure!r} outside the table"


#: Goals the prose names (they are targets, not measurements).
GOALS = {"1.5x", "1.05x"}
