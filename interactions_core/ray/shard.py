"""``interactions run --ray``: a dataset's episodes played by Ray workers.

The driver reads the dataset (so bad rows, ``--limit`` and ``--strict`` behave
exactly as in a local run), cuts it into chunks of consecutive samples and hands
each chunk to a Ray task; at most two chunks per worker CPU are in flight
(back-pressure: the dataset is never read ahead further). A task plays its chunk
with the same :class:`~interactions_core.runtime.Runner` machinery a local run
uses, on its own node's plugins, each episode keeping its global ``index``, and
returns the records. The driver releases records in dataset order and counts
them into the same :class:`~interactions_core.runtime.RunSummary`, so records,
summary and exit codes equal a local run's (timings aside).

The driver also expands ``--repeat K`` into episodes (a sample's repeats in a
row, as a local run plays them) and leaves out the ``(index, repeat)`` episodes
a resumed run (``--resume``) already has a record of, so a task only ever
receives episodes to play and a resumed sharded run plays, records and counts
exactly what a resumed local run does.

A worker process keeps its interactions, policy and event loop between chunks
(keyed by the run's settings), so a chunk costs one Ray task, not a fresh
config load.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

from ..runtime.stats import PASS_SCORE

__all__ = ["RunSettings", "play_chunk", "run_sharded"]

#: Samples per Ray task: large enough to hide the task's cost, small enough to spread.
CHUNK_SIZE = 32


class RunSettings:
    """Everything a worker needs to play episodes like the driver would, picklable."""

    def __init__(
        self,
        config: Mapping[str, Any] | None,
        *,
        policy: str = "replay",
        policy_options: Mapping[str, Any] | None = None,
        default: str | None = None,
        concurrency: int = 16,
        max_assistant_turns: int | None = None,
        max_user_turns: int | None = None,
        timeout: float | None = None,
        repeat: int = 1,
        pass_score: float = PASS_SCORE,
    ) -> None:
        from ..runtime.record import _WALL_OFFSET

        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be a positive integer, not {repeat!r}")

        self.config = dict(config) if config is not None else None
        self.policy = policy
        self.policy_options = dict(policy_options or {})
        self.default = default
        self.concurrency = concurrency
        self.max_assistant_turns = max_assistant_turns
        self.max_user_turns = max_user_turns
        self.timeout = timeout
        #: Used by the driver only (it expands repeats and counts pass@k), so not in :meth:`key`.
        self.repeat = repeat
        self.pass_score = pass_score
        #: The driver's wall-clock offset: records' start times are rebased onto it.
        self.wall_offset = _WALL_OFFSET

    def key(self) -> str:
        """What a worker's state is built from: chunks of runs with the same key share it."""
        import json

        return json.dumps(
            [
                self.config,
                self.policy,
                self.policy_options,
                self.default,
                self.concurrency,
                self.max_assistant_turns,
                self.max_user_turns,
                self.timeout,
            ],
            sort_keys=True,
            default=repr,
        )


class _WorkerState:
    """What one worker process keeps between chunks of the same run."""

    def __init__(self, settings: RunSettings) -> None:
        from ..loader import load_config
        from ..registry import get_registry
        from ..runtime.policies import create_policy, get_policy_class
        from ..runtime.runner import Runner

        registry = get_registry()
        interactions = None
        if settings.config is not None:
            interactions = load_config(settings.config, registry=registry).instantiate()
        policy = create_policy(
            get_policy_class(settings.policy, registry),
            settings.policy_options,
            name=settings.policy,
        )
        self.loop = asyncio.new_event_loop()
        self.runner = Runner(
            policy,
            interactions,
            concurrency=settings.concurrency,
            default=settings.default,
            max_assistant_turns=settings.max_assistant_turns,
            max_user_turns=settings.max_user_turns,
            timeout=settings.timeout,
            registry=registry,
        )


_STATES: dict[str, _WorkerState] = {}


def _set_up(settings: RunSettings) -> _WorkerState:
    """Build this worker's state, or say which node could not and why."""
    try:
        return _WorkerState(settings)
    except Exception as exc:
        import socket

        from .errors import WorkerSetupError

        detail = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise WorkerSetupError(
            f"the Ray worker on node {socket.gethostname()} could not set up the run: "
            f"{type(exc).__name__}: {detail}. If the driver runs this config, that node "
            "has different plugins: compare them with 'interactions ray check --address "
            "HOST:PORT' and ship the plugins with the job's runtime_env (docs/ray.md)"
        ) from None


