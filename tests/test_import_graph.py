"""What the fast paths load: ``import interactions_core`` and a warm ``interactions list``.

Every start of the CLI pays for ``import interactions_core``, and ``interactions list``
is the command users run to see what is installed: both must stay close to a bare
interpreter start. How close is measured by the benchmarks, as a ratio to
``python -c pass`` in the same run (``nox -s bench``, docs/performance.md), never by a
timed test on a shared machine; here, what makes them slow is ruled out.

What a warm listing imports is checked by what matters, not by the standard library
modules that happen to be loaded: nothing of the runtime, the server or the Ray
package, no plugin's code (listing reads metadata, it never imports plugins), and none
of the dependencies that cost most to import (pluggy, yaml, attrs and
``importlib.metadata``: the index makes them unnecessary there). Project modules are
named by package prefix only, so moving a module inside a package changes nothing here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Parts of the project a warm listing has no use for.
PROJECT_PARTS = (
    "interactions_core.runtime",
    "interactions_core.serve",
    "interactions_core.ray",
    "interactions_core.integrations",
    "interactions_core.compat",
    "interactions_core.testing",
)
#: Dependencies a warm listing must not import (the index replaces them there).
COSTLY = ("pluggy", "yaml", "attrs", "importlib.metadata")
#: Standard modules only other paths use: the did-you-mean (``difflib``) and OpenSSL's
#: hashes (``hashlib``; the index names its files with ``zlib.crc32``).
NOT_LISTING = ("difflib", "hashlib")
#: Optional heavy stacks: importing the core never pulls one in.
HEAVY_STACKS = ("ray", "torch", "verl", "openenv", "uvicorn", "transformers", "trl")

#: Run after the listing, in the same interpreter: what it left in ``sys.modules``.
WARM_LIST = (
    "import sys\n"
    "from interactions_core.cli import main\n"
    "code = main(['list'])\n"
    "print('exit', code)\n"
    "print(' '.join(sorted(sys.modules)))\n"
)


def _env() -> dict[str, str]:
    # os.environ carries the per-test XDG_CACHE_HOME set by the root conftest.
    return dict(os.environ)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=_env(), capture_output=True, text=True, check=True
    )


def _list_command() -> list[str]:
    """``interactions list`` as users run it: the console script, else ``python -m``."""
    script = Path(sys.executable).with_name("interactions")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "interactions_core"]
    return [*command, "list"]


def _under(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules for p in prefixes if m == p or m.startswith(p + "."))


def _plugin_code(modules: list[str]) -> list[str]:
    """Modules of plugin distributions (``interactions_gsm8k``, ...), not the core's."""
    return sorted(
        m
        for m in modules
        if m.startswith("interactions_")
        and m != "interactions_core"
        and not m.startswith("interactions_core.")
    )


def test_importing_the_package_loads_no_front_end_plugin_or_heavy_stack() -> None:
    proc = _python("-c", "import interactions_core, sys; print(' '.join(sys.modules))")
    modules = proc.stdout.split()
    assert "interactions_core" in modules
    front_ends = ("interactions_core.cli", "interactions_core.serve", "interactions_core.ray")
    assert _under(modules, front_ends) == []
    assert _plugin_code(modules) == []
    assert _under(modules, HEAVY_STACKS) == []
    # Importing the package runs nothing but its own small __init__.
    assert [m for m in modules if m.startswith("interactions_core.")] == []


@pytest.fixture
def warm_list_modules() -> list[str]:
    _python("-c", WARM_LIST)  # writes the index for this interpreter: the next run is warm
    proc = _python("-c", WARM_LIST)
    *listing, exit_line, modules = proc.stdout.splitlines()
    assert exit_line == "exit 0"
    assert any("gsm8k" in line for line in listing)  # it did list the bundled plugins
    return modules.split()


def test_a_warm_list_imports_no_plugin_code(warm_list_modules: list[str]) -> None:
    assert _plugin_code(warm_list_modules) == []
    assert "interactions_core._hooks" not in warm_list_modules


def test_a_warm_list_imports_only_the_project_parts_it_needs(
    warm_list_modules: list[str],
) -> None:
    assert _under(warm_list_modules, PROJECT_PARTS) == []
    assert _under(warm_list_modules, HEAVY_STACKS) == []


def test_a_warm_list_imports_no_costly_dependency(warm_list_modules: list[str]) -> None:
    assert _under(warm_list_modules, COSTLY) == []


def test_a_warm_list_imports_no_other_subcommand(warm_list_modules: list[str]) -> None:
    from interactions_core.cli import COMMANDS

    others = [f"interactions_core.cli.{name}" for name in COMMANDS if name != "list"]
    assert "interactions_core.cli.list" in warm_list_modules
    assert [m for m in others if m in warm_list_modules] == []


def test_a_warm_list_leaves_out_what_only_other_paths_use(warm_list_modules: list[str]) -> None:
    assert _under(warm_list_modules, NOT_LISTING) == []


#: Packages that export their parts' names on first use (``_names.lazy_exports``), and
#: what importing one must not load: besides its own parts, the stacks those parts need.
LAZY_PACKAGES = {
    "interactions_core.ray": ("ray", "interactions_core.runtime", "pluggy", "yaml"),
    "interactions_core.testing": ("pytest", "interactions_core.runtime", "pluggy", "attrs"),
}

#: Imports the package named by argv[1] in a fresh interpreter; prints what that loaded,
#: then what each public name resolves to and what an unknown name raises.
LAZY_IMPORT = (
    "import importlib, json, sys\n"
    "package = importlib.import_module(sys.argv[1])\n"
    "loaded = sorted(sys.modules)\n"
    "resolved = {}\n"
    "for name in package.__all__:\n"
    "    value = getattr(package, name)\n"
    "    resolved[name] = getattr(value, '__module__', None) or type(value).__name__\n"
    "try:\n"
    "    package.no_such_name\n"
    "except AttributeError as exc:\n"
    "    unknown = str(exc)\n"
    "print(json.dumps([loaded, resolved, unknown, dir(package)]))\n"
)


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_a_lazy_package_imports_its_parts_only_when_a_name_is_used(package: str) -> None:
    import json

    loaded, resolved, unknown, listed = json.loads(_python("-c", LAZY_IMPORT, package).stdout)
    assert _under(loaded, (package,)) == [package]
    assert _under(loaded, LAZY_PACKAGES[package]) == []
    # Every public name resolves, to an object of one of the package's own parts.
    assert sorted(resolved) == sorted(listed)
    assert len(resolved) >= 8
    defined_in = {module for module in resolved.values() if "." in module}
    assert defined_in and all(module.startswith(package + ".") for module in defined_in)
    assert unknown == f"module {package!r} has no attribute 'no_such_name'"
