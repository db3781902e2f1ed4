"""Trainer integrations live in ``interactions_core.integrations``; the old paths are aliases.

Users' agent-loop YAML files name
``interactions_core.compat.verl_agent_loop.InteractionAgentLoop`` and scripts
import ``interactions_core.compat.trl``: both keep resolving to the very same
objects, while the project's own files (``pyproject.toml``, the docs) name the
new paths. The verl alias is checked by reading its source here (importing it
needs verl) and by identity in ``tests/verl_adapter``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "interactions_core"


def test_the_old_trl_path_is_the_same_factory() -> None:
    from interactions_core.compat import trl as old
    from interactions_core.integrations import trl as new

    assert old.environment_factory is new.environment_factory
    assert old.InteractionsEnvironment is new.InteractionsEnvironment


def test_the_old_verl_agent_loop_path_reexports_the_new_module() -> None:
    tree = ast.parse(
        (PACKAGE / "compat" / "verl_agent_loop" / "__init__.py").read_text(encoding="utf-8")
    )
    imported = {
        (node.module, node.level, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert ("integrations.verl", 3, "InteractionAgentLoop") in imported
    defined = [node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))]
    assert not defined, "the alias defines nothing of its own"


def test_the_projects_own_files_name_the_new_paths() -> None:
    files = [ROOT / "pyproject.toml", *sorted((ROOT / "docs").glob("*.md"))]
    for old in ("interactions_core.compat.verl_agent_loop", "interactions_core.compat.trl"):
        for path in files:
            text = path.read_text(encoding="utf-8")
            for paragraph in text.split("\n\n"):
                if old in paragraph:
                    assert "alias" in paragraph or "old path" in paragraph, (
                        f"{path.name} names {old} outside a note on the old path: {paragraph}"
                    )