def play_chunk(settings: RunSettings, chunk: list[tuple[int, int, Mapping[str, Any]]]) -> list[Any]:
    """Play ``(index, repeat, sample)`` episodes; return their records in order (a Ray task)."""
    from ..runtime.record import _WALL_OFFSET

    key = settings.key()
    state = _STATES.get(key)
    if state is None:
        state = _STATES[key] = _set_up(settings)
    runner = state.runner

    async def play_all() -> list[Any]:
        gate = asyncio.Semaphore(runner.concurrency)

        async def one(index: int, repeat: int, sample: Mapping[str, Any]) -> Any:
            async with gate:
                return await runner.loop.run(sample, index, repeat)

        return list(await asyncio.gather(*(one(i, r, s) for i, r, s in chunk)))

    records = state.loop.run_until_complete(play_all())
    shift = _WALL_OFFSET - settings.wall_offset
    for record in records:
        record.started_at += shift
    return records


def _stop_on_setup_failure(ray: Any, in_flight: Mapping[Any, Any], exc: Exception) -> None:
    """Raise the worker's :class:`WorkerSetupError`, after cancelling the other chunks."""
    from .errors import WorkerSetupError

    cause = getattr(exc, "cause", None)
    if isinstance(cause, WorkerSetupError):
        for ref in in_flight:
            ray.cancel(ref, force=True)
        raise WorkerSetupError(str(cause)) from None


def _lost_chunk(chunk: list[tuple[int, int, Any]], exc: BaseException) -> list[Any]:
    """Error records for a chunk whose task failed as a whole (its worker died)."""
    from ..runtime.record import EpisodeRecord
    from ..runtime.samples import sample_id_of

    cause = getattr(exc, "cause", None) or exc
    text = " ".join(line.strip() for line in str(cause).splitlines() if line.strip())
    error = RuntimeError(
        f"the Ray task playing samples {chunk[0][0]}-{chunk[-1][0]} failed: "
        f"{type(cause).__name__}: {text}"
    )
    records = []
    for index, repeat, sample in chunk:
        record = EpisodeRecord(index, sample_id_of(sample, index), repeat)
        record.add_error("ray", error)
        records.append(record)
    return records


class _StopOnSignal:
    """The first Ctrl-C or SIGTERM asks the run to stop; a second one interrupts at once.

    SIGTERM is what Slurm, Kubernetes and ``docker stop`` send: handled like
    Ctrl-C, the records already played reach the file and the run can be
    resumed, as with a local run. ``stopped[0]`` receives 128 + the first
    signal's number (the CLI's exit code).
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


def _episodes(
    pairs: Iterable[tuple[int, Mapping[str, Any]]],
    repeat: int,
    skip: Container[tuple[int, int]] | None,
) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """``(index, repeat, sample)`` of every episode to play, in the order a local run plays them."""
    for index, sample in pairs:
        for r in range(repeat):
            if skip is None or (index, r) not in skip:
                yield index, r, sample


def _chunks(
    episodes: Iterator[tuple[int, int, Mapping[str, Any]]], size: int
) -> Iterator[list[tuple[int, int, Mapping[str, Any]]]]:
    """Consecutive episodes, ``size`` at a time (the last chunk may be shorter)."""
    while chunk := list(itertools.islice(episodes, size)):
        yield chunk


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
    ``(index, sample)`` pairs. Each sample is played ``settings.repeat`` times;
    ``skip`` holds the ``(index, repeat)`` keys not to play (a resumed run's
    finished episodes), like :meth:`Runner.run`'s. When no episode is left to
    play, no cluster is connected to (or started). ``on_record`` gets each
    record in dataset order. ``workers`` is the number of tasks that play at
    once (default: the cluster's CPUs). Ctrl-C or SIGTERM (in the main thread)
    cancels the tasks in flight, keeps the records already played and returns
    the summary marked ``interrupted`` (``stopped[0]``, when given, receives
    128 + the signal's number); a second one stops at once.
    """
    from ..runtime.runner import RunSummary
    from ..runtime.stats import PromptGroups
    from ._connect import connect

    pairs: Iterable[Any] = iter(samples) if indexed else enumerate(samples)
    chunks = _chunks(_episodes(pairs, settings.repeat, skip), chunk_size)
    summary = RunSummary()
    summary.groups = PromptGroups(settings.repeat, settings.pass_score)
    summary.records = [] if keep_records else None
    first = next(chunks, None)
    if first is None:  # nothing to play (e.g. a finished run resumed): no cluster needed
        return summary
    chunks = itertools.chain([first], chunks)
    ray = connect(address)
    if workers is None:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = ray.remote(play_chunk).options(num_cpus=1, max_retries=0)
    if runtime_env is not None:
        task = task.options(runtime_env=dict(runtime_env))
    settings_ref = ray.put(settings)
    window = 2 * workers
    in_flight: dict[Any, tuple[int, list[tuple[int, int, Any]]]] = {}
    finished: dict[int, list[Any]] = {}
    next_seq = itertools.count()
    release = 0
    exhausted = False
    started = time.perf_counter()

    def emit(records: list[Any]) -> None:
        for record in records:
            summary.add(record)
            if summary.records is not None:
                summary.records.append(record)
            if on_record is not None:
                on_record(record)

    stop = _StopOnSignal(stopped)
    try:
        while not stop.requested:
            while not exhausted and len(in_flight) < window:
                chunk = next(chunks, None)
                if chunk is None:
                    exhausted = True
                    break
                in_flight[task.remote(settings_ref, chunk)] = (next(next_seq), chunk)
            if not in_flight:
                break
            # a short timeout lets a Ctrl-C be seen while chunks are running
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.2)
            for ref in ready:
                seq, chunk = in_flight.pop(ref)
                try:
                    finished[seq] = ray.get(ref)
                except Exception as exc:
                    _stop_on_setup_failure(ray, in_flight, exc)
                    finished[seq] = _lost_chunk(chunk, exc)
            while release in finished:
                emit(finished.pop(release))
                release += 1
        if stop.requested:
            # Like a local run's Ctrl-C: no new episodes; the running ones stop (their
            # worker processes end, and their sessions with them); finished ones count.
            for ref in in_flight:
                ray.cancel(ref, force=True)
            for seq in sorted(finished):
                emit(finished.pop(seq))
            summary.interrupted = True
    finally:
        stop.restore()
        summary.elapsed_s = time.perf_counter() - started
    return summary


