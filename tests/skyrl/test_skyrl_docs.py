"""The SkyRL snippet of docs/trainers.md runs as written and prints what its comments show."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import skyrl_gym

from interactions_core.integrations import skyrl

ROOT = Path(__file__).resolve().parents[2]


def skyrl_snippet() -> str:
    text = (ROOT / "docs" / "trainers.md").read_text(encoding="utf-8")
    section = text.split("## SkyRL", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_the_skyrl_snippet_plays_wrong_then_right() -> None:
    code = skyrl_snippet()
    shown = [line[2:] for line in code.splitlines() if re.match(r"# [0-9]", line)]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/trainers.md", "exec"), {"__name__": "snippet"})
    finally:
        for env_id in [i for i in skyrl_gym.registry if i.startswith(skyrl.PREFIX)]:
            del skyrl_gym.registry[env_id]
    assert out.getvalue().splitlines() == shown == ["0.0 False user", "1.0 True terminated"]
