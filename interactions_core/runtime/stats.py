"""The statistics of a run: the math, and the counters fed one episode at a time.

What an RL engineer reads after a run (defined in ``docs/run.md``):

- :class:`GroupStats`, the figures of one group of episodes (one interaction,
  or a whole run): the assistant-turn distribution, the final score's mean with
  its standard error and 95% interval, the cumulative share of episodes solved
  by turn *k*, the end reasons and the errors by kind. Two groups merge exactly
  (the run's total is the merge of its interactions); the variance is Welford's,
  in a scaled unit: accurate for nearly constant scores, finite up to ``1e308``.
- :class:`PromptGroups`: how often the model solves a prompt in ``k`` tries
  (pass@k), and how much the final score varies among the ``K`` episodes of one
  prompt (GRPO's advantage is the score minus the group mean, divided by the
  group's standard deviation: a group whose scores are all equal teaches nothing).
- :class:`UsageStats`: what the run cost in tokens and request time.

The counters keep no episode: per prompt at most its ``K`` final scores (only
when ``K > 1``), per request one latency, otherwise counts. :data:`PASS_SCORE`
decides both when an episode passes (pass@k) and when a turn solves it. The
functions take plain numbers, so a report over records can use them too.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .record import END_REASONS, error_count, error_kind

K = TypeVar("K")

__all__ = [
    "PASS_SCORE",
    "GroupStats",
    "PromptGroups",
    "UsageStats",
    "counted_usage",
    "pass_at_k",
    "percentile",
    "reported_ks",
    "told_reasons",
]

#: An episode passes when its final score is at least this, and a turn scoring at
#: least this solves its episode (full marks; gsm8k: 1.0 = correct).
PASS_SCORE = 1.0
#: Two-sided 95% quantile of the normal distribution.
_Z95 = 1.959963984540054
#: The latency percentiles the summary gives.
PERCENTILES = (50, 90, 99)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples of which ``c`` passed.

    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021, "Evaluating Large Language
    Models Trained on Code"): the probability that at least one of ``k``
    samples drawn without replacement from the ``n`` passes. The ratio of
    binomials is computed as the product ``prod(1 - k / i for i in n-c+1..n)``:
    ``c`` float multiplications instead of two big-integer binomials, whose cost
    grows with ``n * k`` (a group of 30,000 repeats took minutes); exact where the
    factors are (``pass_at_k(2, 1, 1)`` is 0.5).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


#: Every k up to this one is reported; above it, powers of two and K itself.
DENSE_K = 10


def reported_ks(repeat: int, largest_group: int) -> list[int]:
    """The k for which pass@k is reported under ``--repeat repeat``.

    Every k up to :data:`DENSE_K`, then the powers of two, and the largest k
    any group supports (``repeat`` itself when a prompt has all its repeats
    scored): never a k no group reaches, and a logarithmic number of k however
    large ``--repeat`` is.
    """
    top = min(repeat, largest_group)
    ks = set(range(1, min(top, DENSE_K) + 1))
    power = 16
    while power <= top:
        ks.add(power)
        power *= 2
    if top >= 1:
        ks.add(top)
    return sorted(ks)


def _wilson(share: float, n: int) -> list[float]:
    """Wilson's 95% score interval for a share (or a mean of [0, 1] scores) over ``n``."""
    z2 = _Z95 * _Z95
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [max(centre - half, 0.0), min(centre + half, 1.0)]


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of sorted values, interpolating linearly between ranks.

    The same definition as NumPy's default (``method="linear"``).
    """
    if not ordered:
        raise ValueError("percentile of no values")
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def _scale_for(magnitude: float) -> float:
    """A power of two within a factor 2 of ``magnitude``: dividing by it is exact."""
    return math.ldexp(1.0, math.frexp(magnitude)[1] - 1)


def _std(scores: Sequence[float]) -> float:
    """Sample standard deviation (``n - 1``), the one GRPO implementations divide by."""
    n = len(scores)
    scale = _scale_for(max(abs(s) for s in scores))  # scores near 1e308 do not overflow
    scaled = [s / scale for s in scores]
    mean = sum(scaled) / n
    return math.sqrt(sum((s - mean) ** 2 for s in scaled) / (n - 1)) * scale


#: Turn scores are summed times this power of two, which is exact for scores above
#: about 1e-269: scores near the float limit (1.5e308) would overflow a plain sum.
_TURN_SUM_SCALE = 2.0**-128


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
        "final_scale",
        "final_sum",
        "final_unit",
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
        self.final_m2 = 0.0  # in units of final_scale ** 2 (see _add_final)
        self.final_scale = 1.0
        self.final_binary = True  # every final score so far is 0 or 1
        self.final_unit = True  # every final score so far lies in [0, 1]
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

    def _add_errors(self, errors: Sequence[Any]) -> None:
        self.errors += 1
        by_kind = self.errors_by_kind
        for error in errors:
            kind = error_kind(error)
            by_kind[kind] = by_kind.get(kind, 0) + error_count(error)

    def _add_final(self, final_score: float) -> None:
        """Welford's update of the mean and the squared deviations (in ``final_scale`` units)."""
        n = self.final_n = self.final_n + 1
        self.final_sum += final_score
        scale = self.final_scale
        if abs(final_score) > scale:  # rarely: most scores lie within the scale
            scale = self._widen(abs(final_score))
        delta = final_score / scale - self.final_mean / scale
        mean = self.final_mean = self.final_mean + delta / n * scale
        self.final_m2 += delta * (final_score / scale - mean / scale)
        if final_score != 0 and final_score != 1:
            self.final_binary = False
            if not 0.0 <= final_score <= 1.0:
                self.final_unit = False

    def _widen(self, magnitude: float) -> float:
        """Grow ``final_scale`` to cover ``magnitude`` (rescaling ``final_m2``); return it."""
        scale = self.final_scale
        if magnitude > scale:
            wider = _scale_for(magnitude)
            ratio = scale / wider
            self.final_m2 *= ratio * ratio
            self.final_scale = scale = wider
        return scale

    def _add_turn_scores(self, scores: Sequence[float], threshold: float) -> int:
        """Add each turn's score to its turn's sum; return the first solving turn (0: none)."""
        sums = self.turn_score_sums
        if len(scores) > len(sums):
            self._reach(len(scores))
        reached = self.turn_score_counts
        solved = 0
        for i, score in enumerate(scores):
            sums[i] += score * _TURN_SUM_SCALE
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
                scale = out._widen(g.final_scale)
                ratio = g.final_scale / scale
                delta = g.final_mean / scale - out.final_mean / scale
                share = g.final_n / n
                out.final_m2 += g.final_m2 * ratio * ratio + delta * delta * out.final_n * share
                out.final_mean += delta * share * scale
                out.final_n = n
                out.final_sum += g.final_sum
                out.final_binary = out.final_binary and g.final_binary
                out.final_unit = out.final_unit and g.final_unit
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

        Pass/fail scores get Wilson's interval (``"wilson"``: inside [0, 1], sound
        at small n and near 0 or 1); fractional scores in [0, 1] get Wilson's
        around the mean (``"wilson-bounded"``: their variance is at most
        ``mean * (1 - mean)``, so it is conservative and never leaves [0, 1]);
        other scores the normal approximation (``"normal"``). The spread and
        interval need at least two scores.
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
        if not math.isfinite(out["mean"]):  # the sum overflowed; Welford's mean did not
            out["mean"] = mean
        std = math.sqrt(max(self.final_m2, 0.0) / (n - 1)) * self.final_scale
        stderr = std / math.sqrt(n)
        if self.final_unit:
            ci = _wilson(min(max(mean, 0.0), 1.0), n)
            method = "wilson" if self.final_binary else "wilson-bounded"
        else:
            half, top = _Z95 * stderr, sys.float_info.max  # a bound past it is reported as it
            ci, method = [max(mean - half, -top), min(mean + half, top)], "normal"
        out.update(std=std, stderr=stderr, ci95=ci, ci95_method=method)
        return out

    def score_by_turn(self) -> dict[int, float]:
        """Mean turn score by (1-based) turn, over the episodes that reached that turn."""
        return {
            i + 1: s / c / _TURN_SUM_SCALE
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
            "end_reasons": told_reasons(self.end_reasons),
            "turns": {str(n): self.turns[n] for n in sorted(self.turns)},
            "assistant_turns": self.assistant_turns(),
            "final_score": self.final_score(),
            "score_by_turn": {str(k): v for k, v in self.score_by_turn().items()},
            "solved_by_turn": {str(k): v for k, v in self.solved_by_turn().items()},
            "errors_by_kind": dict(sorted(self.errors_by_kind.items(), key=lambda kv: -kv[1])),
        }


