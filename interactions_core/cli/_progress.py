"""The progress bar of ``interactions run``: one line on standard error, only on a terminal.

Shown when standard error is a terminal, the policy does not talk to the user
(``human`` reads the same terminal) and ``--no-progress`` is not given. Local
and sharded runs update it the same way, through ``_run_outputs.RecordHandler``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

__all__ = ["Progress", "duration", "progress_bar"]


def duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``2h07m``: an estimate, so no finer than it needs to be."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


class Progress:
    """A one-line progress bar on a terminal stream, redrawn at most 10 times a second."""

    def __init__(self, stream: TextIO, total: int | None) -> None:
        import time

        self.stream = stream
        self.total = total
        self.clock = time.monotonic
        self.started = self.clock()
        self.next_draw = 0.0

    def update(self, done: int, errors: int, force: bool = False) -> None:
        now = self.clock()
        if not force and now < self.next_draw:
            return
        self.next_draw = now + 0.1
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        if self.total:
            frac = min(done / self.total, 1.0)
            filled = int(frac * 24)
            bar = f"[{'#' * filled}{'.' * (24 - filled)}] {done}/{self.total}"
        else:
            bar = f"{done} episodes"
        eta = ""
        if self.total and done and self.total > done:
            eta = f"  ETA {duration((self.total - done) / rate)}"
        self.stream.write(f"\r{bar}  {rate:,.0f}/s  errors {errors}{eta}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def progress_bar(args: argparse.Namespace, reader: Any, policy: Any) -> Progress | None:
    """The bar for this run, or ``None`` when it is not to be shown.

    Its total counts episodes (samples times ``--repeat``); counting the samples
    reads the data once more, which is why it is done only for a terminal.
    """
    if args.no_progress or getattr(policy, "interactive", False) or not sys.stderr.isatty():
        return None
    total = reader.count()
    samples_total = min(total, args.limit) if args.limit else total
    return Progress(sys.stderr, samples_total * args.repeat)
