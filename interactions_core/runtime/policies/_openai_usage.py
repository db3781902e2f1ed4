"""What one ``openai`` episode's requests cost: the tokens the server reported, and time.

The episode record's ``usage`` comes from here (see ``docs/policies.md``,
"Accounting"). Totals are kept as the turns come, so reading them at the end
of an episode costs nothing; a total stays ``None`` while the server has
reported that count for no turn, so "not reported" is never shown as zero.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EpisodeUsage"]


class EpisodeUsage:
    """One episode's request parameters and accounting (per turn, and totals kept as it goes)."""

    __slots__ = ("completion_tokens", "latency_s", "params", "prompt_tokens", "turns")

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.turns: list[dict[str, Any]] = []
        self.prompt_tokens: int | None = None  # None until the server reports a count
        self.completion_tokens: int | None = None
        self.latency_s = 0.0

    def count(self, usage: Any, latency: float) -> None:
        """Keep one turn's figures: the server's ``usage`` block and the request's latency."""
        prompt = completion = None
        if usage.__class__ is dict:
            prompt = usage.get("prompt_tokens")
            if prompt.__class__ is int:
                self.prompt_tokens = (self.prompt_tokens or 0) + prompt
            else:
                prompt = None
            completion = usage.get("completion_tokens")
            if completion.__class__ is int:
                self.completion_tokens = (self.completion_tokens or 0) + completion
            else:
                completion = None
        self.latency_s += latency
        self.turns.append(
            {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "latency_s": round(latency, 6),
            }
        )

    def as_dict(self) -> dict[str, Any] | None:
        """Token totals, request time and each turn's figures; ``None`` before any turn."""
        if not self.turns:
            return None
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 6),
            "turns": self.turns,
        }