class PromptGroups:
    """Final scores grouped by prompt (sample index), per interaction.

    ``repeat`` is the number of episodes per prompt (``--repeat K``). Only
    episodes that ended without error and have a final score count: an errored
    episode says nothing about the model, so a prompt whose repeats partly
    failed has fewer samples, and pass@k uses the prompts with at least ``k``.
    """

    def __init__(self, repeat: int = 1, pass_score: float = PASS_SCORE) -> None:
        self.repeat = repeat
        self.pass_score = pass_score
        # repeat == 1: per interaction [episodes, passed]; else per (interaction, index) scores
        self._single: dict[str | None, list[int]] = {}
        self._groups: dict[tuple[str | None, int], list[float]] = {}
        if repeat == 1:  # chosen once: add() is on the path of every episode
            self.add = self._add_single  # type: ignore[method-assign]

    def _add_single(self, interaction: str | None, index: int, final_score: float) -> None:
        tally = self._single.get(interaction)
        if tally is None:
            tally = self._single[interaction] = [0, 0]
        tally[0] += 1
        if final_score >= self.pass_score:
            tally[1] += 1

    def add(self, interaction: str | None, index: int, final_score: float) -> None:
        """Count one scored episode of prompt ``index``."""
        key = (interaction, index)
        scores = self._groups.get(key)
        if scores is None:
            self._groups[key] = [final_score]
        else:
            scores.append(final_score)

    def _by_interaction(self) -> dict[str | None, list[list[float]]]:
        out: dict[str | None, list[list[float]]] = {}
        for (interaction, _), scores in self._groups.items():
            out.setdefault(interaction, []).append(scores)
        return out

    def _figures(self, groups: Iterable[Sequence[float]]) -> dict[str, Any]:
        groups = list(groups)
        threshold = self.pass_score
        counts = [(len(g), sum(s >= threshold for s in g)) for g in groups]
        at_k: dict[str, float] = {}
        largest = max((n for n, _ in counts), default=0)
        for k in reported_ks(self.repeat, largest):
            eligible = [pass_at_k(n, c, k) for n, c in counts if n >= k]
            if eligible:
                at_k[str(k)] = sum(eligible) / len(eligible)
        spread = [g for g in groups if len(g) >= 2]
        return {
            "prompts": len(groups),
            "pass_at_k": at_k,
            "score_std_mean": sum(_std(g) for g in spread) / len(spread) if spread else None,
            "uniform_groups": sum(1 for g in spread if min(g) == max(g)),
        }

    def as_dict(self) -> dict[str, Any]:
        """``{"repeat", "prompts", "pass_at_k", "score_std_mean", "uniform_groups",
        "by_interaction": {name: the same figures}}``; ``pass_at_k`` maps ``"k"`` to
        the mean pass@k over the prompts with at least ``k`` scored episodes."""
        if self.repeat == 1:
            total = [0, 0]
            by: dict[str, Any] = {}
            for interaction, (n, c) in self._single.items():
                total[0] += n
                total[1] += c
                by[_label(interaction)] = _single_figures(n, c)
            return {"repeat": 1, **_single_figures(*total), "by_interaction": by}
        grouped = self._by_interaction()
        return {
            "repeat": self.repeat,
            **self._figures(self._groups.values()),
            "by_interaction": {_label(i): self._figures(g) for i, g in grouped.items()},
        }

    def format_lines(self) -> list[str]:
        """Summary lines under ``--repeat`` (K = 1: none; pass@1 is in the JSON summary)."""
        if self.repeat == 1:
            return []
        data = self.as_dict()
        if not data["prompts"]:
            return []
        lines = [f"pass@k            {_at_k(data)}"]
        by = data["by_interaction"]
        if len(by) > 1:
            for name, figures in by.items():
                lines.append(f"  {name:<16}{_at_k(figures)}")
        if data["score_std_mean"] is not None:
            groups = data["prompts"]
            lines.append(
                f"group spread      mean score std {data['score_std_mean']:.3f}; "
                f"{data['uniform_groups']} of {groups} groups all equal (zero GRPO advantage)"
            )
        return lines


