"""Helpers that several of the core's test files share: config files, sample plugins.

Fixtures live in ``conftest.py``; this module holds the plain functions and plugin
sources that more than one ``test_<module>.py`` needs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from interactions_core import BaseInteraction, ConfigError, load_config
from interactions_core.cli import main
from interactions_core.registry import Registry


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def problems(source) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(source)
    return info.value.problems


GOOD = """
from interactions_core import BaseInteraction, InteractionResult

IMPORTED = True

class Acme(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


def by_name(registry: Registry, name: str):
    return [e for e in registry.entries() if e.name == name]


PLUGINS = "interactions_core.plugins"


SUITE = """
from interactions_core import BaseInteraction, InteractionResult, hookimpl

class Task(BaseInteraction):
    '''One task of the suite; which one comes from config.'''
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, self.config["task"], 1.0)

@hookimpl
def register_interactions(register):
    for task in ("alpha", "beta"):
        register(f"suite/{task}", Task, defaults={"task": task}, description=f"task {task}")
"""


def suite_dist(make_dist):
    make_dist("hooky-suite", "0.2", {PLUGINS: {"suite": "hooky_suite"}}, {"hooky_suite": SUITE})


class VerlStyle(BaseInteraction):
    """Written exactly the verl way: own dict keyed by instance_id."""

    def __init__(self, config):
        super().__init__(config)
        self._instance_dict = {}

    async def start_interaction(self, instance_id=None, ground_truth=None, **kwargs):
        self._instance_dict[instance_id] = {"ground_truth": ground_truth}
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        ok = messages[-1]["content"] == self._instance_dict[instance_id]["ground_truth"]
        return ok, "right" if ok else "wrong", 1.0 if ok else 0.0, {}

    async def calculate_score(self, instance_id, **kwargs):
        return 0.0

    async def finalize_interaction(self, instance_id, **kwargs):
        del self._instance_dict[instance_id]


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[str]:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert main(["check", str(config)]) == 1
    return capsys.readouterr().err.splitlines()


def signal_when(
    command: list[str], ready: Callable[[], bool], sig: int
) -> tuple[int, bytes, bytes]:
    """Run ``interactions COMMAND`` in a child, send it ``sig`` once ``ready()`` is true
    (within 60 s, while it still runs); return its exit code, stdout and stderr."""
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "interactions_core", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(0.02)
        assert proc.poll() is None, "the command ended before it could be signalled"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err
