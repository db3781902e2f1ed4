"""The ``state`` check: nothing of a session is left on the instance once it is finalized.

A run opens and finalizes sessions by the hundred thousand on one instance; a
dict entry kept per finished session is a slow memory leak that no short test
sees. The check plays the episodes three times and watches the containers the
instance holds (its attributes, and one level inside dicts): one that grows
with every batch of finished sessions, or still holds a finished
``instance_id``, is reported, as is an ``open_sessions`` that does not return
to where it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._context import CheckContext
from ._play import play

__all__ = ["check_state", "holding", "open_sessions", "sizes"]


async def check_state(ctx: CheckContext) -> None:
    """Play the episodes three times; report what grows, what is held, what stays open."""
    obj = ctx.instance()
    baseline = open_sessions(obj)
    finished: list[str] = []
    await _play_all(ctx, obj, finished)  # warm-up: caches may fill here
    seen = [sizes(obj)]
    for _ in range(2):
        await _play_all(ctx, obj, finished)
        seen.append(sizes(obj))
    for attr, first in seen[0].items():
        second, third = seen[1].get(attr, first), seen[2].get(attr, first)
        if first < second < third:
            ctx.add(
                "state",
                f"attribute {attr!r} of the instance grew from {first} to {third} items over "
                f"{2 * len(ctx.episodes)} finished sessions: per-session state is kept after "
                "finalize_interaction (delete it there, or use SessionInteraction)",
            )
    for attr, count in holding(obj, set(finished)).items():
        ctx.add(
            "state",
            f"attribute {attr!r} still holds {count} finalized instance_id(s) after "
            "finalize_interaction; drop a session's entry when it is finalized",
        )
    after = open_sessions(obj)
    if baseline is not None and after is not None and after != baseline:
        ctx.add(
            "state",
            f"open_sessions is {after} after every session was finalized (it was "
            f"{baseline} before): finalize_interaction does not release sessions",
        )


async def _play_all(ctx: CheckContext, obj: Any, finished: list[str]) -> None:
    """Play every episode once; add the ids of the sessions played to ``finished``."""
    for number, episode in enumerate(ctx.episodes, 1):
        iid = (await play(ctx, obj, episode, number))[0]
        if iid is not None:
            finished.append(iid)


def open_sessions(obj: Any) -> int | None:
    """The instance's ``open_sessions`` count, when it keeps one (``SessionInteraction``)."""
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
