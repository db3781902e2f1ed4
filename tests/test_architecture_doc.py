"""docs/architecture.md is the map of the package, so it must match the file list.

Every module of ``interactions_core`` is named in the page's module map by its path
relative to the package (``runtime/step.py``; a subpackage's ``__init__.py`` may be
named as the package, ``ray/``), and every module path the page names exists. A
module added, removed or renamed without the map following fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "interactions_core"
PAGE = ROOT / "docs" / "architecture.md"
#: Paths the page may name that are not the package's.
OTHER_FOLDERS = ("docs/", "tests/", "benchmarks/", "plugins/", "examples/")


def modules() -> set[str]:
    """Every module file of the package, as a path relative to it."""
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }


def named_in_page() -> set[str]:
    """The backticked module paths and package folders the page names."""
    text = PAGE.read_text(encoding="utf-8")
    return set(re.findall(r"`([\w/]+(?:\.py|/))`", text))


def test_every_module_is_on_the_map() -> None:
    named = named_in_page()
    missing = sorted(
        module
        for module in modules()
        if module not in named
        and not (module.endswith("/__init__.py") and module[: -len("__init__.py")] in named)
    )
    assert not missing, f"docs/architecture.md does not name these modules: {missing}"


def test_every_module_on_the_map_exists() -> None:
    existing = modules()
    folders = {module.rsplit("/", 1)[0] + "/" for module in existing if "/" in module}
    stale = sorted(
        name
        for name in named_in_page()
        if name not in existing
        and name not in folders
        and not name.startswith(("docs/", "tests/", "benchmarks/", "plugins/", "examples/"))
    )
    assert not stale, f"docs/architecture.md names modules that do not exist: {stale}"
