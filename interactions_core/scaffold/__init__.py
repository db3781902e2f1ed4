"""``interactions new``: generate a complete, installable plugin distribution.

:func:`create_plugin` renders the templates in ``scaffold/templates/`` (package
data, plain :class:`string.Template` files) into a new folder::

    interactions-<name>/
        pyproject.toml          # entry point interactions_core.interactions: <name>
        README.md
        .gitignore
        interactions_<name>/__init__.py
        interactions_<name>/interaction.py   # a config schema and a working example
        interactions_<name>/py.typed
        tests/test_<name>_interaction.py     # the conformance checker and fixtures

Everything is checked and rendered in memory first; nothing is written when the
name is invalid, the folder exists and is not empty, or the name would shadow an
installed interaction or an importable package. ``pip install ./interactions-<name>``
then makes ``<name>`` appear in ``interactions list``, and ``pytest`` passes in the
folder.
"""

from __future__ import annotations

import keyword
import os
import re
import shutil
from pathlib import Path
from string import Template
from typing import Any

from ..errors import InteractionsError

__all__ = ["PluginNames", "ScaffoldError", "core_requirement", "create_plugin", "plugin_names"]

TEMPLATES = Path(__file__).with_name("templates")
_SEPARATORS = re.compile(r"[\s.\-]+")
_VALID = re.compile(r"^[a-z][a-z0-9_]*$")


class ScaffoldError(InteractionsError, ValueError):
    """``interactions new`` refused the name or the folder; nothing was written."""


class PluginNames:
    """Every name derived from what the user typed."""

    __slots__ = ("class_name", "dist", "name", "package")

    def __init__(self, name: str) -> None:
        self.name = name  # the interaction name (entry-point name)
        self.dist = "interactions-" + name.replace("_", "-")
        self.package = "interactions_" + name
        camel = "".join(part.capitalize() for part in name.split("_") if part)
        self.class_name = f"{camel}Interaction"

    def as_dict(self) -> dict[str, str]:
        return {s: getattr(self, s) for s in self.__slots__}


#: Longest plugin name accepted (folder names are limited to 255 bytes on most systems).
MAX_NAME = 100


def plugin_names(raw: str) -> PluginNames:
    """Normalise ``raw`` (``My-Task`` -> ``my_task``) and derive the other names.

    Raises :class:`ScaffoldError` when the result is not a usable Python identifier.
    """
    text = raw.strip()
    for prefix in ("interactions-", "interactions_"):
        if text.lower().startswith(prefix) and len(text) > len(prefix):
            text = text[len(prefix) :]  # "interactions-foo" means the plugin "foo"
    name = _SEPARATORS.sub("_", text).strip("_").lower()
    if not name or not _VALID.match(name) or not name.isidentifier():
        raise ScaffoldError(
            f"invalid plugin name {raw!r}: after normalisation ({name!r}) it must be a Python "
            "identifier: letters, digits and underscores (hyphens, dots and spaces become "
            "underscores), starting with a letter; e.g. 'my_task' or 'my-task'"
        )
    if len(name) > MAX_NAME:
        raise ScaffoldError(
            f"invalid plugin name: {len(name)} characters long; at most {MAX_NAME} (it names "
            "a folder, a package and a distribution, and file systems limit name lengths)"
        )
    if keyword.iskeyword(name):
        raise ScaffoldError(f"invalid plugin name {raw!r}: {name!r} is a Python keyword")
    return PluginNames(name)


def core_requirement(version: str | None = None) -> str:
    """The version range generated plugins declare for the running core.

    ``0.1.x`` -> ``>=0.1,<0.2`` (before 1.0 a minor release may break plugins);
    ``1.4.x`` -> ``>=1.4,<2``.
    """
    if version is None:
        from .. import __version__

        version = __version__
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
    major, minor = parts[0], parts[1]
    if major == 0:
        return f">=0.{minor},<0.{minor + 1}"
    return f">={major}.{minor},<{major + 1}"


def _shadowing(names: PluginNames, registry: Any) -> list[str]:
    problems = []
    if registry is None:
        from ..registry import get_registry

        registry = get_registry()
    for entry in registry.entries():
        if entry.name == names.name:
            problems.append(
                f"an interaction named {names.name!r} is already installed "
                f"({entry.distribution} {entry.version}, {entry.target}); a second one would "
                "make the name ambiguous. Choose another name"
            )
            break
    import importlib.metadata
    import importlib.util

    try:  # the same name to pip (PEP 503): installing one would uninstall the other
        found = importlib.metadata.distribution(names.dist)
        problems.append(
            f"a distribution named {found.metadata['Name']!r} ({found.version}) is installed, "
            f"which pip takes for {names.dist!r} and would replace. Choose another name"
        )
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        spec = importlib.util.find_spec(names.package)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        where = spec.origin or (list(spec.submodule_search_locations or []) or ["?"])[0]
        problems.append(
            f"a package named {names.package!r} is already importable (from {where}); the "
            "generated package would shadow it or be shadowed. Choose another name"
        )
    return problems


def render(names: PluginNames, core_spec: str | None = None) -> dict[str, str]:
    """The files of the new distribution, relative path -> text (nothing is written)."""
    values = {**names.as_dict(), "core_spec": core_spec or core_requirement()}
    files = {
        "pyproject.toml": "pyproject.toml.tmpl",
        "README.md": "README.md.tmpl",
        ".gitignore": "gitignore.tmpl",
        f"{names.package}/__init__.py": "__init__.py.tmpl",
        f"{names.package}/interaction.py": "interaction.py.tmpl",
        f"tests/test_{names.name}_interaction.py": "test_plugin.py.tmpl",
    }
    out = {
        path: Template((TEMPLATES / template).read_text(encoding="utf-8")).substitute(values)
        for path, template in files.items()
    }
    out[f"{names.package}/py.typed"] = ""
    return out


def create_plugin(
    name: str,
    directory: str | os.PathLike[str] | None = None,
    *,
    registry: Any = None,
    check_installed: bool = True,
) -> Path:
    """Generate the plugin distribution for ``name``; return its folder.

    ``directory`` defaults to ``./interactions-<name>``. ``registry`` is where
    installed interaction names are looked up (default: the installed plugins);
    ``check_installed=False`` skips that and the importable-package check.
    Raises :class:`ScaffoldError` listing every problem; nothing is written then.
    """
    names = plugin_names(name)
    target = Path(directory) if directory is not None else Path(names.dist)
    problems = []
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        what = "a file" if not target.is_dir() else "a folder that is not empty"
        problems.append(f"{target} is {what}; choose a new or empty folder with --dir")
    if check_installed:
        problems.extend(_shadowing(names, registry))
    if problems:
        raise ScaffoldError(
            f"cannot create plugin {names.name!r}:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    files = render(names)
    created = not target.exists()
    try:
        for relative, text in files.items():
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        if created:
            shutil.rmtree(target, ignore_errors=True)
        else:
            for child in target.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise ScaffoldError(f"cannot write the plugin to {target}: {exc}") from exc
    return target