def _single_figures(n: int, c: int) -> dict[str, Any]:
    return {
        "prompts": n,
        "pass_at_k": {"1": c / n} if n else {},
        "score_std_mean": None,
        "uniform_groups": 0,
    }


def _label(interaction: str | None) -> str:
    return "-" if interaction is None else interaction  # "-": episodes without an interaction


def _at_k(figures: Mapping[str, Any]) -> str:
    values = "  ".join(f"{k}: {v:.3f}" for k, v in figures["pass_at_k"].items())
    return f"{values}  ({figures['prompts']} prompts)"


#: The most tokens one episode's usage may report, and the longest request (seconds).
MAX_TOKENS = 1 << 53


def token_count(value: Any) -> int | None:
    """``value`` as a count of tokens, or ``None`` when it is not one: a server (or a
    plugin) may report a negative count, a float or a number of thousands of digits.
    The one rule for a record's usage and the summary's sums, so they agree."""
    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value
    return None


#: How many end reasons outside :data:`END_REASONS` (a hand-made record's) are told by
#: name; the rest are added up as ``other``.
OTHER_REASONS_SHOWN = 5


def told_reasons(counts: Mapping[str, int]) -> dict[str, int]:
    """Episodes by end reason, for a summary: the known reasons in their order, then
    those a record read back carried that the runtime never writes, the most frequent
    by name and the rest as ``other``. Every episode is in one bucket, and a file of a
    million made-up reasons is told in a line."""
    told = {r: counts[r] for r in END_REASONS if r in counts}
    others = sorted((n, r) for r, n in counts.items() if r not in told)
    others.sort(key=lambda nr: -nr[0])  # most frequent first, ties by name
    shown = others if len(others) <= OTHER_REASONS_SHOWN else others[: OTHER_REASONS_SHOWN - 1]
    for n, r in shown:
        name = r if len(r) <= 40 else r[:37] + "..."
        told[name] = told.get(name, 0) + n
    rest = sum(n for n, _ in others[len(shown) :])
    if rest:
        told["other"] = told.get("other", 0) + rest
    return told


