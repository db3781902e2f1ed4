"""usersim through ``interactions run`` against scripted servers on 127.0.0.1.

The user's path: a config naming the plugin, a JSONL dataset, the CLI in a
subprocess; the simulator and judge are a scripted server that records what it
was sent, the assistant is the replay policy or the openai policy on a second
scripted server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interactions_usersim import UserSimInteraction
from usersim_server import ScriptedServer
from usersim_support import (
    HOURS_GOAL,
    REFUND_GOAL,
    config_text,
    samples,
    script,
    write_jsonl,
)

from interactions_core.testing import Episode, check_interaction


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """The simulator and judge endpoint (one server playing both models)."""
    s = ScriptedServer(script)
    yield s
    s.close()


def run(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``interactions run config.yaml --data data.jsonl --output out.jsonl ARGS``; the records."""
    command = [sys.executable, "-m", "interactions_core", "run", "config.yaml"]
    command += ["--data", "data.jsonl", "--output", "out.jsonl", "--no-progress", *args]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300)
    out = folder / "out.jsonl"
    lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    return done, [json.loads(line) for line in lines]


def test_the_users_turns_are_the_simulators_and_the_scores_the_judges(
    tmp_path: Path, server: ScriptedServer
) -> None:
    (tmp_path / "config.yaml").write_text(config_text(server.url), encoding="utf-8")
    write_jsonl(tmp_path / "data.jsonl", samples(2))
    done, records = run(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    refund, hours = sorted(records, key=lambda r: r["sample_id"])
    # The refund user says one line, then ends with the marker after turn 2.
    assert [m["content"] for m in refund["messages"] if m["role"] == "user"][1:] == [
        "It is order 1234."
    ]
    assert refund["end_reason"] == "terminated" and refund["turns"] == 2
    assert refund["extras"][-1]["usersim"]["ended"] == "user_ended"
    assert refund["extras"][-1]["usersim"]["last_user_message"] == "Great, thank you!"
    # The replay assistant never says "Refund": the judge gives 3 of 10, on the last turn.
    assert refund["scores"] == [0.0, 0.3] and refund["final_score"] == 0.3
    # The hours user never ends it: max_turns (4) ends the episode, judged then.
    assert hours["turns"] == 4 and hours["extras"][-1]["usersim"]["ended"] == "max_turns"
    assert [m["content"] for m in hours["messages"] if m["role"] == "user"][1:] == [
        "I mean the store on Main Street.",
        "Still not what I asked.",
        "Never mind.",
    ]
    # The simulator saw its own lines as "assistant" and the assistant's as "user".
    sim = server.by_model("sim")
    assert len(sim) == 2 + 3
    first = sim[0]["messages"]
    assert first[0]["role"] == "system"
    assert (REFUND_GOAL in first[0]["content"]) != (HOURS_GOAL in first[0]["content"])
    assert "###END###" in first[0]["content"]  # the end marker is in the prompt
    assert [m["role"] for m in first[1:]] == ["assistant", "user"]
    assert first[2]["content"] == "How can I help? (attempt 1)"
    # The judge read the rubric and the transcript.
    judge = server.by_model("judge")
    assert len(judge) == 2
    assert all("9-10 when a refund is issued" in r["messages"][0]["content"] for r in judge)
    # Every request's tokens are in the records, as the server counted them.
    totals = [r["extras"][-1]["usersim"]["totals"] for r in records]
    assert sum(t["requests"] for t in totals) == len(server.requests) == 7
    assert sum(t["prompt_tokens"] for t in totals) == server.prompt_tokens
    assert sum(t["completion_tokens"] for t in totals) == server.completion_tokens
    assert all(t["latency_s"] > 0 for t in totals)
    # ... and in the run's summary, apart from the policy's (the replay policy has none).
    summary = json.loads(done.stdout)
    assert summary["usage"] is None
    calls = summary["interaction_usage"]
    assert calls["requests"] == 7 and calls["episodes"] == 2
    assert calls["prompt_tokens"] == server.prompt_tokens
    assert calls["completion_tokens"] == server.completion_tokens


def test_the_openai_policy_plays_the_assistant_on_a_second_server(
    tmp_path: Path, server: ScriptedServer
) -> None:
    assistant = ScriptedServer(script)
    try:
        (tmp_path / "config.yaml").write_text(
            config_text(server.url, judge_turns=True), encoding="utf-8"
        )
        write_jsonl(tmp_path / "data.jsonl", samples(4))
        done, records = run(
            tmp_path, "--policy", "openai", "--model", "assistant", "--base-url", assistant.url
        )
    finally:
        assistant.close()
    assert done.returncode == 0, done.stderr
    refunds = [r for r in records if r["sample_id"] in ("s0", "s2")]
    for record in refunds:
        # Asked for the order number, heard it, issued the refund; the user is satisfied.
        said = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert said == ["Could you give me your order number?", "Refund issued for order 1234."]
        assert record["scores"] == [0.7, 0.9]  # the per-turn judge, then the conversation's
        assert record["final_score"] == 0.9
        assert record["usage"]["completion_tokens"] > 0  # the policy's own accounting
    assert len(assistant.requests) == sum(r["turns"] for r in records)
    assert "final score mean" in done.stdout
    assert "interaction calls (requests the interactions made themselves):" in done.stdout


def test_an_unparseable_judge_reply_is_an_error_of_that_sample_keeping_the_text(
    tmp_path: Path,
) -> None:
    def rambling(body: dict[str, Any]) -> str:
        return "I would rather not say." if body["model"] == "judge" else script(body)

    judge = ScriptedServer(rambling)
    try:
        (tmp_path / "config.yaml").write_text(config_text(judge.url), encoding="utf-8")
        write_jsonl(tmp_path / "data.jsonl", samples(2))
        done, records = run(tmp_path)
    finally:
        judge.close()
    assert done.returncode == 1  # episodes errored
    for record in records:
        assert record["end_reason"] == "error" and record["final_score"] is None
        (error,) = record["errors"]
        assert error["type"] == "JudgeReplyError"
        assert "'I would rather not say.'" in error["message"]
        assert "the judge after assistant turn" in error["message"]


def test_usersim_conforms(server: ScriptedServer) -> None:
    config = {"base_url": server.url, "model": "sim", "judge_model": "judge", "max_turns": 3}
    check_interaction(
        UserSimInteraction,
        config,
        episodes=[
            Episode(["Hello!", "Sure."], {"goal": REFUND_GOAL, "rubric": "refund"}),
            Episode(["Hi", "Hm", "Ok"], {"goal": HOURS_GOAL}),
        ],
    )


def test_a_recording_pins_an_episode(tmp_path: Path, server: ScriptedServer) -> None:
    """Record live, then replay with no server at all: the same records."""
    write_jsonl(tmp_path / "data.jsonl", samples(2))
    recording = tmp_path / "replies.jsonl"
    (tmp_path / "config.yaml").write_text(
        config_text(server.url, record_file=str(recording)), encoding="utf-8"
    )
    done, live = run(tmp_path)
    assert done.returncode == 0, done.stderr
    server.close()  # nothing answers from here on
    (tmp_path / "config.yaml").write_text(
        config_text("http://127.0.0.1:9/v1", mode="replay", replay_file=str(recording)),
        encoding="utf-8",
    )
    done, replayed = run(tmp_path, "--overwrite")
    assert done.returncode == 0, done.stderr

    def essence(record: dict[str, Any]) -> tuple[Any, ...]:
        return record["sample_id"], record["messages"], record["scores"], record["end_reason"]

    assert sorted(map(essence, replayed)) == sorted(map(essence, live))
    assert len(recording.read_text(encoding="utf-8").splitlines()) == 7
