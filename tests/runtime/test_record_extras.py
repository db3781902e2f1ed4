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


def test_a_resumed_summary_counts_the_earlier_records_interaction_usage(tmp_path: Any) -> None:
    """After --resume, interaction_usage covered only the episodes played then."""
    import json
    import sys

    from interactions_core.cli import main

    (tmp_path / "metered_extras.py").write_text(
        "from interactions_core import InteractionResult, SessionInteraction\n"
        "class Metered(SessionInteraction):\n"
        "    def respond(self, state, messages, **kwargs):\n"
        "        turn = sum(1 for m in messages if m['role'] == 'assistant')\n"
        "        calls = [{'prompt_tokens': 7, 'completion_tokens': 2, 'latency_s': 0.5}] * turn\n"
        "        return InteractionResult(turn == 3, 'again', 0.5, {'usage': calls})\n",
        encoding="utf-8",
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        "interaction:\n  - name: x\n    class_name: metered_extras.Metered\n", encoding="utf-8"
    )
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["a", "b", "c"],
         "interaction_kwargs": {"name": "x"}}
        for i in range(5)
    ]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        command = ["run", str(config), "--data", str(data), "--output", str(out)]
        assert main(command) == 0
        whole = out.read_text().splitlines()
        out.write_text("\n".join(whole[:2]) + "\n")
        import contextlib
        import io

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main([*command, "--resume", "--json"]) == 0
    finally:
        sys.path.remove(str(tmp_path))
    usage = json.loads(printed.getvalue())["interaction_usage"]
    assert (usage["episodes"], usage["requests"]) == (5, 5 * 6), usage
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (5 * 42, 5 * 12), usage