def counted_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """A policy's ``usage`` for its record: a plain dict with ``prompt_tokens`` and
    ``completion_tokens`` by :func:`token_count` (``None`` where the policy gave no
    count of tokens), so the record says what the summary adds up."""
    kept = dict(usage)
    for key in ("prompt_tokens", "completion_tokens"):
        if key in kept:
            kept[key] = token_count(kept[key])
    return kept


MAX_LATENCY = 1e7


class UsageStats:
    """Token counts and request latencies over the episodes whose policy reports them.

    Each record's ``usage`` (see ``OpenAIPolicy.usage``) gives ``prompt_tokens``,
    ``completion_tokens`` (``None`` when the server reported none) and ``turns``,
    a list with one ``latency_s`` per request.
    """

    def __init__(self) -> None:
        self.episodes = 0
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latencies = array("d")

    def add(self, usage: Mapping[str, Any]) -> None:
        """Count one episode's usage; a figure outside ``MAX_TOKENS``/``MAX_LATENCY`` (from a
        server or a plugin: 10**400 tokens ended the run) is left out, not overflowed."""
        self.episodes += 1
        prompt = token_count(usage.get("prompt_tokens"))
        if prompt is not None:
            self.prompt_tokens += prompt
        completion = token_count(usage.get("completion_tokens"))
        if completion is not None:
            self.completion_tokens += completion
        turns = usage.get("turns")
        if type(turns) is list:
            append = self.latencies.append
            for turn in turns:
                if type(turn) is dict:  # a request, timed or not
                    self.requests += 1
                latency = turn.get("latency_s") if type(turn) is dict else None
                if (type(latency) is float or type(latency) is int) and (
                    0 <= latency <= MAX_LATENCY  # NaN compares false
                ):
                    append(latency)

    def as_dict(self) -> dict[str, Any] | None:
        """Totals, per-episode means and latency percentiles; ``None`` when nothing reported."""
        if not self.episodes:
            return None
        n = self.episodes
        ordered = sorted(self.latencies)
        latency: dict[str, float] | None = None
        if ordered:
            latency = {"mean": sum(ordered) / len(ordered)}
            latency.update({f"p{q}": percentile(ordered, q) for q in PERCENTILES})
            latency["max"] = ordered[-1]
        return {
            "episodes": n,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens_per_episode": self.prompt_tokens / n,
            "completion_tokens_per_episode": self.completion_tokens / n,
            "latency_s": latency,
        }

    def format_lines(self, in_flight_max: int | None = None) -> list[str]:
        """Summary lines: tokens (totals and per episode) and request latency."""
        data = self.as_dict()
        if data is None:
            return []
        lines = [
            f"tokens            prompt {data['prompt_tokens']:,} "
            f"({data['prompt_tokens_per_episode']:,.1f}/episode), completion "
            f"{data['completion_tokens']:,} ({data['completion_tokens_per_episode']:,.1f}/episode)"
        ]
        latency = data["latency_s"]
        if latency is not None:
            marks = "  ".join(f"p{q} {latency[f'p{q}'] * 1e3:,.0f} ms" for q in PERCENTILES)
            flight = f", at most {in_flight_max} in flight" if in_flight_max else ""
            lines.append(f"request latency   {marks}  ({data['requests']:,} requests{flight})")
        return lines
