"""docs/api.md renders every public name of the four public modules, and nothing stale.

The page is a list of mkdocstrings directives (``::: module.Name``); mkdocstrings
renders each from the docstrings when ``nox -s docs`` builds the site. Here: every
name in the modules' ``__all__`` has a directive, and every directive names an
object that exists and is the one the public module exports.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = (
    "interactions_core",
    "interactions_core.runtime",
    "interactions_core.testing",
    "interactions_core.compat.verl",
)


def directives() -> list[str]:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    return re.findall(r"^::: ([\w.]+)\s*$", text, re.M)


def resolve(path: str) -> object:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_directive_names_an_object() -> None:
    found = directives()
    assert len(found) == len(set(found)), "a name is rendered twice"
    for path in found:
        resolve(path)  # raises when the object moved or was renamed


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_name_is_rendered(module: str) -> None:
    exported = importlib.import_module(module)
    rendered = {}
    for path in directives():
        rendered.setdefault(path.rpartition(".")[2], []).append(resolve(path))
    missing = [
        name
        for name in exported.__all__
        if not name.startswith("__")
        and not any(obj is getattr(exported, name) for obj in rendered.get(name, []))
    ]
    assert not missing, f"docs/api.md lacks `::: <defining module>.NAME` for {missing}"


def test_every_rendered_class_and_function_says_what_it_is_for() -> None:
    import inspect

    undocumented = [
        path
        for path in directives()
        if (inspect.isclass(obj := resolve(path)) or inspect.isfunction(obj))
        and not (obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__)
    ]
    assert not undocumented, f"no docstring of their own: {undocumented}"


def test_the_root_api_is_two_short_lists_and_each_name_resolves() -> None:
    import interactions_core

    assert 12 <= len(interactions_core.__all__) <= 18
    for name in interactions_core.__all__:
        assert getattr(interactions_core, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'Registry'"):
        _ = interactions_core.Registry  # the catalog's internals are not the API


def test_every_module_of_the_package_is_private_or_on_the_page() -> None:
    """A top-level module or package without a leading underscore is listed on api.md."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(interactions_core(?:\.\w+)*)`", text))
    package = ROOT / "interactions_core"
    public = {
        f"interactions_core.{path.stem}"
        for path in package.iterdir()
        if not path.name.startswith("_")
        and (path.suffix == ".py" or (path / "__init__.py").is_file())
    }
    assert public, "the package was not found"
    missing = sorted(public - listed)
    assert not missing, f"public modules missing from docs/api.md's table: {missing}"
