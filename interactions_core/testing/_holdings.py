"""What an interaction instance holds: how the checker sees state left behind by sessions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["holding", "open_sessions", "sizes"]


def open_sessions(obj: Any) -> int | None:
    try:
        value = getattr(obj, "open_sessions", None)
    except Exception:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_CONTAINERS = (dict, list, set, frozenset, tuple)


def _members(obj: Any) -> dict[str, Any]:
    out = {}
    try:
        out.update(vars(obj))
    except TypeError:
        pass
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if isinstance(slot, str) and slot not in out and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


def sizes(obj: Any) -> dict[str, int]:
    """Sizes of the containers held by the instance (and one level inside dicts)."""
    sizes: dict[str, int] = {}
    for name, value in _members(obj).items():
        if isinstance(value, (*_CONTAINERS, Mapping)):
            sizes[name] = len(value)
            if isinstance(value, Mapping) and len(value) <= 64:
                for key, inner in value.items():
                    if isinstance(inner, (*_CONTAINERS, Mapping)):
                        sizes[f"{name}[{key!r}]"] = len(inner)
    return sizes


def holding(obj: Any, ids: set[str]) -> dict[str, int]:
    """Containers on the instance that still mention finished instance ids."""
    found: dict[str, int] = {}
    if not ids:
        return found
    for name, value in _members(obj).items():
        if not isinstance(value, (Mapping, list, set, frozenset, tuple)):
            continue
        count = sum(1 for k in value if isinstance(k, str) and k in ids)
        if count:
            found[name] = count
    return found
