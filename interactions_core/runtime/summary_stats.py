"""The run summary's statistics: the whole run and each interaction, as JSON and text.

A run usually mixes several interactions, so one mean over all of them hides
what changed. :class:`SummaryStats` keeps a :class:`~.group_stats.GroupStats`
per interaction and merges them for the whole run; it gives the keys
``interactions run --json`` adds to the summary and the text summary's lines.

It is fed one finished episode at a time (from :class:`~.runner.RunSummary`
during a run, or from a records file by ``interactions report``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .group_stats import GroupStats

__all__ = ["NO_INTERACTION", "SOLVED_THRESHOLD", "SummaryStats"]

#: A turn whose score reaches this value solves the episode (full marks).
SOLVED_THRESHOLD = 1.0
#: The label of episodes played without an interaction (single-turn runs).
NO_INTERACTION = "(none)"


class SummaryStats:
    """:class:`GroupStats` for the whole run and for each interaction."""

    def __init__(self, threshold: float = SOLVED_THRESHOLD) -> None:
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
        self.add(
            record.get("interaction"),
            record.get("end_reason") or "error",
            int(record.get("turns") or 0),
            record.get("scores") or (),
            record.get("final_score"),
            record.get("errors") or (),
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
        text = f"{final['mean']:.4f}"
        if final["stderr"] is not None:
            lo, hi = final["ci95"]
            text += f" ± {final['stderr']:.4f} se  (95% CI {lo:.4f} to {hi:.4f}"
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
            lines.append("errors by kind    " + ", ".join(f"{k} {n}" for k, n in kinds[:6]))
            if len(kinds) > 6:
                lines[-1] += f", ... ({len(kinds) - 6} more kinds)"
        if len(self.groups) > 1:
            lines.append("by interaction")
            lines.extend("  " + row for row in _group_table(self.groups))
        return lines


def _format_solved(solved: Mapping[int, float], limit: int = 8) -> str:
    items = list(solved.items())
    shown = items if len(items) <= limit else items[: limit - 1] + items[-1:]
    parts = [f"{k}: {100 * v:.1f}%" for k, v in shown]
    if len(items) > limit:
        parts.insert(limit - 1, "...")
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
                "-" if final["mean"] is None else f"{final['mean']:.4f}",
                "-" if final["ci95"] is None else "{:.4f} to {:.4f}".format(*final["ci95"]),
                f"{100 * list(solved.values())[-1]:.1f}%" if solved else "-",
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        yield "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
