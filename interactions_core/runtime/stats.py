"""Statistics over a run's episodes: pass@k, the spread within a prompt's group, usage.

What an RL engineer reads before a training run: how often the model solves a
prompt in ``k`` tries (pass@k), how much the final score varies among the
``K`` episodes of one prompt (GRPO's advantage is the score minus the group
mean, divided by the group's standard deviation: a group whose scores are all
equal teaches nothing), and what the run cost in tokens and request time.

The counters here are fed one record at a time and keep no episode: per prompt
at most its ``K`` final scores (only when ``K > 1``), per request one latency.
The functions take plain numbers so a report over records read back from a
file can use them as well.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["PASS_SCORE", "PromptGroups", "UsageStats", "pass_at_k", "percentile"]

#: An episode passes when its final score is at least this (gsm8k: 1.0 = correct).
PASS_SCORE = 1.0
#: The latency percentiles the summary gives.
PERCENTILES = (50, 90, 99)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples of which ``c`` passed.

    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021, "Evaluating Large Language
    Models Trained on Code"): the probability that at least one of ``k``
    samples drawn without replacement from the ``n`` passes. Exact integer
    binomials, so ``pass_at_k(2, 1, 1)`` is exactly 0.5.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


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


def _std(scores: Sequence[float]) -> float:
    """Sample standard deviation (``n - 1``), the one GRPO implementations divide by."""
    n = len(scores)
    mean = sum(scores) / n
    return math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))


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
        for k in range(1, self.repeat + 1):
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


class UsageStats:
    """Token counts and request latencies over the episodes whose policy reports them.

    Each record's ``usage`` (see ``OpenAIPolicy.usage``) gives ``prompt_tokens``,
    ``completion_tokens`` (``None`` when the server reported none) and ``turns``,
    a list with one ``latency_s`` per request.
    """

    def __init__(self) -> None:
        self.episodes = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latencies = array("d")

    def add(self, usage: Mapping[str, Any]) -> None:
        """Count one episode's usage."""
        self.episodes += 1
        prompt = usage.get("prompt_tokens")
        if prompt.__class__ is int:
            self.prompt_tokens += prompt
        completion = usage.get("completion_tokens")
        if completion.__class__ is int:
            self.completion_tokens += completion
        turns = usage.get("turns")
        if turns.__class__ is list:
            append = self.latencies.append
            for turn in turns:
                latency = turn.get("latency_s") if turn.__class__ is dict else None
                if latency.__class__ is float or latency.__class__ is int:
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
            "requests": len(ordered),
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
