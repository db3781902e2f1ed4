"""The driver loop of a sharded run: chunks in flight, records released in dataset order.

At most ``window`` chunks (two per worker CPU) are in flight, so the dataset is
never read further ahead than that. Chunks finish in any order; their records
are released in the order of the dataset. A chunk whose task failed as a
whole (its worker died) becomes error records, one per episode, so no sample
is lost silently; a worker that could not set the run up stops the run, since
every other chunk would fail the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._messages import one_line
from ._shard_plan import Chunk
from ._stop_signals import StopOnSignal

__all__ = ["ShardDriver", "lost_chunk"]


class ShardDriver:
    """Plays chunks as Ray tasks and hands their records to ``emit`` in dataset order."""

    def __init__(
        self,
        ray: Any,
        task: Any,
        settings_ref: Any,
        window: int,
        emit: Callable[[list[Any]], None],
    ) -> None:
        self.ray = ray
        self.task = task
        self.settings_ref = settings_ref
        self.window = window
        self.emit = emit
        self.in_flight: dict[Any, tuple[int, Chunk]] = {}
        self.finished: dict[int, list[Any]] = {}
        self._next_seq = itertools.count()
        self._release = 0
        self._exhausted = False

    def run(self, chunks: Iterator[Chunk], stop: StopOnSignal) -> bool:
        """Play every chunk, or until ``stop`` is requested; True when it was."""
        while not stop.requested:
            self._fill(chunks)
            if not self.in_flight:
                break
            self._collect()
            self._release_in_order()
        if stop.requested:
            self._stop()
            return True
        return False

    def _fill(self, chunks: Iterator[Chunk]) -> None:
        while not self._exhausted and len(self.in_flight) < self.window:
            chunk = next(chunks, None)
            if chunk is None:
                self._exhausted = True
                break
            self.in_flight[self.task.remote(self.settings_ref, chunk)] = (
                next(self._next_seq),
                chunk,
            )

    def _collect(self) -> None:
        # a short timeout lets a Ctrl-C be seen while chunks are running
        ready, _ = self.ray.wait(list(self.in_flight), num_returns=1, timeout=0.2)
        for ref in ready:
            seq, chunk = self.in_flight.pop(ref)
            try:
                self.finished[seq] = self.ray.get(ref)
            except Exception as exc:
                _stop_on_setup_failure(self.ray, self.in_flight, exc)
                self.finished[seq] = lost_chunk(chunk, exc)

    def _release_in_order(self) -> None:
        while self._release in self.finished:
            self.emit(self.finished.pop(self._release))
            self._release += 1

    def _stop(self) -> None:
        """Like a local run's Ctrl-C: no new episodes; the running ones stop (their
        worker processes end, and their sessions with them); finished ones count."""
        for ref in self.in_flight:
            self.ray.cancel(ref, force=True)
        for seq in sorted(self.finished):
            self.emit(self.finished.pop(seq))


def _stop_on_setup_failure(ray: Any, in_flight: Mapping[Any, Any], exc: Exception) -> None:
    """Raise the worker's :class:`WorkerSetupError`, after cancelling the other chunks."""
    from .errors import WorkerSetupError

    cause = getattr(exc, "cause", None)
    if isinstance(cause, WorkerSetupError):
        for ref in in_flight:
            ray.cancel(ref, force=True)
        raise WorkerSetupError(str(cause)) from None


def lost_chunk(chunk: Chunk, exc: BaseException) -> list[Any]:
    """Error records for a chunk whose task failed as a whole (its worker died)."""
    from ..runtime.record import EpisodeRecord
    from ..runtime.samples import sample_id_of

    cause = getattr(exc, "cause", None) or exc
    error = RuntimeError(
        f"the Ray task playing samples {chunk[0][0]}-{chunk[-1][0]} failed: "
        f"{type(cause).__name__}: {one_line(cause)}"
    )
    records = []
    for index, repeat, sample in chunk:
        record = EpisodeRecord(index, sample_id_of(sample, index), repeat)
        record.add_error("ray", error)
        records.append(record)
    return records
