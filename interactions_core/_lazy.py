"""Lazy public names (PEP 562): a package lists its API once and imports it on first use.

``import interactions_core`` must stay as cheap as a bare interpreter start (the
CLI's ``list`` runs on it), so a package's ``__init__`` imports nothing: it hands
:func:`lazy_exports` a map of submodule -> public names, and gets back its
``__all__`` and the module ``__getattr__``/``__dir__`` that import a name's
submodule the first time the name is used. Type checkers read the same names
from a ``TYPE_CHECKING`` block of ``from .module import Name as Name`` lines.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package``, from ``{submodule: names}``."""
    where = {name: module for module, names in modules.items() for name in names}
    public = sorted(where)

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib
        import sys

        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return list(public)

    return public, __getattr__, __dir__
