"""``cli/list.py``: ``interactions list`` at a hundred names: suites on one line, patterns."""

from __future__ import annotations

import json

import pytest

from interactions_core.cli import COMMANDS, main
from interactions_core.cli.list import SUITE_FROM, group_suites, select, totals


def row(name: str, dist: str = "d", status: str = "ok") -> dict:
    return {
        "name": name,
        "distribution": dist,
        "version": "1",
        "target": "m:C",
        "status": status,
        "error": None,
        "qualified_name": f"{dist}:{name}",
    }


def test_suites_collapse_to_one_row_with_their_count() -> None:
    rows = [row("a"), *(row(f"s/t{i}", "suite") for i in range(SUITE_FROM)), row("z")]
    shown = group_suites(rows)
    assert [r["name"] for r in shown] == ["a", "s/*", "z"]
    assert shown[1]["count"] == SUITE_FROM and "--all" in shown[1]["target"]
    assert totals(rows, shown) == (
        f"{SUITE_FROM + 2} interactions from 2 distributions "
        f"({SUITE_FROM} in 1 suite shown as one line; --all lists every name)"
    )


def test_small_or_broken_suites_stay_expanded() -> None:
    few = [row(f"s/t{i}") for i in range(SUITE_FROM - 1)]
    assert group_suites(few) == few
    broken = [row(f"s/t{i}") for i in range(SUITE_FROM)] + [row("s/bad", status="broken")]
    assert [r["name"] for r in group_suites(broken)] == [r["name"] for r in broken]
    assert "1 broken" in totals(broken, broken)


def test_select_by_pattern_and_distribution() -> None:
    rows = [row("gsm8k", "interactions-gsm8k"), row("rg/ab", "rg"), row("rg/acre", "rg")]
    assert [r["name"] for r in select(rows, ["rg/*"], None)] == ["rg/ab", "rg/acre"]
    assert [r["name"] for r in select(rows, ["*8k", "rg/ab"], None)] == ["gsm8k", "rg/ab"]
    assert [r["name"] for r in select(rows, [], "Interactions_GSM8K")] == ["gsm8k"]
    assert [r["name"] for r in select(rows, ["interactions-gsm8k:*"], None)] == ["gsm8k"]


def test_the_installed_suite_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    suite = [ln for ln in lines if ln.startswith("rg/*")]
    assert len(suite) == 1 and "interactions-reasoning-gym" in suite[0]
    count = int(suite[0].split()[3])
    assert count >= 100
    assert lines[-1].startswith(f"{count + 3} interactions from 4 distributions")
    assert len(lines) < 10


def test_patterns_all_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "rg/*"]) == 0
    rg = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("rg/")]
    assert len(rg) >= 100 and "rg/*" not in [ln.split()[0] for ln in rg]
    assert main(["list", "--all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(rg) + 5  # header, 3 more, totals
    assert main(["list", "--json", "--distribution", "interactions-weather"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["weather"]
    assert main(["list", "no-such-*"]) == 1
    assert "no installed interaction matches" in capsys.readouterr().err


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_the_docs_show_what_the_readme_install_lists(
    doc: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / doc).read_text(encoding="utf-8")
    after = text.split("$ interactions list", 1)[1].split("\n", 1)[1]
    shown = after.split("\n\n", 1)[0].split("\n```", 1)[0]
    assert main(["list"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == shown


def test_a_mistyped_command_is_told_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["lst"])
    assert exc.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'lst'" in error
    assert all(repr(name) in error for name in COMMANDS)
