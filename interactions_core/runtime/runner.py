"""Running many episodes: concurrency, cancellation and the run's summary.

:class:`Runner` plays the samples of an iterable with at most ``concurrency``
worker tasks (:class:`Workers`), so memory holds at most that many live
episodes: the samples are pulled one at a time, each finished record goes to
``on_record`` (e.g. a line of the output file) and is dropped unless
``keep_records`` is set, and :class:`RunSummary` only keeps counters (under
``repeat > 1``, also each prompt's final scores, for pass@k; with a policy that
reports usage, one latency per request, for the percentiles). The options of a
run are one :class:`~.options.RunOptions`.

A sharded run (``interactions_core.ray``) is this same runner on each worker:
:meth:`Runner.play` plays a chunk of numbered episodes, and the driver counts
the records it gets back with :func:`new_summary` and :func:`recorder`, exactly
as :meth:`Runner.run` counts its own.

:meth:`Runner.cancel` (the CLI binds it to Ctrl-C) stops taking new samples and
cancels the running episodes; each one finalizes its session on the way out,
and :meth:`Runner.run` returns the summary marked ``interrupted``.

Why the worker tasks are few: a run of 100,000 samples at ``concurrency=2000``
must not create 100,000 tasks, nor 2,000 of them when its episodes never wait
(a replayed conversation against an interaction that computes): a task per
episode would cost more than the episode. So :class:`Workers` starts with one
worker and keeps one *spare* scheduled: the spare only runs when every running
episode is waiting, and then it takes a sample and schedules as many new spares
as there are workers already (up to ``concurrency``). The pool thus doubles
while episodes wait and reaches ``concurrency`` after a handful of event-loop
rounds, and stays at two tasks when they never wait. A failure of the sample
iterator or of ``on_record`` is *fatal*: it stops the run (the running episodes
are cancelled and finalize their sessions) and is re-raised.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import class_name, noted_on
from .episode import PARTIAL_RECORD, EpisodeLoop, RunOptions
from .observers import Observers
from .record import EpisodeRecord
from .session import SessionTracker
from .stats import PromptGroups
from .summary import RunSummary
from .watchdog import tracked, watching

__all__ = [
    "Item",
    "RunSummary",
    "Runner",
    "UnwaitedExecutor",
    "Workers",
    "new_summary",
    "recorder",
    "run_episodes",
]

#: One episode to play: ``(index, repeat, sample)``.
Item = tuple[int, int, Mapping[str, Any]]


class Runner:
    """Plays samples concurrently through one :class:`EpisodeLoop`.

    ``options`` is the run's :class:`~.options.RunOptions`; its fields may also
    be given as keyword arguments (``concurrency=8``), which override it.
    ``concurrency`` is capped by the policy's ``max_concurrency``. ``repeat``
    plays every sample that many times, as independent episodes numbered by the
    record's ``repeat`` (0-based), one sample's repeats one after the other;
    ``pass_score`` is the final score at which an episode counts as passed for
    pass@k. Observer hooks come from ``registry``'s hook plugins (looked up
    once; ``observe=False`` skips them) unless ``observers`` is given.
    """

    def __init__(
        self,
        policy: Any,
        interactions: Mapping[str, Any] | None = None,
        options: RunOptions | None = None,
        *,
        registry: Any = None,
        observe: bool = True,
        observers: Observers | None = None,
        **settings: Any,
    ) -> None:
        options = options or RunOptions()
        if settings:
            options = options.replace(**settings)
        self.options = options
        cap = getattr(policy, "max_concurrency", None)
        self.concurrency = min(options.concurrency, cap) if cap else options.concurrency
        if observers is None and observe:
            if registry is None:
                from ..registry import get_registry

                registry = get_registry()
            observers = Observers.from_registry(registry)
        self.tracker = SessionTracker()
        self.loop = EpisodeLoop(
            policy, interactions, options=options, observers=observers, tracker=self.tracker
        )
        self._workers: Workers | None = None
        self._stopping = False
        self.summary: RunSummary | None = None
        self.loop.stopping = self._is_stopping

    @property
    def repeat(self) -> int:
        """Episodes per sample (``options.repeat``)."""
        return self.options.repeat

    @property
    def pass_score(self) -> float:
        """The final score at which an episode passes (``options.pass_score``)."""
        return self.options.pass_score

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
        episodes = _numbered(samples, self.options.repeat)
        return await self.play(episodes, on_record=on_record, keep_records=keep_records, skip=skip)

    async def play(
        self,
        episodes: Iterable[Item],
        *,
        on_record: Callable[[EpisodeRecord], Any] | None = None,
        keep_records: bool = False,
        skip: Container[tuple[int, int]] | None = None,
    ) -> RunSummary:
        """Play numbered ``(index, repeat, sample)`` episodes; see :meth:`run`.

        The episodes are played as given (no repeats are added): a worker of a
        sharded run plays its chunk this way.
        """
        summary = self.summary = new_summary(self.options, keep_records)
        self._stopping = False
        workers = self._workers = Workers(
            self.loop.run,
            recorder(summary, on_record),
            concurrency=self.concurrency,
            stopping=self._is_stopping,
            stop=self.cancel,
            skip=skip,
        )
        started = time.perf_counter()
        try:
            await workers.run(iter(episodes))
        finally:
            summary.elapsed_s = time.perf_counter() - started
            summary.requests_in_flight_max = getattr(self.loop.policy, "max_in_flight", None)
            self._workers = None
        summary.interrupted = self._stopping
        return summary


def new_summary(options: RunOptions, keep_records: bool = False) -> RunSummary:
    """An empty summary counting pass@k as ``options`` say (keeping records if asked).

    It is set as the runner's :attr:`Runner.summary` before the first episode, so
    it can be read while the run goes on (e.g. after a hard stop).
    """
    summary = RunSummary()
    summary.groups = PromptGroups(options.repeat, options.pass_score)
    summary.records = [] if keep_records else None
    return summary


def recorder(
    summary: RunSummary, on_record: Callable[[EpisodeRecord], Any] | None = None
) -> Callable[[EpisodeRecord], None]:
    """What happens to each finished record: made plain data (``keep_plain``), counted,
    kept if asked, handed to ``on_record``."""
    count = summary.add
    records = summary.records

    def done(record: EpisodeRecord) -> None:
        record.keep_plain()
        count(record)
        if records is not None:
            records.append(record)
        if on_record is not None:
            on_record(record)

    return done


def _tracked(done: Callable[[EpisodeRecord], None], record: Any) -> None:
    """``done(record)``, timed by ``watch`` as a call of its own: plugin code it runs one
    piece at a time (a value of the record's made text) is one block, named, broken and
    charged to it, not to the calls awaiting beside it."""
    with tracked(inspect.currentframe()):
        done(record)


def _numbered(samples: Iterable[Mapping[str, Any]], repeat: int) -> Iterator[Item]:
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
    (``options=RunOptions(...)``, or its fields: ``concurrency``, ``repeat``,
    ``pass_score``, ``default``, ``max_assistant_turns``, ``max_user_turns``,
    ``timeout``; and ``registry``, ``observe``). With ``keep_records=True`` the
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


class Workers:
    """Plays ``items`` with at most ``concurrency`` tasks, added only while episodes wait.

    A worker pulls items one at a time from a shared iterator, plays each, and
    hands the finished record to ``done``; see the module docstring.
    """

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
        #: The task running :meth:`run`: cancelled, the whole run was.
        self._parent: Any = None

    async def run(self, items: Iterator[Item]) -> None:
        """Play every item; return when every worker has ended."""
        self._parent = asyncio.current_task()
        self._add_workers(items, 1)
        tasks = self.tasks
        try:
            waited = 0
            while waited < len(tasks):  # workers started meanwhile are waited for next
                batch = tasks[waited:]
                waited = len(tasks)
                # Shielded: a cancellation of the run itself reaches the episodes
                # through ``stop``, after the stopping flag is set.
                ended = await asyncio.shield(asyncio.gather(*batch, return_exceptions=True))
                self._no_silent_deaths(ended)
        except asyncio.CancelledError:
            self._stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if self.fatal:
            raise self.fatal[0]

    def _no_silent_deaths(self, ended: list[Any]) -> None:
        """A worker that ended by an exception (a fault of the runtime's own, since an
        episode's errors are its record's) stops the run, told: its samples would
        otherwise vanish, and a run whose only worker died would end with exit 0."""
        if self.fatal or self._stopping():
            return
        for outcome in ended:
            kind = type(outcome)
            if issubclass(kind, BaseException) and not issubclass(kind, asyncio.CancelledError):
                self._fail(outcome)
                return

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
        play, done, stopping = self._play, self._done, self._stopping
        if watching(asyncio.get_running_loop()) is not None:
            done = functools.partial(_tracked, done)  # a record's objects made plain data
        while not stopping():
            try:
                index, repeat, sample = next(items)
            except StopIteration:
                return
            except Exception as exc:
                self._fail(exc)
                return
            if skip is not None and (index, repeat) in skip:
                continue
            if self._spares == 0:
                self._grow(items)
            # Awaited here, not in a coroutine of its own: every wait of the episode
            # passes through each coroutine around it, on the way out and back in.
            try:
                record = await play(sample, index, repeat)
            except BaseException as exc:
                if stopping() or issubclass(type(exc), KeyboardInterrupt):
                    raise
                if _cancelled_from_outside(exc) and not _only_this_task(self._parent):
                    # Not this episode's fault: the run's own tasks were cancelled
                    # (code inside the run stopped its loop or cancelled its tasks).
                    # Like a stop, the episode is not recorded: --resume plays it.
                    self._stop()
                    raise
                # Anything else is this episode's error and the run goes on, such as its
                # task cancelled alone by code inside the run (a plugin's own deadline).
                try:
                    record = self._lost(exc, index, repeat)
                except Exception as untold:  # telling it raised: the sample still counts
                    record = EpisodeRecord(index, index, repeat)
                    record.add_error(
                        "episode", RuntimeError(_UNTOLD.format(class_name(type(untold))))
                    )
            try:
                done(record)
            except BaseException as exc:  # a sink's fault, of any class, stops the run, told
                if stopping() or issubclass(type(exc), KeyboardInterrupt):
                    raise
                self._fail(exc)
                return

    @staticmethod
    def _lost(exc: BaseException, index: int, repeat: int) -> EpisodeRecord:
        """The record of an episode whose play raised (the loop records its own faults).

        A cancelled episode's own record, as far as it got, when it carries one (its
        sample id, interaction, turns and start); else a stand-in, a last resort so
        that no sample can vanish from the summary.
        """
        task: Any = asyncio.current_task()
        uncancel = getattr(task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            while task.cancelling():
                uncancel()
        # Read without running any of the exception's code: it may be a plugin's.
        record = noted_on(exc, PARTIAL_RECORD)
        if issubclass(type(exc), asyncio.CancelledError):  # this episode's task alone
            exc = RuntimeError(_SELF_CANCELLED)
        if type(record) is EpisodeRecord and record.errors:
            record.errors.pop()  # "the episode was cancelled": said better here
        else:
            record = EpisodeRecord(index, index, repeat)
        record.add_error("episode", exc)
        return record


#: An episode error that could not even be recorded (its exception fought being told).
_UNTOLD = "the episode failed with an error that could not be recorded ({} while telling it)"

#: Python does not say who cancelled a task: maybe this episode's plugin, maybe another's.
_SELF_CANCELLED = (
    "the episode's task was cancelled by code inside the run, not by a stop of the run (a "
    "plugin cancelling its own task, say for a deadline of its own, or another episode's "
    "task? raise an exception instead)"
)


def _only_this_task(parent: Any) -> bool:
    """Whether a cancellation reached this worker alone, the run (``parent``) going on:
    Python 3.10 cannot tell, so there it never did."""
    cancelling = getattr(parent, "cancelling", None)  # Python 3.11+
    return cancelling is not None and cancelling() == 0 and not parent.done()


def _cancelled_from_outside(exc: BaseException) -> bool:
    """Whether ``exc`` is a cancellation of the current task itself (not one a call raised).

    The episode loop turns what a plugin or policy raises into the episode's error;
    a ``CancelledError`` that still leaves it comes from a ``cancel()`` of the
    worker's task. Python 3.10 cannot tell the two apart: there every one counts.
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task: Any = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return cancelling is None or cancelling() > 0


class UnwaitedExecutor(ThreadPoolExecutor):
    """A loop's default executor, whose jobs the end of a run or a server does not wait for.

    ``asyncio.run`` waits, without a bound before Python 3.12, for every job in the
    loop's default executor: one a plugin submitted and never awaited (a blocking
    client in ``asyncio.to_thread`` with no timeout) would hold a finished run, or a
    server that answered its SIGTERM, with Ctrl-C ignored. The jobs awaited are done
    by then; the command's exit gives those left a moment and names them
    (``interactions_core.cli``'s ``leave_strays``).
    """

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)
