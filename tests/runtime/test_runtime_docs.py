"""The library snippet of docs/episodes.md gives what ``interactions run`` prints."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from interactions_core.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAME = ("episodes", "terminated", "turns", "final_score_mean", "errors", "end_reasons")


def library_snippet() -> str:
    text = (ROOT / "docs" / "episodes.md").read_text(encoding="utf-8")
    section = text.split("## Library use", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_library_snippet_matches_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)  # the snippet names examples/ relative to the repository
    printed = io.StringIO()
    namespace: dict[str, object] = {"__name__": "snippet"}
    with contextlib.redirect_stdout(printed):
        exec(compile(library_snippet(), "docs/episodes.md", "exec"), namespace)
    summary = namespace["summary"].as_dict()  # type: ignore[attr-defined]
    assert (
        main(["run", "examples/config.yaml", "--data", "examples/gsm8k_demo.jsonl", "--json"]) == 0
    )
    cli = json.loads(capsys.readouterr().out)
    assert {k: summary[k] for k in SAME} == {k: cli[k] for k in SAME}
    assert (summary["terminated"], summary["errors"]) == (9, 0)
