"""Stopping a sharded run on Ctrl-C or SIGTERM the way a local run stops.

The driver of a sharded run blocks in Ray calls, not in an event loop, so it
cannot use the loop's signal handlers the local run uses; it installs plain
ones for the run's duration instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StopOnSignal"]


class StopOnSignal:
    """The first Ctrl-C or SIGTERM asks the run to stop; a second one interrupts at once.

    SIGTERM is what Slurm, Kubernetes and ``docker stop`` send: handled like
    Ctrl-C, the records already played reach the file and the run can be
    resumed, as with a local run. ``stopped[0]`` receives 128 + the first
    signal's number (the CLI's exit code). Handlers are installed only in the
    main thread (elsewhere Python forbids it); :meth:`restore` puts back the
    previous ones.
    """

    def __init__(self, stopped: list[int] | None = None) -> None:
        import signal
        import threading

        self.requested = False
        self.stopped = stopped
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self.previous[sig] = signal.signal(sig, self._handle)
                except (ValueError, OSError):
                    pass

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.stopped is not None and not self.stopped[0]:
            self.stopped[0] = 128 + signum

    def restore(self) -> None:
        import signal

        for sig, previous in self.previous.items():
            signal.signal(sig, previous)
        self.previous = {}
