"""A sharded run: the local :class:`~interactions_core.runtime.Runner` on Ray workers.

The driver reads the dataset (so bad rows, ``--limit`` and ``--strict`` behave
exactly as in a local run), expands ``--repeat K`` into episodes (a sample's
repeats in a row, as a local run plays them), leaves out the ``(index,
repeat)`` episodes a resumed run already has a record of, and cuts the rest
into chunks of consecutive episodes (:func:`plan_chunks`). Each chunk is a Ray
task (:func:`play_chunk`): the worker builds the run's interactions and policy
from *its own node's* plugins, once per run, and plays the chunk with
:meth:`Runner.play <interactions_core.runtime.Runner.play>`, each episode keeping
its global ``index``. The driver (:class:`ShardDriver`) keeps at most two chunks
per worker CPU in flight (the dataset is never read further ahead), releases
the records in dataset order and counts them with the runner's own
:func:`~interactions_core.runtime.runner.new_summary` and
:func:`~interactions_core.runtime.runner.recorder`, so records, summary and exit
codes equal a local run's (timings aside).

The options are the run's one :class:`~interactions_core.runtime.episode.RunOptions`,
sent to the workers inside :class:`RunSettings`. A stop signal stops the run the
way it stops a local one (:class:`~interactions_core._stop_signals.StopSignals`).
The ``--ray`` branch of ``interactions run`` is in the CLI, which calls
:func:`run_sharded`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

from .._stop_signals import StopSignals
from ..runtime.episode import RunOptions
from .errors import WorkerSetupError, one_line

__all__ = [
    "CHUNK_SIZE",
    "RunSettings",
    "ShardDriver",
    "lost_chunk",
    "plan_chunks",
    "play_chunk",
    "run_sharded",
]

#: Samples per Ray task: large enough to hide the task's cost, small enough to spread.
CHUNK_SIZE = 32

#: ``(index, repeat, sample)`` of one episode.
Episode = tuple[int, int, Mapping[str, Any]]
Chunk = list[Episode]

#: Add to a ``perf_counter`` reading to get wall-clock (epoch) seconds, in this process.
WALL_OFFSET = time.time() - time.perf_counter()


class RunSettings:
    """Everything a worker needs to play episodes like the driver would, picklable.

    ``options`` is the run's :class:`RunOptions`; its fields may also be given
    as keyword arguments (``repeat=2``), which override it.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None,
        *,
        policy: str = "replay",
        policy_options: Mapping[str, Any] | None = None,
        options: RunOptions | None = None,
        **fields: Any,
    ) -> None:
        options = options or RunOptions()
        self.options = options.replace(**fields) if fields else options
        self.config = dict(config) if config is not None else None
        self.policy = policy
        self.policy_options = dict(policy_options or {})
        #: The driver's wall-clock offset: records' start times are rebased onto it.
        self.wall_offset = WALL_OFFSET

    @property
    def repeat(self) -> int:
        """Episodes per sample (``options.repeat``): the driver expands them, not the workers."""
        return self.options.repeat

    def key(self) -> str:
        """What a worker's state is built from: chunks of runs with the same key share it."""
        shared = [self.config, self.policy, self.policy_options, self.options.worker_key()]
        return json.dumps(shared, sort_keys=True, default=repr)


def run_sharded(
    samples: Iterable[Mapping[str, Any]] | Iterable[tuple[int, Mapping[str, Any]]],
    settings: RunSettings,
    *,
    address: str | None = None,
    on_record: Callable[[Any], Any] | None = None,
    keep_records: bool = False,
    chunk_size: int = CHUNK_SIZE,
    workers: int | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    indexed: bool = False,
    skip: Container[tuple[int, int]] | None = None,
    stopped: list[int] | None = None,
) -> Any:
    """Play ``samples`` on Ray workers; return the :class:`RunSummary` of the whole run.

    ``samples`` are mappings, numbered from 0, or with ``indexed=True``
    ``(index, sample)`` pairs. Each sample is played ``settings.options.repeat``
    times; ``skip`` holds the ``(index, repeat)`` keys not to play (a resumed
    run's finished episodes), like :meth:`Runner.run`'s. When no episode is left
    to play, no cluster is connected to (or started). ``on_record`` gets each
    record in dataset order. ``workers`` is the number of tasks that play at
    once (default: the cluster's CPUs). Ctrl-C or SIGTERM (in the main thread)
    cancels the tasks in flight, keeps the records already played and returns
    the summary marked ``interrupted`` (``stopped[0]``, when given, receives
    128 + the signal's number); a second one stops at once.
    """
    from ..runtime.runner import new_summary, recorder
    from .errors import connect

    summary = new_summary(settings.options, keep_records)
    chunks = plan_chunks(samples, settings.options.repeat, skip, chunk_size, indexed=indexed)
    first = next(chunks, None)
    if first is None:  # nothing to play (e.g. a finished run resumed): no cluster needed
        return summary
    ray = connect(address)
    if workers is None:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = ray.remote(play_chunk).options(num_cpus=1, max_retries=0)
    if runtime_env is not None:
        task = task.options(runtime_env=dict(runtime_env))
    count = recorder(summary, on_record)

    def emit(records: list[Any]) -> None:
        for record in records:
            count(record)

    driver = ShardDriver(ray, task, ray.put(settings), 2 * workers, emit)
    started = time.perf_counter()
    try:
        with StopSignals(stopped=stopped) as stop:
            if driver.run(itertools.chain([first], chunks), stop):
                summary.interrupted = True
    finally:
        summary.elapsed_s = time.perf_counter() - started
    return summary


