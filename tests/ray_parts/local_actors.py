"""Helpers of the tests of the Ray integration's parts that need no cluster.

Routing, health, batching, chunk planning, the driver's ordering and the CLI
branch are plain Python: these tests drive them with actor handles whose
methods answer from this process, so they run in the plain suite, without Ray.
The same parts on a real cluster are tested in tests/ray_cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class LocalMethod:
    """An actor method whose ``remote(...)`` answers from ``answer`` (an awaitable)."""

    def __init__(self, answer: Callable[..., Any]) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> Any:
        self.calls.append(args)
        return asyncio.ensure_future(self.answer(*args))


class LocalHandle:
    """An actor handle with ``ping``, ``call`` and ``call_batch`` answered in this process."""

    def __init__(self, incarnation: str = "inc-1", pid: int = 4242) -> None:
        self.incarnation = incarnation
        self.pid = pid
        self.down = False
        self.ping = LocalMethod(self._ping)
        self.call = LocalMethod(self._call)
        self.call_batch = LocalMethod(self._call_batch)

    async def _ping(self) -> tuple[str, dict[str, Any]]:
        if self.down:
            raise ConnectionError("actor unreachable")
        return self.incarnation, {"pid": self.pid, "node_id": "abcdef0123456789"}

    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return True, (method, args), self.incarnation

    async def _call_batch(self, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> Any:
        return [await self._call(*c) for c in calls]
