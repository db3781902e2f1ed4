"""Running many episodes: concurrency, cancellation and the run's summary.

:class:`Runner` plays the samples of an iterable with at most ``concurrency``
worker tasks, so memory holds at most that many live episodes (a worker is
added only while every worker's episode is waiting): the samples are pulled one
at a time, each finished record goes to ``on_record``
(e.g. a line of the output file) and is dropped unless ``keep_records`` is set,
and :class:`RunSummary` only keeps counters (under ``repeat > 1``, also each
prompt's final scores, for pass@k; with a policy that reports usage, one
latency per request, for the percentiles).

:meth:`Runner.cancel` (the CLI binds it to Ctrl-C) stops taking new samples and
cancels the running episodes; each one finalizes its session on the way out,
and :meth:`Runner.run` returns the summary marked ``interrupted``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

from .episode import EpisodeLoop
from .observers import Observers
from .record import EpisodeRecord
from .session import SessionTracker
from .stats import PASS_SCORE, PromptGroups
from .summary import RunSummary
from .workers import Workers

__all__ = ["RunSummary", "Runner", "run_episodes"]


class Runner:
    """Plays samples concurrently through one :class:`EpisodeLoop`.

    ``concurrency`` is the number of episodes in flight (capped by the policy's
    ``max_concurrency``). ``repeat`` plays every sample that many times, as
    independent episodes numbered by the record's ``repeat`` (0-based), one
    sample's repeats one after the other; ``pass_score`` is the final score at
    which an episode counts as passed for pass@k. Observer hooks come from
    ``registry``'s hook plugins (looked up once; ``observe=False`` skips them)
    unless ``observers`` is given.
    Other keyword arguments go to :class:`EpisodeLoop`.
    """

    def __init__(
        self,
        policy: Any,
        interactions: Mapping[str, Any] | None = None,
        *,
        concurrency: int = 16,
        repeat: int = 1,
        pass_score: float = PASS_SCORE,
        default: str | None = None,
        max_assistant_turns: int | None = None,
        max_user_turns: int | None = None,
        timeout: float | None = None,
        registry: Any = None,
        observe: bool = True,
        observers: Observers | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be a positive integer, not {concurrency!r}")
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be a positive integer, not {repeat!r}")
        self.repeat = repeat
        self.pass_score = pass_score
        cap = getattr(policy, "max_concurrency", None)
        self.concurrency = min(concurrency, cap) if cap else concurrency
        if observers is None and observe:
            if registry is None:
                from ..registry import get_registry

                registry = get_registry()
            observers = Observers.from_registry(registry)
        self.tracker = SessionTracker()
        self.loop = EpisodeLoop(
            policy,
            interactions,
            default=default,
            max_assistant_turns=max_assistant_turns,
            max_user_turns=max_user_turns,
            timeout=timeout,
            observers=observers,
            tracker=self.tracker,
        )
        self._workers: Workers | None = None
        self._stopping = False
        self.summary: RunSummary | None = None
        self.loop.stopping = self._is_stopping

    def _is_stopping(self) -> bool:
        return self._stopping

    @property
    def stopping(self) -> bool:
        """True once :meth:`cancel` was called, until the next run starts."""
        return self._stopping

    @property
    def open_sessions(self) -> int:
        """Sessions started and not finalized (0 whenever no run is in progress)."""
        return self.tracker.open

    def stop_taking_samples(self) -> None:
        """Start no new episode; safe to call from a signal handler (see :meth:`cancel`)."""
        self._stopping = True

    def cancel(self) -> None:
        """Stop the run: no new episodes; running ones are cancelled and finalized."""
        self._stopping = True
        if self._workers is not None:
            self._workers.cancel()

    async def run(
        self,
        samples: Iterable[Mapping[str, Any]],
        *,
        on_record: Callable[[EpisodeRecord], Any] | None = None,
        keep_records: bool = False,
        skip: Container[tuple[int, int]] | None = None,
    ) -> RunSummary:
        """Play every sample; return the summary.

        ``skip`` holds ``(index, repeat)`` keys of samples already played (a
        resumed run): they are read from ``samples`` but not played again.

        ``on_record`` is called with each finished record, in completion order
        (records carry ``index``, the sample's position). An exception raised by
        ``on_record`` or by the samples iterable (a bad row in strict mode) stops
        the run: running episodes are finalized, then the exception propagates.
        """
        summary = RunSummary()
        summary.groups = PromptGroups(self.repeat, self.pass_score)
        self.summary = summary  # readable while the run goes on (e.g. after a hard stop)
        records: list[EpisodeRecord] | None = [] if keep_records else None
        summary.records = records
        self._stopping = False
        workers = Workers(
            self.loop.run,
            _recorder(summary, records, on_record),
            concurrency=self.concurrency,
            stopping=self._is_stopping,
            stop=self.cancel,
            skip=skip,
        )
        self._workers = workers
        started = time.perf_counter()
        try:
            await workers.run(_numbered(samples, self.repeat))
        finally:
            summary.elapsed_s = time.perf_counter() - started
            summary.requests_in_flight_max = getattr(self.loop.policy, "max_in_flight", None)
            self._workers = None
        summary.interrupted = self._stopping
        return summary


def _recorder(
    summary: RunSummary,
    records: list[EpisodeRecord] | None,
    on_record: Callable[[EpisodeRecord], Any] | None,
) -> Callable[[EpisodeRecord], None]:
    """What happens to each finished record: counted, kept if asked, handed to ``on_record``."""
    count = summary.add
    if records is None and on_record is None:
        return count

    def done(record: EpisodeRecord) -> None:
        count(record)
        if records is not None:
            records.append(record)
        if on_record is not None:
            on_record(record)

    return done


def _numbered(
    samples: Iterable[Mapping[str, Any]], repeat: int
) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """``(index, repeat, sample)`` for every episode to play: a sample's repeats in a row."""
    if repeat == 1:
        return zip(itertools.count(), itertools.repeat(0), samples)  # no Python frame per item
    return ((index, r, sample) for index, sample in enumerate(samples) for r in range(repeat))


async def run_episodes(
    samples: Iterable[Mapping[str, Any]],
    policy: Any,
    interactions: Mapping[str, Any] | None = None,
    *,
    on_record: Callable[[EpisodeRecord], Any] | None = None,
    keep_records: bool = False,
    **options: Any,
) -> RunSummary:
    """Play ``samples`` with ``policy`` against ``interactions``; return the summary.

    The one-call form of :class:`Runner`: ``options`` are its keyword arguments
    (``concurrency``, ``repeat``, ``pass_score``, ``default``,
    ``max_assistant_turns``, ``max_user_turns``, ``timeout``, ``registry``,
    ``observe``). With ``keep_records=True`` the
    records are in ``summary.records``. The policy's ``aclose()`` is awaited at
    the end.
    """
    runner = Runner(policy, interactions, **options)
    try:
        return await runner.run(samples, on_record=on_record, keep_records=keep_records)
    finally:
        aclose = getattr(policy, "aclose", None)
        if aclose is not None:
            await aclose()
