"""The figures of one group of episodes: one interaction, or a whole run.

:class:`GroupStats` counts finished episodes and derives what an RL engineer
reads after a run (defined in ``docs/run.md``): the assistant-turn
distribution, the final score's mean with its standard error and 95% interval,
the cumulative share of episodes solved by turn *k*, the end reasons and the
errors by kind. It keeps counters only, so its memory does not grow with the
number of episodes, and two groups merge exactly (the run's total is the merge
of its interactions). The variance is accumulated with Welford's method, which
stays accurate when the scores are large or nearly constant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

K = TypeVar("K")

__all__ = ["GroupStats", "error_kind"]

#: Two-sided 95% quantile of the normal distribution.
_Z95 = 1.959963984540054


def error_kind(error: Mapping[str, Any]) -> str:
    """``"where: Type"`` for one entry of a record's ``errors``.

    For example ``generate_response: ValueError``: where it was raised and what.
    """
    return f"{error.get('where') or '?'}: {error.get('type') or 'Error'}"


def _add_counts(target: dict[K, int], source: Mapping[K, int]) -> None:
    for key, count in source.items():
        target[key] = target.get(key, 0) + count


def _quantile(histogram: Mapping[int, int], total: int, q: float) -> int | None:
    """The smallest value whose cumulative count reaches ``q`` of ``total``."""
    if not total:
        return None
    needed = q * total
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= needed:
            return value
    return max(histogram)


class GroupStats:
    """The figures for one group of episodes (one interaction, or the whole run)."""

    __slots__ = (
        "end_reasons",
        "episodes",
        "errors",
        "errors_by_kind",
        "final_binary",
        "final_m2",
        "final_mean",
        "final_n",
        "final_sum",
        "scored",
        "solved_at",
        "terminated",
        "turn_score_counts",
        "turn_score_sums",
        "turns",
        "turns_sum",
    )

    def __init__(self) -> None:
        self.episodes = 0
        self.errors = 0
        self.terminated = 0
        self.turns: dict[int, int] = {}
        self.turns_sum = 0
        self.end_reasons: dict[str, int] = {}
        self.errors_by_kind: dict[str, int] = {}
        self.final_n = 0
        self.final_sum = 0.0  # the mean reported is final_sum / final_n, as a plain average
        self.final_mean = 0.0
        self.final_m2 = 0.0
        self.final_binary = True  # every final score so far is 0 or 1
        self.scored = 0  # episodes without error that had an interaction
        self.solved_at: dict[int, int] = {}  # first solving turn -> episodes
        self.turn_score_sums: list[float] = []
        self.turn_score_counts: list[int] = []

    def add(
        self,
        end_reason: str,
        turns: int,
        scores: Sequence[float],
        final_score: float | None,
        errors: Sequence[Mapping[str, Any]],
        has_interaction: bool,
        threshold: float,
    ) -> None:
        """Count one finished episode; a turn scoring ``threshold`` or more solves it."""
        # Called once per episode during a run: locals and few attribute writes.
        self.episodes += 1
        by_reason = self.end_reasons
        by_reason[end_reason] = by_reason.get(end_reason, 0) + 1
        by_turns = self.turns
        by_turns[turns] = by_turns.get(turns, 0) + 1
        self.turns_sum += turns
        if errors:
            self._add_errors(errors)
            return
        if end_reason == "terminated":
            self.terminated += 1
        if final_score is not None:
            self._add_final(final_score)
        solved = self._add_turn_scores(scores, threshold) if scores else 0
        if has_interaction:
            self.scored += 1
            if solved:
                at = self.solved_at
                at[solved] = at.get(solved, 0) + 1

    def _add_errors(self, errors: Sequence[Mapping[str, Any]]) -> None:
        self.errors += 1
        by_kind = self.errors_by_kind
        for error in errors:
            kind = error_kind(error)
            by_kind[kind] = by_kind.get(kind, 0) + 1

    def _add_final(self, final_score: float) -> None:
        """Welford's update of the final score's mean and sum of squared deviations."""
        n = self.final_n = self.final_n + 1
        self.final_sum += final_score
        mean = self.final_mean
        delta = final_score - mean
        mean += delta / n
        self.final_mean = mean
        self.final_m2 += delta * (final_score - mean)
        if final_score != 0 and final_score != 1:
            self.final_binary = False

    def _add_turn_scores(self, scores: Sequence[float], threshold: float) -> int:
        """Add each turn's score to its turn's sum; return the first solving turn (0: none)."""
        sums = self.turn_score_sums
        if len(scores) > len(sums):
            self._reach(len(scores))
        reached = self.turn_score_counts
        solved = 0
        for i, score in enumerate(scores):
            sums[i] += score
            reached[i] += 1
            if not solved and score >= threshold:
                solved = i + 1
        return solved

    def _reach(self, turns: int) -> None:
        """Make room for the scores of ``turns`` turns."""
        missing = turns - len(self.turn_score_sums)
        if missing > 0:
            self.turn_score_sums.extend([0.0] * missing)
            self.turn_score_counts.extend([0] * missing)

    @classmethod
    def merged(cls, groups: Iterable[GroupStats]) -> GroupStats:
        """One group holding the episodes of all ``groups`` (Chan et al.'s variance merge)."""
        out = cls()
        for g in groups:
            out.episodes += g.episodes
            out.errors += g.errors
            out.terminated += g.terminated
            out.turns_sum += g.turns_sum
            out.scored += g.scored
            _add_counts(out.turns, g.turns)
            _add_counts(out.solved_at, g.solved_at)
            _add_counts(out.end_reasons, g.end_reasons)
            _add_counts(out.errors_by_kind, g.errors_by_kind)
            if g.final_n:
                n = out.final_n + g.final_n
                delta = g.final_mean - out.final_mean
                out.final_m2 += g.final_m2 + delta * delta * out.final_n * g.final_n / n
                out.final_mean += delta * g.final_n / n
                out.final_n = n
                out.final_sum += g.final_sum
                out.final_binary = out.final_binary and g.final_binary
            out._reach(len(g.turn_score_sums))
            for i, (total, count) in enumerate(
                zip(g.turn_score_sums, g.turn_score_counts, strict=True)
            ):
                out.turn_score_sums[i] += total
                out.turn_score_counts[i] += count
        return out

    # -- derived figures ---------------------------------------------------

    @property
    def turns_mean(self) -> float | None:
        """Mean assistant turns per episode (errored episodes included)."""
        return self.turns_sum / self.episodes if self.episodes else None

    def final_score(self) -> dict[str, Any]:
        """Mean final score with its standard deviation, standard error and 95% interval.

        When every final score is 0 or 1 (pass/fail) the interval is Wilson's,
        which stays inside [0, 1] and behaves at small n and near 0 or 1;
        otherwise it is the normal approximation ``mean ± 1.96 · stderr``.
        Standard deviation, error and interval need at least two scores.
        """
        n = self.final_n
        out: dict[str, Any] = {
            "n": n,
            "mean": self.final_sum / n if n else None,
            "std": None,
            "stderr": None,
            "ci95": None,
            "ci95_method": None,
        }
        if n < 2:
            return out
        mean = self.final_mean
        std = math.sqrt(max(self.final_m2, 0.0) / (n - 1))
        stderr = std / math.sqrt(n)
        if self.final_binary:
            z2 = _Z95 * _Z95
            centre = (mean + z2 / (2 * n)) / (1 + z2 / n)
            half = _Z95 * math.sqrt(mean * (1 - mean) / n + z2 / (4 * n * n)) / (1 + z2 / n)
            ci, method = [max(centre - half, 0.0), min(centre + half, 1.0)], "wilson"
        else:
            ci, method = [mean - _Z95 * stderr, mean + _Z95 * stderr], "normal"
        out.update(std=std, stderr=stderr, ci95=ci, ci95_method=method)
        return out

    def score_by_turn(self) -> dict[int, float]:
        """Mean turn score by (1-based) turn, over the episodes that reached that turn."""
        return {
            i + 1: s / c
            for i, (s, c) in enumerate(
                zip(self.turn_score_sums, self.turn_score_counts, strict=True)
            )
            if c
        }

    def solved_by_turn(self) -> dict[int, float]:
        """Cumulative share of scored episodes solved at or before each turn.

        Runs to the largest turn count seen, so the last value is the share
        solved at all. Empty when no episode had an interaction.
        """
        if not self.scored:
            return {}
        last = max(max(self.turns, default=0), max(self.solved_at, default=0))
        out: dict[int, float] = {}
        solved = 0
        for k in range(1, last + 1):
            solved += self.solved_at.get(k, 0)
            out[k] = solved / self.scored
        return out

    def assistant_turns(self) -> dict[str, Any]:
        """Mean, median, 90th percentile and maximum of assistant turns per episode."""
        return {
            "mean": self.turns_mean,
            "median": _quantile(self.turns, self.episodes, 0.5),
            "p90": _quantile(self.turns, self.episodes, 0.9),
            "max": max(self.turns) if self.turns else None,
        }

    def as_dict(self) -> dict[str, Any]:
        """Every figure as JSON-ready values (``interactions run --json``'s ``by_interaction``)."""
        return {
            "episodes": self.episodes,
            "errors": self.errors,
            "terminated": self.terminated,
            "end_reasons": dict(sorted(self.end_reasons.items(), key=lambda kv: -kv[1])),
            "turns": {str(n): self.turns[n] for n in sorted(self.turns)},
            "assistant_turns": self.assistant_turns(),
            "final_score": self.final_score(),
            "score_by_turn": {str(k): v for k, v in self.score_by_turn().items()},
            "solved_by_turn": {str(k): v for k, v in self.solved_by_turn().items()},
            "errors_by_kind": dict(sorted(self.errors_by_kind.items(), key=lambda kv: -kv[1])),
        }
