"""The ``blocking`` check's instrument: how long a call kept the event loop from running.

A plugin that calls a synchronous HTTP client or ``time.sleep`` inside
``async def`` stops every other episode of a run, yet passes every functional
check. A ticker scheduled on the loop shows it: while the call holds the loop,
the ticker cannot run, so the longest gap between two ticks is the longest
stretch the call held the loop without awaiting.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["BLOCKING_LIMIT", "LoopWatch"]

#: A lifecycle call that holds the event loop this long without awaiting is reported.
BLOCKING_LIMIT = 0.25

#: How often the ticker asks to run, in seconds.
_TICK = 0.01


class LoopWatch:
    """Measures the longest stretch the running loop could not run anything.

    Start it right before a call and read :meth:`stop` right after; the ticker
    reschedules itself every :data:`_TICK` seconds in between.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._last = time.perf_counter()
        self._longest = 0.0
        self._handle: Any = self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self._longest = max(self._longest, now - self._last)
        self._last = now
        self._handle = self._loop.call_later(_TICK, self._tick)

    def stop(self) -> float:
        """Stop ticking; return the longest time, in seconds, the loop was held."""
        self._handle.cancel()
        return max(self._longest, time.perf_counter() - self._last)
