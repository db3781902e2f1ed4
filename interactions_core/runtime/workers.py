"""The worker tasks of a run: episodes in flight, added only while episodes wait.

A run of 100,000 samples at ``concurrency=2000`` must not create 100,000 tasks,
nor 2,000 of them when its episodes never wait (a replayed conversation against
an interaction that computes): a task per episode would cost more than the
episode. So :class:`Workers` starts with one worker and keeps one *spare*
scheduled: the spare only runs when every running episode is waiting, and then
it takes a sample and schedules as many new spares as there are workers
already (up to ``concurrency``). The pool thus doubles while episodes wait and
reaches ``concurrency`` after a handful of event-loop rounds, and stays at two
tasks when they never wait.

A worker pulls samples one at a time from a shared iterator, plays each, and
hands the finished record to ``done``. A failure of the sample iterator or of
``done`` is *fatal*: it stops the run (the running episodes are cancelled and
finalize their sessions) and is re-raised by :meth:`Workers.run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Container, Iterator, Mapping
from typing import Any

from .record import EpisodeRecord

__all__ = ["Workers"]

#: One episode to play: ``(index, repeat, sample)``.
Item = tuple[int, int, Mapping[str, Any]]


class Workers:
    """Plays ``items`` with at most ``concurrency`` tasks; see the module docstring."""

    def __init__(
        self,
        play: Callable[[Mapping[str, Any], int, int], Awaitable[EpisodeRecord]],
        done: Callable[[EpisodeRecord], None],
        *,
        concurrency: int,
        stopping: Callable[[], bool],
        stop: Callable[[], None],
        skip: Container[tuple[int, int]] | None = None,
    ) -> None:
        self._play = play
        self._done = done
        self._cap = concurrency
        self._stopping = stopping
        self._stop = stop
        self._skip = skip
        self._spares = 0  # workers scheduled that have not started yet
        self.tasks: list[asyncio.Task[None]] = []
        #: The first fatal error (the iterator's or ``done``'s), re-raised by :meth:`run`.
        self.fatal: list[BaseException] = []

    async def run(self, items: Iterator[Item]) -> None:
        """Play every item; return when every worker has ended."""
        self._add_workers(items, 1)
        tasks = self.tasks
        try:
            waited = 0
            while waited < len(tasks):  # workers started meanwhile are waited for next
                batch = tasks[waited:]
                waited = len(tasks)
                # Shielded: a cancellation of the run itself reaches the episodes
                # through ``stop``, after the stopping flag is set.
                await asyncio.shield(asyncio.gather(*batch, return_exceptions=True))
        except asyncio.CancelledError:
            self._stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if self.fatal:
            raise self.fatal[0]

    def cancel(self) -> None:
        """Cancel every worker's episode (they finalize their sessions on the way out)."""
        for task in self.tasks:
            task.cancel()

    def _add_workers(self, items: Iterator[Item], n: int) -> None:
        loop = asyncio.get_running_loop()
        self._spares += n
        self.tasks.extend(loop.create_task(self._worker(items)) for _ in range(n))

    def _grow(self, items: Iterator[Item]) -> None:
        """Schedule new spares, as many as there are workers, when none is left."""
        if self._spares == 0:
            room = self._cap - len(self.tasks)
            if room > 0:
                self._add_workers(items, min(room, len(self.tasks)))

    def _fail(self, exc: BaseException) -> None:
        self.fatal.append(exc)
        self._stop()

    async def _worker(self, items: Iterator[Item]) -> None:
        self._spares -= 1
        skip = self._skip
        while not self._stopping():
            try:
                index, repeat, sample = next(items)
            except StopIteration:
                return
            except Exception as exc:
                self._fail(exc)
                return
            if skip is not None and (index, repeat) in skip:
                continue
            self._grow(items)
            record = await self._play_one(sample, index, repeat)
            try:
                self._done(record)
            except Exception as exc:
                self._fail(exc)
                return

    async def _play_one(self, sample: Mapping[str, Any], index: int, repeat: int) -> EpisodeRecord:
        try:
            return await self._play(sample, index, repeat)
        except BaseException as exc:
            if self._stopping() or isinstance(exc, KeyboardInterrupt):
                raise
            # The episode loop records every fault itself; this is a last resort
            # so that no sample can vanish from the summary.
            task: Any = asyncio.current_task()
            uncancel = getattr(task, "uncancel", None)  # Python 3.11+
            if uncancel is not None:
                while task.cancelling():
                    uncancel()
            record = EpisodeRecord(index, index, repeat)
            record.add_error("episode", exc)
            return record
