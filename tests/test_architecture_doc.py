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


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """The project modules ``path`` imports: at module level, and anywhere."""
    import ast

    module = ".".join(("interactions_core", *path.relative_to(PACKAGE).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    top: set[str] = set()
    anywhere: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        found = {n for n in names if n.startswith("interactions_core")}
        anywhere |= found
        # Module level: the body itself and its ``try`` blocks; ``if TYPE_CHECKING``
        # blocks and imports inside functions run later, or never.
        if node in tree.body or any(isinstance(b, ast.Try) and node in b.body for b in tree.body):
            top |= found
    return top, anywhere


def test_imports_point_down() -> None:
    """No module outside ``cli/`` imports the CLI; no import cycle at module level."""
    known = {
        ".".join(("interactions_core", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): p
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        top, anywhere = _imports(path)
        if not name.startswith(("interactions_core.cli", "interactions_core.__main__")):
            assert not {m for m in anywhere if m.startswith("interactions_core.cli")}, name
        graph[name] = {m for m in top if m in known and m != name}

    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join([*trail, node, nxt])}")
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
