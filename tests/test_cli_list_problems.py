"""``interactions list --check`` prints a multi-line problem as lines, never a literal ``\\n``."""

from __future__ import annotations

import pytest

from interactions_core.cli.list import _print_table


def row(error: str) -> dict[str, object]:
    return {
        "name": "broken",
        "distribution": "interactions-broken",
        "version": "1.0",
        "target": "broken_pkg:Broken",
        "status": "broken",
        "error": error,
    }


def test_a_spec_problem_list_prints_one_problem_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    error = "broken_pkg:Broken does not implement the interaction spec:\n  - calculate_score"
    _print_table([row(error)], expand=False, filtered=False)
    out = capsys.readouterr().out
    assert "\\n" not in out
    assert out.endswith("spec:\n  - calculate_score\n")


def test_control_characters_inside_a_line_are_still_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _print_table([row("bad \x1b[31mred\x1b[0m name")], expand=False, filtered=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "bad \\x1b[31mred" in out
