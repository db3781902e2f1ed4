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

The parts: which episodes go in which chunk (:mod:`._shard_plan`), the driver
loop (:mod:`._shard_driver`), what a worker does with a chunk
(:mod:`._shard_worker`), stopping on a signal (:mod:`._stop_signals`) and the
CLI's ``--ray`` branch (:mod:`._shard_cli`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

from ..runtime.stats import PASS_SCORE
from ._shard_cli import run_from_cli as run_from_cli  # the CLI imports it from here
from ._shard_plan import CHUNK_SIZE, plan_chunks
from ._shard_worker import play_chunk
from ._stop_signals import StopOnSignal

__all__ = ["RunSettings", "play_chunk", "run_sharded"]


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
        from ..runtime.record import WALL_OFFSET as _WALL_OFFSET

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
    from ._connect import connect
    from ._shard_driver import ShardDriver

    summary = _new_summary(settings, keep_records)
    chunks = plan_chunks(samples, settings.repeat, skip, chunk_size, indexed=indexed)
    first = next(chunks, None)
    if first is None:  # nothing to play (e.g. a finished run resumed): no cluster needed
        return summary
    ray = connect(address)
    if workers is None:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = ray.remote(play_chunk).options(num_cpus=1, max_retries=0)
    if runtime_env is not None:
        task = task.options(runtime_env=dict(runtime_env))
    driver = ShardDriver(ray, task, ray.put(settings), 2 * workers, _counter(summary, on_record))
    started = time.perf_counter()
    stop = StopOnSignal(stopped)
    try:
        if driver.run(itertools.chain([first], chunks), stop):
            summary.interrupted = True
    finally:
        stop.restore()
        summary.elapsed_s = time.perf_counter() - started
    return summary


def _new_summary(settings: RunSettings, keep_records: bool) -> Any:
    """An empty :class:`RunSummary` counting pass@k as the settings say."""
    from ..runtime.runner import RunSummary
    from ..runtime.stats import PromptGroups

    summary = RunSummary()
    summary.groups = PromptGroups(settings.repeat, settings.pass_score)
    summary.records = [] if keep_records else None
    return summary


def _counter(summary: Any, on_record: Callable[[Any], Any] | None) -> Callable[[list[Any]], None]:
    """What the driver does with records released in order: count, keep, pass on."""

    def emit(records: list[Any]) -> None:
        for record in records:
            summary.add(record)
            if summary.records is not None:
                summary.records.append(record)
            if on_record is not None:
                on_record(record)

    return emit