# -- which episodes, in which chunk ---------------------------------------------------


def plan_chunks(
    samples: Iterable[Mapping[str, Any]] | Iterable[tuple[int, Mapping[str, Any]]],
    repeat: int,
    skip: Container[tuple[int, int]] | None,
    size: int,
    *,
    indexed: bool = False,
) -> Iterator[Chunk]:
    """The episodes to play, ``size`` at a time (the last chunk may be shorter).

    ``samples`` are numbered from 0, or with ``indexed=True`` are ``(index,
    sample)`` pairs already. Nothing is read ahead of the chunk asked for.
    Consecutive episodes go together, so a chunk's records come back in
    dataset order.
    """
    pairs: Iterable[Any] = iter(samples) if indexed else enumerate(samples)
    episodes = (
        (index, r, sample)
        for index, sample in pairs
        for r in range(repeat)
        if skip is None or (index, r) not in skip
    )
    while chunk := list(itertools.islice(episodes, size)):
        yield chunk


# -- the driver: chunks in flight, records released in dataset order ------------------


class ShardDriver:
    """Plays chunks as Ray tasks and hands their records to ``emit`` in dataset order.

    At most ``window`` chunks are in flight. Chunks finish in any order; their
    records are released in the order of the dataset. A chunk whose task failed
    as a whole (its worker died) becomes error records, one per episode, so no
    sample is lost silently; a worker that could not set the run up stops the
    run, since every other chunk would fail the same way.
    """

    def __init__(
        self,
        ray: Any,
        task: Any,
        settings_ref: Any,
        window: int,
        emit: Callable[[list[Any]], Any],
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

    def run(self, chunks: Iterator[Chunk], stop: StopSignals) -> bool:
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
            ref = self.task.remote(self.settings_ref, chunk)
            self.in_flight[ref] = (next(self._next_seq), chunk)

    def _collect(self) -> None:
        # a short timeout lets a Ctrl-C be seen while chunks are running
        ready, _ = self.ray.wait(list(self.in_flight), num_returns=1, timeout=0.2)
        for ref in ready:
            seq, chunk = self.in_flight.pop(ref)
            try:
                self.finished[seq] = self.ray.get(ref)
            except Exception as exc:
                self._stop_on_setup_failure(exc)
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

    def _stop_on_setup_failure(self, exc: Exception) -> None:
        """Raise the worker's :class:`WorkerSetupError`, after cancelling the other chunks."""
        cause = getattr(exc, "cause", None)
        if isinstance(cause, WorkerSetupError):
            for ref in self.in_flight:
                self.ray.cancel(ref, force=True)
            raise WorkerSetupError(str(cause)) from None


def lost_chunk(chunk: Chunk, exc: BaseException) -> list[Any]:
    """Error records for a chunk whose task failed as a whole (its worker died)."""
    from ..runtime.episode import sample_id_of
    from ..runtime.record import EpisodeRecord

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


# -- a worker: the local runner, kept between chunks ----------------------------------


class WorkerState:
    """What one worker process keeps between chunks of the same run: a runner and its loop.

    Built from *this node's* plugins, once per run (keyed by :meth:`RunSettings.key`):
    a chunk costs one Ray task, not a fresh config load.
    """

    def __init__(self, settings: RunSettings) -> None:
        from ..loader import load_config
        from ..registry import get_registry
        from ..runtime.policies import create_policy
        from ..runtime.runner import Runner

        registry = get_registry()
        interactions = None
        if settings.config is not None:
            interactions = load_config(settings.config, registry=registry).instantiate()
        policy = create_policy(
            registry.policy(settings.policy),
            settings.policy_options,
            name=settings.policy,
        )
        self.loop = asyncio.new_event_loop()
        self.runner = Runner(policy, interactions, settings.options, registry=registry)

    @classmethod
    def set_up(cls, settings: RunSettings) -> WorkerState:
        """Build this worker's state, or say which node could not and why."""
        try:
            return cls(settings)
        except Exception as exc:
            import socket

            raise WorkerSetupError(
                f"the Ray worker on node {socket.gethostname()} could not set up the run: "
                f"{type(exc).__name__}: {one_line(exc)}. If the driver runs this config, that "
                "node has different plugins: compare them with 'interactions ray check "
                "--address HOST:PORT' and ship the plugins with the job's runtime_env "
                "(docs/ray.md)"
            ) from None

    def play(self, chunk: Chunk) -> list[Any]:
        """The records of ``chunk``'s episodes, in the chunk's order."""
        summary = self.loop.run_until_complete(self.runner.play(chunk, keep_records=True))
        records = summary.records or []
        records.sort(key=lambda record: (record.index, record.repeat))
        return records


_STATES: dict[str, WorkerState] = {}


def play_chunk(settings: RunSettings, chunk: Chunk) -> list[Any]:
    """Play ``(index, repeat, sample)`` episodes; return their records in order (a Ray task)."""
    key = settings.key()
    state = _STATES.get(key)
    if state is None:
        state = _STATES[key] = WorkerState.set_up(settings)
    records = state.play(chunk)
    shift = WALL_OFFSET - settings.wall_offset
    for record in records:
        record.started_at += shift
    return records
