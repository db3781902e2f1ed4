"""What a run reports: :class:`RunSummary`, counters over its finished episodes.

A run of a million episodes keeps no record in memory unless asked to: the
summary is fed one finished record at a time and keeps counters only (per
interaction in :mod:`.summary_stats`; per prompt for pass@k, and request
latencies, in :mod:`.stats`). It is what ``interactions run`` prints, and its
:meth:`RunSummary.as_dict` is the ``--json`` output.
"""

from __future__ import annotations

from typing import Any

from .record import END_REASONS, EpisodeRecord
from .stats import PromptGroups, UsageStats
from .summary_stats import SummaryStats

__all__ = ["ERROR_EXAMPLES", "RunSummary"]

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
