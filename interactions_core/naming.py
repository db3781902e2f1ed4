"""Finding one named thing among many: plain or qualified names, and suggestions.

Interactions, policies and dataset builders are all named by plugins, and a
name may be claimed by two distributions. Everything that looks a name up does
it the same way: an exact match on the name first, then ``distribution:name``
with the distribution compared after PEP 503 normalisation; an unknown name
gets a did-you-mean from the names that exist.
"""

from __future__ import annotations

from .selection import normalize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T", bound=Any)

__all__ = ["find_named", "suggest"]


def find_named(items: Sequence[T], name: str) -> list[T]:
    """The items (with ``.name`` and ``.distribution``) that ``name`` designates."""
    matches = [item for item in items if item.name == name]
    if not matches and ":" in name:
        dist, _, short = name.partition(":")
        wanted = normalize(dist)
        matches = [i for i in items if i.name == short and normalize(i.distribution) == wanted]
    return matches


def suggest(name: str, known: Iterable[str], n: int = 2) -> str:
    """``"; did you mean 'a' or 'b'?"`` for close matches of ``name``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, sorted(set(known)), n=n, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
