"""Every command in docs/report.md runs, in order, and writes what the page says it does."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from interactions_core.cli import main

ROOT = Path(__file__).resolve().parents[2]


def commands() -> list[list[str]]:
    text = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        out.extend(shlex.split(line) for line in block.splitlines() if line.strip())
    return out


def test_docs_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    found = commands()
    assert len(found) == 4 and all(c[0] == "interactions" for c in found)
    for argv in found:
        assert main(argv[1:]) == 0, argv
    for page in ("report.html", "records.html", "compare.html"):
        assert (tmp_path / page).read_text(encoding="utf-8").count("<svg") == 5
    compare = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "records.jsonl" in compare and "first6.jsonl" in compare


def test_the_screenshot_is_in_the_docs() -> None:
    assert (ROOT / "docs" / "images" / "report.png").read_bytes()[:4] == b"\x89PNG"
