"""The server's event-loop watchdog: the guarantees ``interactions run`` gives, for serve.

Every served episode runs on the server's one event loop, so a plugin method
that makes a synchronous call (``time.sleep``, a blocking client) holds up every
other client and ``/health``. The server runs the same
:class:`~interactions_core.runtime.watchdog.LoopWatchdog` as ``interactions run``:

* a block longer than ``REPORT_AFTER`` seconds is logged, naming the plugin's
  method (``module.Class.method``), at most once per block;
* with ``--timeout S``, a block longer than ``S`` seconds is broken: the call
  raises inside the plugin, its episode ends with a readable error (the client
  gets it as the step's error) and its session is finalized; other clients
  wait at most about ``S`` seconds;
* once a stop signal arrived, a block is broken after ``REPORT_AFTER`` seconds,
  so a second signal stops the server at once even while a plugin blocks.

Without ``--timeout`` a blocking call is reported but left to finish. Code that
never returns to Python (a C extension holding the GIL) cannot be broken.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..runtime.watchdog import BLOCKING_ADVICE, LoopWatchdog

__all__ = ["REPORT_AFTER", "ServeWatchdog"]

log = logging.getLogger("interactions_core.serve")

#: Seconds the loop may be held before the block is logged (and, when stopping, broken).
REPORT_AFTER = 1.0


class ServeWatchdog:
    """Starts and stops a :class:`LoopWatchdog` with the server and logs what it finds."""

    def __init__(self, timeout: float | None, stopping: Callable[[], bool]) -> None:
        self.timeout = timeout
        self.stopping = stopping
        self.watchdog: LoopWatchdog | None = None
        self._logged: dict[str, int] = {}
        self._task: asyncio.Task[Any] | None = None

    async def start(self) -> None:
        """Lifespan start-up (on the loop, in the main thread, so it can break a block)."""
        loop = asyncio.get_running_loop()
        self.watchdog = LoopWatchdog(
            loop, limit=self.timeout, report_after=REPORT_AFTER, should_break=self.stopping
        ).start()
        self._task = loop.create_task(self._report_forever())

    async def stop(self) -> None:
        """Lifespan shutdown: report the last blocks and stop watching."""
        if self._task is not None:
            self._task.cancel()
        if self.watchdog is not None:
            self.report()
            self.watchdog.stop()

    def report(self) -> None:
        """Log each block not logged yet (the loop is free again when this runs)."""
        watchdog = self.watchdog
        if watchdog is None:
            return
        for name, (count, longest) in list(watchdog.blocks.items()):
            if self._logged.get(name, 0) >= count:
                continue
            self._logged[name] = count
            log.warning(
                "%s blocked the event loop for %.1f s (%d time(s) so far): %s",
                name,
                longest,
                count,
                BLOCKING_ADVICE,
            )

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(REPORT_AFTER / 2)
            self.report()
