"""What a run reports: :class:`RunSummary`, counters over its finished episodes.

A run of a million episodes keeps no record in memory unless asked to: the
summary is fed one finished record at a time and keeps counters only (per
prompt for pass@k, and request latencies, in :mod:`.stats`). It is what
``interactions run`` prints, and its :meth:`RunSummary.as_dict` is the
``--json`` output.

A run usually mixes several interactions, so one mean over all of them hides
what changed: :class:`SummaryStats` keeps a :class:`~.stats.GroupStats` per
interaction and merges them for the whole run; it gives the per-interaction
keys of the summary and the text summary's lines. It is fed by
:class:`RunSummary` during a run, or from a records file by
``interactions report``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import MAX_MESSAGE, cut_text, printable, shown
from .record import EpisodeRecord, interaction_calls
from .stats import PASS_SCORE, GroupStats, PromptGroups, UsageStats, told_reasons

__all__ = ["ERROR_EXAMPLES", "NO_INTERACTION", "RunSummary", "SummaryStats"]

#: How many errored episodes the summary describes in full.
ERROR_EXAMPLES = 5
#: The label of episodes played without an interaction (single-turn runs).
NO_INTERACTION = "(none)"


#: The most characters of a sample id an error example shows.
MOST_ID_SHOWN = 200


def _example(record: EpisodeRecord) -> dict[str, Any]:
    """The first error of ``record``, for the summary: its texts cut to what a record
    keeps, and its sample id to a line. A record read back (``--resume``) may hold a
    sample id or an error text of megabytes, told five times over otherwise."""
    sample_id = record.sample_id
    if type(sample_id) not in (int, float, bool, type(None)):
        text = sample_id if type(sample_id) is str else shown(sample_id, MOST_ID_SHOWN)
        sample_id = cut_text(text, MOST_ID_SHOWN)
    example: dict[str, Any] = {"index": record.index, "sample_id": sample_id}
    first = record.errors[0]
    for key, value in first.items() if type(first) is dict else ():
        example[key] = cut_text(value, MAX_MESSAGE) if type(value) is str else value
    return example


class SummaryStats:
    """:class:`GroupStats` for the whole run and for each interaction."""

    def __init__(self, threshold: float = PASS_SCORE) -> None:
        self.threshold = threshold
        self.groups: dict[str, GroupStats] = {}
        self._by_name: dict[str | None, GroupStats] = {}  # as recorded, None included
        self._total: GroupStats | None = None

    @property
    def total(self) -> GroupStats:
        """The whole run: the groups merged (each episode is counted once, in its group)."""
        if self._total is None:
            self._total = GroupStats.merged(self.groups.values())
        return self._total

    def add(
        self,
        interaction: str | None,
        end_reason: str,
        turns: int,
        scores: Sequence[float],
        final_score: float | None,
        errors: Sequence[Mapping[str, Any]],
    ) -> None:
        """Count one finished episode."""
        group = self._by_name.get(interaction)
        if group is None:
            group = self._group(interaction)
        self._total = None
        group.add(
            end_reason, turns, scores, final_score, errors, interaction is not None, self.threshold
        )

    def add_record(self, record: Any) -> None:
        """Count an :class:`~.episode.EpisodeRecord` (the run's per-episode path)."""
        interaction = record.interaction
        group = self._by_name.get(interaction)
        if group is None:
            group = self._group(interaction)
        self._total = None
        group.add(
            record.end_reason,
            record.turns,
            record.scores,
            record.final_score,
            record.errors,
            interaction is not None,
            self.threshold,
        )

    def _group(self, interaction: str | None) -> GroupStats:
        name = NO_INTERACTION if interaction is None else interaction
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = GroupStats()
        self._by_name[interaction] = group
        return group

    def add_dict(self, record: Mapping[str, Any]) -> None:
        """Count a record read back from an ``--output`` file."""
        # Once per record of files of 10^5 and more: no call through :meth:`add`.
        get = record.get
        interaction = get("interaction")
        group = self._by_name.get(interaction)
        if group is None:
            group = self._group(interaction)
        self._total = None
        group.add(
            get("end_reason") or "error",
            int(get("turns") or 0),
            get("scores") or (),
            get("final_score"),
            get("errors") or (),
            interaction is not None,
            self.threshold,
        )

    def as_dict(self) -> dict[str, Any]:
        """The keys ``interactions run --json`` adds to the summary."""
        total = self.total
        return {
            "assistant_turns": total.assistant_turns(),
            "final_score": total.final_score(),
            "solved_threshold": self.threshold,
            "solved_by_turn": {str(k): v for k, v in total.solved_by_turn().items()},
            "errors_by_kind": dict(sorted(total.errors_by_kind.items(), key=lambda kv: -kv[1])),
            "by_interaction": {name: g.as_dict() for name, g in sorted(self.groups.items())},
        }

    def format_turns(self) -> str:
        """``mean 1.91, median 2, p90 3`` for the text summary's turn line."""
        turns = self.total.assistant_turns()
        if turns["mean"] is None:
            return "-"
        return f"mean {turns['mean']:.2f}, median {turns['median']}, p90 {turns['p90']}"

    def format_final(self) -> str:
        """The final score's mean, standard error, 95% interval and count, or ``-``."""
        final = self.total.final_score()
        if not final["n"]:
            return "-"
        text = figure(final["mean"])
        if final["stderr"] is not None:
            lo, hi = final["ci95"]
            text += f" ± {figure(final['stderr'])} se  (95% CI {figure(lo)} to {figure(hi)}"
            text += f", {final['ci95_method']}; n={final['n']})"
        else:
            text += f"  (n={final['n']})"
        return text

    def format_lines(self) -> list[str]:
        """The text summary's extra lines (after the score by turn)."""
        total = self.total
        lines: list[str] = []
        solved = total.solved_by_turn()
        if solved:
            lines.append(f"solved by turn    {_format_solved(solved)}")
        if total.errors_by_kind:
            kinds = sorted(total.errors_by_kind.items(), key=lambda kv: -kv[1])
            # a kind holds a plugin's class name: its line breaks must not make lines
            told = ", ".join(f"{printable(k)} {n}" for k, n in kinds[:6])
            lines.append("errors by kind    " + told)
            if len(kinds) > 6:
                lines[-1] += f", ... ({len(kinds) - 6} more kinds)"
        if len(self.groups) > 1:
            lines.append("by interaction")
            lines.extend("  " + row for row in _group_table(self.groups))
        return lines


def figure(value: float, places: int = 4) -> str:
    """``value`` with ``places`` decimals, or in scientific notation when it is large:
    a score near the float limit is 309 digits in fixed notation."""
    return f"{value:.{places}f}" if abs(value) < 1e9 else f"{value:.{places}g}"


def _format_solved(solved: Mapping[int, float]) -> str:
    return _elided([f"{k}: {100 * v:.1f}%" for k, v in solved.items()])


def _elided(parts: list[str], limit: int = 8) -> str:
    """At most ``limit`` parts of a per-turn line, the last one kept, joined.

    An episode of thousands of turns would otherwise print a line of thousands of
    entries; ``--json`` keeps them all.
    """
    if len(parts) > limit:
        parts = [*parts[: limit - 1], "...", parts[-1]]
    return "  ".join(parts)


def _group_table(groups: Mapping[str, GroupStats]) -> Iterable[str]:
    headers = ("interaction", "episodes", "errors", "turns", "final score", "95% CI", "solved")
    rows = []
    for name, g in sorted(groups.items()):
        final = g.final_score()
        solved = g.solved_by_turn()
        rows.append(
            (
                name,
                str(g.episodes),
                str(g.errors),
                "-" if g.turns_mean is None else f"{g.turns_mean:.2f}",
                "-" if final["mean"] is None else figure(final["mean"]),
                "-" if final["ci95"] is None else " to ".join(map(figure, final["ci95"])),
                f"{100 * list(solved.values())[-1]:.1f}%" if solved else "-",
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        yield "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()


class RunSummary:
    """Counters over a run's episodes; see :meth:`as_dict` for the JSON shape."""

    def __init__(self) -> None:
        self.error_examples: list[dict[str, Any]] = []
        self.skipped_rows = 0
        self.elapsed_s = 0.0
        self.interrupted = False
        self.records: list[EpisodeRecord] | None = None
        #: Every count below is derived from these per-interaction figures
        #: (:class:`SummaryStats`), so each episode is counted once.
        self.stats = SummaryStats()
        self.groups = PromptGroups()  # pass@k and the spread within a prompt's repeats
        self.usage = UsageStats()  # tokens and request latency, when the policy reports them
        #: The interactions' own model requests (a simulated user, a judge): ``extra["usage"]``.
        self.interaction_usage = UsageStats()
        self.requests_in_flight_max: int | None = None

    def add(self, record: EpisodeRecord) -> None:
        """Count one finished episode."""
        self.stats.add_record(record)
        if record.usage is not None:
            self.usage.add(record.usage)
        if record.extras is not None:
            calls = interaction_calls(record.extras)
            if calls is not None:
                self.interaction_usage.add(calls)
        if record.errors:
            if len(self.error_examples) < ERROR_EXAMPLES:
                self.error_examples.append(_example(record))
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
        return self.stats.total.final_score()["mean"]  # type: ignore[no-any-return]

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
            "end_reasons": told_reasons(self.end_reasons),
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
            "interaction_usage": self.interaction_usage.as_dict(),
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
            reasons = ", ".join(f"{r} {n}" for r, n in told_reasons(self.end_reasons).items())
            lines.append(f"ended by          {reasons}")
        if self.turns:
            hist = _elided([f"{n}: {self.turns[n]}" for n in sorted(self.turns)])
            lines.append(f"assistant turns   {hist}  ({self.stats.format_turns()})")
        lines.append(f"final score mean  {self.stats.format_final()}")
        by_turn = self.score_by_turn
        if by_turn:
            scores = [f"{n}: {figure(s, 3)}" for n, s in by_turn.items()]
            lines.append("score by turn     " + _elided(scores))
        lines.extend(self.stats.format_lines())
        lines += self.groups.format_lines()
        lines += self.usage.format_lines(self.requests_in_flight_max)
        calls = self.interaction_usage.format_lines()
        if calls:
            lines.append("interaction calls (requests the interactions made themselves):")
            lines += ["  " + line for line in calls]
        rate = self.episodes_per_second
        if not rate:
            rate_text = ""
        else:  # a slow run (long episodes, a model) is not "0 episodes/s"
            rate_text = f" ({rate:,.0f} episodes/s)" if rate >= 10 else f" ({rate:.2g} episodes/s)"
        lines.append(f"time              {self.elapsed_s:.2f} s{rate_text}")
        if self.interrupted:
            lines.append("interrupted       yes (the run was stopped before the end)")
        return "\n".join(lines)
