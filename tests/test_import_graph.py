"""The import graph of the fast paths (a guard rail, not a timing test).

``import interactions_core`` and a warm ``interactions list`` must not import the
heavy dependencies: pluggy, yaml, attrs or ``importlib.metadata`` (see
docs/performance.md for what each one costs). Checked in a fresh interpreter,
through ``sys.modules``, so a later change cannot quietly undo the work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

FORBIDDEN = ("pluggy", "yaml", "attrs", "importlib.metadata")
#: Not forbidden, but avoided today: reported by the tests when they come back.
AVOIDED = ("typing", "argparse", "json", "re", "enum", "signal", "warnings")

# The wrapper itself imports nothing (no json, no io: both are not free), and
# prints its own findings after the listing.
WARM_LIST = (
    "import sys\n"
    "from interactions_core.cli import main\n"
    "code = main(['list'])\n"
    "print('exit', code)\n"
    "print(' '.join(sorted(sys.modules)))\n"
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    # os.environ carries the per-test XDG_CACHE_HOME set by the root conftest.
    return subprocess.run(
        [sys.executable, *args], env=dict(os.environ), capture_output=True, text=True, check=True
    )


def _forbidden(modules: list[str]) -> list[str]:
    return sorted(m for m in modules for bad in FORBIDDEN if m == bad or m.startswith(bad + "."))


def test_import_interactions_core_is_light() -> None:
    proc = _python(
        "-c", "import interactions_core, sys, json; print(json.dumps(sorted(sys.modules)))"
    )
    modules = json.loads(proc.stdout)
    assert "interactions_core" in modules
    assert _forbidden(modules) == []
    # Importing the package runs nothing but its own small __init__.
    assert [m for m in modules if m.startswith("interactions_core.")] == []


@pytest.fixture
def warm_list_modules() -> list[str]:
    _python("-m", "interactions_core", "list")  # writes the index: the next run is warm
    proc = _python("-c", WARM_LIST)
    *listing, exit_line, modules = proc.stdout.splitlines()
    assert exit_line == "exit 0"
    assert any("gsm8k" in line for line in listing)  # it did list the bundled plugins
    return modules.split()


def test_warm_list_imports_no_heavy_dependency(warm_list_modules: list[str]) -> None:
    assert _forbidden(warm_list_modules) == []
    assert "interactions_core.plugins" not in warm_list_modules


def test_warm_list_avoids_what_it_does_not_need(warm_list_modules: list[str]) -> None:
    avoided = [m for m in AVOIDED if m in warm_list_modules]
    assert avoided == [], f"the warm list path imports {avoided}"
