"""The parts of usersim that need no server: judge replies, prompts, options, recordings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from interactions_usersim import JudgeReplyError, UserSimInteraction, parse_score
from interactions_usersim.backends import ModelCallError, ReplayBackend
from interactions_usersim.prompts import render, simulator_messages, transcript

from interactions_core import ConfigError


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("SCORE: 7", 0.7),
        ("The answer was helpful.\nscore = 10", 1.0),
        ("SCORE: <a number from 0 to 10>\nSCORE: 2.5", 0.25),
        ("**Score:** 0", 0.0),
        ("8", 0.8),
        ("6/10", 0.6),
        ("SCORE: 3/5", 0.6),  # out of 5, whatever judge_scale says (it was read as 0.3)
        ("4/5", 0.8),
        ("SCORE: 0.8/1", 0.8),
        ("  **7**.  ", 0.7),
    ],
)
def test_a_judge_reply_is_read_as_a_bounded_number(reply: str, expected: float) -> None:
    assert parse_score(reply, 10.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    "reply", ["I cannot grade this.", "", "SCORE: 11", "SCORE: -1", "SCORE: 6/5", "3/0"]
)
def test_a_reply_without_a_score_in_range_is_an_error_keeping_the_reply(reply: str) -> None:
    with pytest.raises(JudgeReplyError) as caught:
        parse_score(reply, 10.0, "the judge after assistant turn 2")
    assert caught.value.reply == reply
    assert repr(reply) in str(caught.value)
    assert "assistant turn 2" in str(caught.value)


@pytest.mark.parametrize(
    "reply",
    [" " * 200_000 + "x", "score:" + " " * 200_000 + "x", "7" + " " * 200_000 + "x", "*" * 200_000],
)
def test_a_reply_of_long_runs_is_read_in_linear_time(reply: str) -> None:
    """A judge that ran to its token limit on spaces: 20,000 of them held the event
    loop 6 s (quadratic), so 200,000 took minutes. They take milliseconds now; the
    bound, 0.5 s of CPU time, is far from both, so a loaded machine cannot fail it."""
    import time

    started = time.process_time()
    with pytest.raises(JudgeReplyError):
        parse_score(reply, 10.0)
    assert time.process_time() - started < 0.5


def test_the_simulator_sees_the_conversation_from_the_users_side() -> None:
    conversation = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "tool", "content": "lookup result"},
    ]
    assert simulator_messages("Be the user.", conversation) == [
        {"role": "system", "content": "Be the user."},
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": "Hello"},
    ]
    assert transcript(conversation) == "USER: Hi\n\nASSISTANT: Hello"


def test_a_template_field_the_sample_lacks_names_the_key_and_the_fix() -> None:
    assert render("goal: {goal}", {"goal": "x"}, "system_template") == "goal: x"
    with pytest.raises(ValueError, match=r"system_template uses \{order\}.*interaction_kwargs"):
        render("order {order}", {"goal": "x"}, "system_template")
    with pytest.raises(ValueError, match=r"literal braces as \{\{"):
        render("broken {", {}, "judge_template")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "mode: live needs the simulator's model"),
        ({"mode": "replay"}, "mode: replay needs replay_file"),
        ({"model": "m", "max_turn": 3}, "did you mean 'max_turns'"),
        ({"model": "m", "judge_scale": 0}, "judge_scale must be positive"),
        ({"model": "m", "mode": "recorded"}, "mode"),
    ],
)
def test_bad_options_fail_when_the_config_is_loaded(config: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        UserSimInteraction(config)


def test_an_api_key_variable_that_is_not_set_is_refused_up_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("USERSIM_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match=r"\$USERSIM_TEST_KEY, which is not set"):
        UserSimInteraction({"model": "m", "api_key_env": "USERSIM_TEST_KEY"})


def test_a_sample_without_a_goal_is_refused_with_the_fix() -> None:
    interaction = UserSimInteraction({"model": "m"})
    with pytest.raises(ValueError, match=r"interaction_kwargs\.goal"):
        interaction.new_session(persona="a pirate")


async def test_a_recording_answers_by_call_goal_and_turn(tmp_path: Path) -> None:
    lines = [
        {"call": "simulator", "goal": "g", "turn": 1, "reply": "first"},
        {"call": "simulator", "goal": "g", "turn": 2, "reply": "second"},
        {"call": "judge", "goal": "g", "reply": "SCORE: 5"},
    ]
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    backend = ReplayBackend(str(path))
    assert await backend.ask("simulator", "g", 2, []) == ("second", None)
    assert await backend.ask("judge", "g", 7, []) == ("SCORE: 5", None)  # any turn
    with pytest.raises(ModelCallError, match=r"no simulator reply after assistant turn 3"):
        await backend.ask("simulator", "g", 3, [])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json\n", r"replies.jsonl:1 is not JSON"),
        ('{"call": "user", "goal": "g", "reply": "x"}\n', "call must be one of"),
        ('{"call": "judge", "goal": "g", "turn": 0, "reply": "x"}\n', "turn must be a positive"),
    ],
)
def test_a_bad_recording_line_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "replies.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        ReplayBackend(str(path))


def test_a_missing_recording_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="record one with mode: live and record_file"):
        UserSimInteraction({"mode": "replay", "replay_file": str(tmp_path / "none.jsonl")})
