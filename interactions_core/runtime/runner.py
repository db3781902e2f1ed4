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

import asyncio
import itertools
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

from .episode import EpisodeLoop
from .observers import Observers
from .record import END_REASONS, EpisodeRecord
from .session import SessionTracker
from .stats import PASS_SCORE, PromptGroups, UsageStats
from .summary_stats import SummaryStats

__all__ = ["RunSummary", "Runner", "run_episodes"]

#: How many errored episodes the summary describes in full.
ERROR_EXAMPLES = 5


class RunSummary:
    """Counters over a run's episodes; see :meth:`as_dict` for the JSON shape."""

    def __init__(self) -> None:
        self.error_examples: list[dict[str, Any]] = []
        self.skipped_rows = 0
        self.elapsed_s = 0.0
        self.interrupted = False
        self.records: list[EpisodeRecord] | None = None
        #: Every count below is derived from these per-interaction figures
        #: (``summary_stats.py``), so each episode is counted once.
        self.stats = SummaryStats()
        self.groups = PromptGroups()  # pass@k and the spread within a prompt's repeats
        self.usage = UsageStats()  # tokens and request latency, when the policy reports them
        self.requests_in_flight_max: int | None = None

    def add(self, record: EpisodeRecord) -> None:
        """Count one finished episode."""
        self.stats.add_record(record)
        if record.usage is not None:
            self.usage.add(record.usage)
        if record.errors:
            if len(self.error_examples) < ERROR_EXAMPLES:
                first = record.errors[0]
                self.error_examples.append(
                    {"index": record.index, "sample_id": record.sample_id, **first}
                )
            return
        final = record.final_score
        if final is not None:
            self.groups.add(record.interaction, record.index, final)

    @property
    def episodes(self) -> int:
        return self.stats.total.episodes

    @property
    def terminated(self) -> int:
        """Episodes the interaction ended, without error."""
        return self.stats.total.terminated

    @property
    def errors(self) -> int:
        return self.stats.total.errors

    @property
    def turns(self) -> dict[int, int]:
        """Episodes by number of assistant turns (errored episodes included)."""
        return self.stats.total.turns

    @property
    def end_reasons(self) -> dict[str, int]:
        return self.stats.total.end_reasons

    @property
    def final_score_mean(self) -> float | None:
        """Mean final score over the episodes that ended without error and have one."""
        total = self.stats.total
        return total.final_sum / total.final_n if total.final_n else None

    @property
    def score_by_turn(self) -> dict[int, float]:
        """Mean turn score by (1-based) turn index, over episodes without error."""
        return self.stats.total.score_by_turn()

    @property
    def episodes_per_second(self) -> float | None:
        return self.episodes / self.elapsed_s if self.elapsed_s > 0 else None

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary (``interactions run --json``)."""
        return {
            "episodes": self.episodes,
            "terminated": self.terminated,
            "turns": {str(n): self.turns[n] for n in sorted(self.turns)},
            "final_score_mean": self.final_score_mean,
            "errors": self.errors,
            "end_reasons": {r: self.end_reasons[r] for r in END_REASONS if r in self.end_reasons},
            "score_by_turn": {str(n): s for n, s in self.score_by_turn.items()},
            "skipped_rows": self.skipped_rows,
            "elapsed_s": round(self.elapsed_s, 6),
            "episodes_per_second": self.episodes_per_second,
            "interrupted": self.interrupted,
            "error_examples": self.error_examples,
            **self._model_fields(),
            **self.stats.as_dict(),
        }

    def _model_fields(self) -> dict[str, Any]:
        groups = self.groups.as_dict()
        return {
            "pass_at_k": groups.pop("pass_at_k"),
            "prompt_groups": groups,
            "usage": self.usage.as_dict(),
            "requests_in_flight_max": self.requests_in_flight_max,
        }

    def format(self) -> str:
        """A human-readable summary (what ``interactions run`` prints)."""

        def pct(n: int) -> str:
            return f" ({100 * n / self.episodes:.1f}%)" if self.episodes else ""

        ok = self.episodes - self.errors
        lines = [f"episodes          {self.episodes}  ({ok} ok, {self.errors} errored)"]
        if self.skipped_rows:
            lines.append(f"skipped rows      {self.skipped_rows} (invalid rows in the dataset)")
        lines.append(f"terminated        {self.terminated}{pct(self.terminated)}")
        if self.end_reasons:
            reasons = ", ".join(
                f"{r} {self.end_reasons[r]}" for r in END_REASONS if r in self.end_reasons
            )
            lines.append(f"ended by          {reasons}")
        if self.turns:
            hist = "  ".join(f"{n}: {self.turns[n]}" for n in sorted(self.turns))
            lines.append(f"assistant turns   {hist}  ({self.stats.format_turns()})")
        lines.append(f"final score mean  {self.stats.format_final()}")
        by_turn = self.score_by_turn
        if by_turn:
            lines.append(
                "score by turn     " + "  ".join(f"{n}: {s:.3f}" for n, s in by_turn.items())
            )
        lines.extend(self.stats.format_lines())
        lines += self.groups.format_lines()
        lines += self.usage.format_lines(self.requests_in_flight_max)
        rate = self.episodes_per_second
        rate_text = f" ({rate:,.0f} episodes/s)" if rate else ""
        lines.append(f"time              {self.elapsed_s:.2f} s{rate_text}")
        if self.interrupted:
            lines.append("interrupted       yes (the run was stopped before the end)")
        return "\n".join(lines)


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
        self._tasks: list[asyncio.Task[None]] = []
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
        for task in self._tasks:
            task.cancel()

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
        items = _numbered(samples, self.repeat)
        play = self.loop.run
        count = summary.add
        fatal: list[BaseException] = []
        self._stopping = False
        tasks: list[asyncio.Task[None]] = []
        self._tasks = tasks
        cap = self.concurrency
        loop = asyncio.get_running_loop()
        # The pool grows one worker at a time, up to ``concurrency``: a worker that
        # takes a sample first schedules a spare, which only runs (and takes the
        # next sample) when an episode waits. Episodes that never wait (replay of
        # a synchronous interaction) cost no task each.
        spare = False

        async def worker() -> None:
            nonlocal spare
            spare = False
            while not self._stopping:
                try:
                    index, repeat, sample = next(items)
                except StopIteration:
                    return
                except Exception as exc:
                    fatal.append(exc)
                    self.cancel()
                    return
                if skip is not None and (index, repeat) in skip:
                    continue
                if not spare and len(tasks) < cap:
                    spare = True
                    tasks.append(loop.create_task(worker()))
                try:
                    record = await play(sample, index, repeat)
                except BaseException as exc:
                    if self._stopping or isinstance(exc, KeyboardInterrupt):
                        raise
                    # play() records every fault itself; this is a last resort
                    # so that no sample can vanish from the summary.
                    task: Any = asyncio.current_task()
                    uncancel = getattr(task, "uncancel", None)  # Python 3.11+
                    if uncancel is not None:
                        while task.cancelling():
                            uncancel()
                    record = EpisodeRecord(index, index, repeat)
                    record.add_error("episode", exc)
                count(record)
                if records is not None:
                    records.append(record)
                if on_record is not None:
                    try:
                        on_record(record)
                    except Exception as exc:
                        fatal.append(exc)
                        self.cancel()
                        return

        started = time.perf_counter()
        tasks.append(loop.create_task(worker()))
        try:
            waited = 0
            while waited < len(tasks):  # workers started meanwhile are waited for next
                batch = tasks[waited:]
                waited = len(tasks)
                # Shielded: a cancellation of run() itself reaches the episodes
                # through cancel(), after the stopping flag is set.
                await asyncio.shield(asyncio.gather(*batch, return_exceptions=True))
        except asyncio.CancelledError:
            self.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            summary.elapsed_s = time.perf_counter() - started
            summary.requests_in_flight_max = getattr(self.loop.policy, "max_in_flight", None)
            self._tasks = []
        summary.interrupted = self._stopping and not fatal
        if fatal:
            raise fatal[0]
        return summary


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
