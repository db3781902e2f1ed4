"""docs/migrating-from-verl.md, verl 0.7 part: the edit, applied to verl 0.7.1's real file."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "migrating-from-verl.md"


def guide_blocks(language: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    part = text[text.index("## verl 0.7 and older") : text.index("## Reaching every worker")]
    return re.findall(rf"```{language}\n(.*?)```", part, re.S)


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_documented_imports_are_verls_and_the_edit_replaces_them(
    verl_wheel_root: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    shutil.copytree(verl_wheel_root / "verl", site / "verl")
    target = site / "verl" / "experimental" / "agent_loop" / "tool_agent_loop.py"
    before = imports_of(target)
    (shown,) = guide_blocks("python")
    documented = {
        f"{node.module}.{alias.name}"
        for node in ast.parse(shown).body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    assert documented <= before  # the guide quotes verl's real import lines
    # verl 0.7.1 imports its loader in that one file and nowhere else.
    users = [
        p.relative_to(site).as_posix()
        for p in (site / "verl").rglob("*.py")
        if "interaction_registry import" in p.read_text(errors="replace")
        and "interactions/utils" not in p.as_posix()
    ]
    assert users == ["verl/experimental/agent_loop/tool_agent_loop.py"]
    (edit,) = guide_blocks("sh")
    env = {**os.environ, "PYTHONPATH": str(site)}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    done = subprocess.run(["bash", "-c", edit], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    after = imports_of(target)
    assert not documented & after
    assert {
        "interactions_core.compat.verl.BaseInteraction",
        "interactions_core.compat.verl.initialize_interactions_from_config",
    } <= after
    compile(target.read_text(), str(target), "exec")
