"""Finding one named thing among many: plain or qualified names, and suggestions.

Interactions, policies and dataset builders are all named by plugins, and a
name may be claimed by two distributions. Everything that looks a name up does
it the same way: an exact match on the name first, then ``distribution:name``
with the distribution compared after PEP 503 normalisation; an unknown name
gets a did-you-mean from the names that exist.
"""

from __future__ import annotations

from ._selection import normalize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T", bound=Any)

__all__ = ["close_matches", "find_named", "suggest", "summarize"]


def find_named(items: Sequence[T], name: str) -> list[T]:
    """The items (with ``.name`` and ``.distribution``) that ``name`` designates."""
    matches = [item for item in items if item.name == name]
    if not matches and ":" in name:
        dist, _, short = name.partition(":")
        wanted = normalize(dist)
        matches = [i for i in items if i.name == short and normalize(i.distribution) == wanted]
    return matches


def close_matches(name: str, known: Iterable[str], n: int = 2, cutoff: float = 0.6) -> list[str]:
    """The names of ``known`` closest to ``name``, best first: the one did-you-mean."""
    import difflib

    return difflib.get_close_matches(name, sorted(set(known)), n=n, cutoff=cutoff)


def suggest(
    name: str,
    known: Iterable[str],
    n: int = 2,
    cutoff: float = 0.6,
    render: Callable[[str], str] = repr,
) -> str:
    """``"; did you mean 'a' or 'b'?"`` for close matches of ``name``, else ``""``."""
    close = close_matches(name, known, n, cutoff)
    return f"; did you mean {' or '.join(render(c) for c in close)}?" if close else ""


#: Names sharing a ``prefix/`` are shown as one ``prefix/*`` item from this many on.
GROUP_FROM = 3


def summarize(names: Iterable[str], limit: int = 12) -> str:
    """A short list of names for an error message: ``gsm8k, rg/* (106 names), weather``.

    Suites (names sharing a ``prefix/``) collapse to one item with their count,
    so the names a user is likely to mean are not cut off by a hundred
    generated ones; past ``limit`` items the rest are counted.
    """
    unique = sorted(set(names))
    by_prefix: dict[str, int] = {}
    for name in unique:
        prefix, slash, _ = name.partition("/")
        if slash:
            by_prefix[prefix] = by_prefix.get(prefix, 0) + 1
    items: list[str] = []
    shown: set[str] = set()
    for name in unique:
        prefix, slash, _ = name.partition("/")
        if slash and by_prefix[prefix] >= GROUP_FROM:
            if prefix not in shown:
                shown.add(prefix)
                items.append(f"{prefix}/* ({by_prefix[prefix]} names)")
        else:
            items.append(name)
    if len(items) > limit:
        return ", ".join(items[:limit]) + f", ... and {len(items) - limit} more"
    return ", ".join(items)
