"""Fixtures for the core's tests: real distributions on a temporary ``sys.path``."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from interactions_core.registry import reset_registry

MakeDist = Callable[..., Path]


@pytest.fixture
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder put first on ``sys.path``, for generated distributions."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    reset_registry()
    yield folder
    reset_registry()


@pytest.fixture
def make_dist(site_dir: Path) -> MakeDist:
    """Create a real installed distribution: ``*.dist-info`` with entry points, plus modules.

    ``make_dist("acme-tasks", entry_points={"interactions_core.interactions":
    {"acme": "acme_mod:Acme"}}, modules={"acme_mod": "class Acme: ..."})``
    """

    def make(
        name: str,
        version: str = "1.0",
        entry_points: dict[str, dict[str, str]] | None = None,
        modules: dict[str, str] | None = None,
        where: Path | None = None,
        requires: list[str] | None = None,
    ) -> Path:
        root = where or site_dir
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
        meta += [f"Requires-Dist: {r}" for r in requires or []]
        (info / "METADATA").write_text("\n".join(meta) + "\n")
        lines = []
        for group, items in (entry_points or {}).items():
            lines.append(f"[{group}]")
            lines += [f"{k} = {v}" for k, v in items.items()]
            lines.append("")
        (info / "entry_points.txt").write_text("\n".join(lines))
        for mod, code in (modules or {}).items():
            path = root / (mod.replace(".", "/") + ".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(code))
        reset_registry()
        return info

    return make


@pytest.fixture
def forget_modules():
    """Remove modules a test imported from generated distributions afterwards."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("acme", "tmp_", "fake_", "broken_", "hooky", "verlish")):
            del sys.modules[name]


#: The entry-point group of interactions, and a plugin with a config schema for the
#: config and loader tests (``acme`` installs it).
GROUP = "interactions_core.interactions"

ACME = """
import attrs
from typing import Literal
from interactions_core import BaseInteraction, InteractionResult

CREATED = []

@attrs.define
class AcmeConfig:
    level: int = attrs.field(default=1, metadata={"help": "difficulty"})
    mode: Literal["a", "b"] = "a"

class AcmeInteraction(BaseInteraction):
    config_schema = AcmeConfig

    def __init__(self, config):
        super().__init__(config)
        CREATED.append(self.name)

    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


@pytest.fixture
def acme(make_dist, forget_modules):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_cfg:AcmeInteraction"}}, {"acme_cfg": ACME})
