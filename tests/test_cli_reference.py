"""docs/cli-reference.md is generated from the CLI's parser and must be up to date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "docs" / "tools" / "cli_reference.py"


def test_cli_reference_is_fresh() -> None:
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_every_command_and_flag_is_in_the_reference() -> None:
    from interactions_core.cli import COMMANDS

    page = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## `interactions {name}`" in page
    for flag in ("--report FILE", "--distribution DIST", "-o, --output FILE", "--all"):
        assert f"`{flag}`" in page


def test_the_check_catches_a_stale_page(tmp_path: Path) -> None:
    sys.path.insert(0, str(TOOL.parent))
    try:
        import cli_reference
    finally:
        sys.path.remove(str(TOOL.parent))
    stale = tmp_path / "cli-reference.md"
    stale.write_text("# CLI reference\n")
    original = cli_reference.PAGE
    cli_reference.PAGE = stale
    try:
        assert cli_reference.main(["--check"]) == 1
    finally:
        cli_reference.PAGE = original