def run_from_cli(
    args: Any,
    source: Iterable[Mapping[str, Any]],
    default: str | None,
    policy_options: Mapping[str, Any],
    output: Any = None,
    progress: Any = None,
    skip: Container[tuple[int, int]] | None = None,
    stopped: list[int] | None = None,
) -> tuple[Any, int]:
    """The ``--ray`` branch of ``interactions run``: settings from the arguments, then shard.

    ``output`` is the run's record sink (the same one a local run writes
    through, which stamps records for ``--resume``); ``skip`` holds the
    ``(index, repeat)`` keys a resumed run does not play again; ``stopped[0]``
    receives 128 + the number of a stop signal, as in the local branch. Returns
    ``(summary, still_open)`` like the local branch (sessions live in the
    workers, which finalize each one before returning its record).
    """
    from ..errors import ConfigError

    problems = []
    if args.trace:
        problems.append(
            "--trace is not supported with --ray yet (trace events happen in the workers); "
            "run without --ray to trace, or use --output for the records"
        )
    if args.policy == "human":
        problems.append("--policy human needs this terminal; it cannot run on Ray workers")
    if problems:
        raise ConfigError(problems)
    config = None
    if args.config:
        from ..config import _load_source

        config, _, _ = _load_source(args.config)
    settings = RunSettings(
        config,
        policy=args.policy,
        policy_options=policy_options,
        default=default,
        concurrency=args.concurrency,
        max_assistant_turns=args.max_assistant_turns,
        max_user_turns=args.max_user_turns,
        timeout=args.timeout,
        repeat=args.repeat,
        pass_score=args.pass_score,
    )
    done = [0, 0]

    def on_record(record: Any) -> None:
        if output is not None:
            output.write(record.to_dict())
        done[0] += 1
        done[1] += bool(record.errors)
        if progress is not None:
            progress.update(done[0], done[1])

    address = args.ray
    if address in ("", "local"):
        import os

        # $RAY_ADDRESS (set inside a Ray job) names the cluster; else "local" starts a
        # new one even when a cluster started by 'ray start' runs on this machine
        address = os.environ.get("RAY_ADDRESS") or "local"
    try:
        summary = run_sharded(
            source, settings, address=address, on_record=on_record, skip=skip, stopped=stopped
        )
    except BaseException:
        if not args.resume:
            _remove_if_unused(getattr(output, "output", None))
        raise
    return summary, 0


def _remove_if_unused(writer: Any) -> None:
    """Remove the new ``--output`` of a run that failed before its first record.

    A cluster that cannot be reached, or a worker that cannot set up the run,
    stops it before anything is written; without the empty file left behind,
    the corrected command can be rerun as it is (no ``--overwrite`` needed).
    Only an empty regular file is removed, never a device such as ``/dev/null``.
    """
    import os
    import stat

    if writer is None or writer.lines:
        return
    try:
        info = os.lstat(writer.path)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.remove(writer.path)
    except OSError:
        pass
