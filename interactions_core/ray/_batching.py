"""Batching: one replica's calls made in the same event-loop iteration travel in one Ray call.

Each Ray call costs a round trip whatever it carries; when many episodes run
concurrently, most of a pool's time would go to those round trips. A pool built
with ``batch=True`` gives every replica a :class:`CallBatcher`, which collects
the calls issued before the loop next runs (at most ``max_batch``) and sends them
through :meth:`~interactions_core.ray.replica.Replica.call_batch`.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["Call", "CallBatcher"]

#: ``(method, args, kwargs)`` of one lifecycle call.
Call = tuple[str, tuple[Any, ...], dict[str, Any]]


class CallBatcher:
    """Collects one replica's calls made in the same loop iteration into one Ray call."""

    def __init__(self, handle: Any, max_batch: int, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = handle
        self.max_batch = max_batch
        self.loop = loop
        self.pending: list[tuple[Call, asyncio.Future[Any]]] = []
        self.scheduled = False

    def submit(self, call: Call) -> asyncio.Future[Any]:
        """Queue ``call``; its answer arrives on the returned future."""
        future = self.loop.create_future()
        self.pending.append((call, future))
        if len(self.pending) >= self.max_batch:
            self.flush()
        elif not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)
        return future

    def flush(self) -> None:
        """Send everything queued, ``max_batch`` calls per Ray call."""
        self.scheduled = False
        while self.pending:
            batch = self.pending[: self.max_batch]
            del self.pending[: self.max_batch]
            ref = self.handle.call_batch.remote([c for c, _ in batch])
            self.loop.create_task(self._deliver(ref, [f for _, f in batch]))

    @staticmethod
    async def _deliver(ref: Any, futures: list[asyncio.Future[Any]]) -> None:
        try:
            answers = await ref
        except BaseException as exc:
            for f in futures:
                if not f.done():
                    f.set_exception(exc)
            return
        for f, answer in zip(futures, answers, strict=True):
            if not f.done():
                f.set_result(answer)
