"""One replica of a pool: an interaction instance living in a Ray actor.

The class is plain Python; :mod:`._actors` turns it into an actor with
``ray.remote`` when a pool is built, so importing this module needs no Ray.
The replica builds its interaction from a one-entry config *on its own node*,
through that node's installed entry points (design lesson 8): what runs is what
is installed there, which is why ``check_cluster_plugins`` exists.

Every answer is an envelope ``(ok, value, incarnation)``: a plugin's exception
travels back as a value, so the pool re-raises it with its own type, and the
``incarnation`` (new each time the actor process starts) lets the pool notice a
restart that lost the sessions held by the previous process.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import uuid
from typing import Any

__all__ = ["Replica", "portable_exception"]

Envelope = tuple[bool, Any, str]


def portable_exception(exc: BaseException) -> BaseException:
    """``exc`` when it survives pickling, else a ``RuntimeError`` carrying its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")
    return exc


class Replica:
    """Serves one interaction's lifecycle calls; one instance per actor process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from ..loader import load_config

        self.incarnation = uuid.uuid4().hex
        self.name = str(spec["name"])
        self.interaction = load_config({"interaction": [spec]}).instantiate()[self.name]
        self.calls = 0  # lifecycle calls served
        self.round_trips = 0  # Ray calls received (a batch is one)

    async def ping(self) -> tuple[str, dict[str, Any]]:
        """The incarnation and where this replica runs."""
        return self.incarnation, self.info()

    def info(self) -> dict[str, Any]:
        node_id = None
        try:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        except Exception:
            pass
        return {
            "pid": os.getpid(),
            "node_id": node_id,
            "calls": self.calls,
            "round_trips": self.round_trips,
            "open_sessions": getattr(self.interaction, "open_sessions", None),
        }

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Envelope:
        """Run one lifecycle method of the interaction; never raises for the plugin's errors."""
        self.round_trips += 1
        return await self._run(method, args, kwargs)

    async def _run(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Envelope:
        self.calls += 1
        try:
            value = await getattr(self.interaction, method)(*args, **kwargs)
        except Exception as exc:
            return False, portable_exception(exc), self.incarnation
        return True, value, self.incarnation

    async def call_batch(
        self, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
    ) -> list[Envelope]:
        """Several calls in one Ray round trip, run concurrently, answers in order."""
        self.round_trips += 1
        if len(calls) == 1:
            return [await self._run(*calls[0])]
        return list(await asyncio.gather(*(self._run(*c) for c in calls)))
