"""A turn's ``extra`` reaches the record, and an interaction's own requests the summary."""

from __future__ import annotations

import asyncio
from typing import Any

from interactions_core import InteractionResult, SessionInteraction
from interactions_core.runtime import ReplayPolicy, run_episodes
from interactions_core.runtime.summary import interaction_calls


class Metered(SessionInteraction):
    """Reports one model request on turn 2 only; ends after three turns."""

    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        extra = {}
        if turn == 2:
            extra = {"usage": [{"prompt_tokens": 7, "completion_tokens": 2, "latency_s": 0.5}]}
        return InteractionResult(turn == 3, "again", 0.5, extra)


class Silent(SessionInteraction):
    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return InteractionResult(True, "", 1.0)


def play(interaction: SessionInteraction) -> Any:
    prompt = [{"role": "user", "content": "hi"}]
    sample = {"prompt": prompt, "responses": ["a", "b", "c"], "interaction_kwargs": {"name": "x"}}
    return asyncio.run(
        run_episodes([sample], ReplayPolicy(), {"x": interaction}, keep_records=True)
    )


def test_extras_are_aligned_with_the_scores_and_counted_in_the_summary() -> None:
    summary = play(Metered({"name": "x"}))
    (record,) = summary.records
    assert record.scores == [0.5, 0.5, 0.5]
    assert record.to_dict()["extras"] == [
        {},
        {"usage": [{"prompt_tokens": 7, "completion_tokens": 2, "latency_s": 0.5}]},
        {},
    ]
    calls = summary.as_dict()["interaction_usage"]
    assert (calls["requests"], calls["prompt_tokens"], calls["completion_tokens"]) == (1, 7, 2)
    assert summary.as_dict()["usage"] is None  # the replay policy reports none
    assert "interaction calls" in summary.format()


def test_a_record_without_extras_has_no_extras_field() -> None:
    summary = play(Silent({"name": "x"}))
    (record,) = summary.records
    assert "extras" not in record.to_dict()
    assert summary.as_dict()["interaction_usage"] is None
    assert "interaction calls" not in summary.format()


def test_counts_not_reported_stay_unknown() -> None:
    calls = interaction_calls([{"usage": [{"latency_s": 0.1}]}, {"usage": "not a list"}, {}])
    assert calls == {
        "prompt_tokens": None,
        "completion_tokens": None,
        "turns": [{"latency_s": 0.1}],
    }
    assert interaction_calls([{}, {"other": 1}]) is None
