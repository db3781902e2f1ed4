"""The gsm8k interaction through verl's async lifecycle."""

from __future__ import annotations

import asyncio
import re
from importlib import metadata
from typing import Any

import attrs
import pytest
from interactions_gsm8k import Gsm8kConfig, Gsm8kInteraction

from interactions_core import InteractionResult
from interactions_core.errors import ConfigError, SessionError

CORRECT = "Your response is correct!"
INCORRECT = "Your response is incorrect! You need to reflect on your answer and try again."


def chat(*turns: Any) -> list[dict[str, Any]]:
    """A conversation: a user question, then alternating assistant/user turns."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "How many eggs?"}]
    for i, content in enumerate(turns):
        messages.append({"role": "assistant" if i % 2 == 0 else "user", "content": content})
    return messages


async def turn(
    interaction: Gsm8kInteraction, sid: str, messages: list[dict[str, Any]]
) -> InteractionResult:
    """One turn's result, read the way the runtime reads it (a plain 4-tuple checked and typed)."""
    return InteractionResult.coerce(await interaction.generate_response(sid, messages))


@pytest.fixture
def strict() -> Gsm8kInteraction:
    return Gsm8kInteraction({"name": "gsm8k"})


@pytest.fixture
def flexible() -> Gsm8kInteraction:
    return Gsm8kInteraction({"name": "gsm8k_flexible", "method": "flexible"})


async def test_correct_answer_terminates_with_score_one(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s1", ground_truth="18")
    result = await strict.generate_response(sid, chat("9 * 2 = 18\n#### 18"))
    assert isinstance(result, InteractionResult)  # typed, and still unpacks as verl's 4-tuple
    should_terminate, content, score, extra = result
    assert should_terminate is True
    assert content == CORRECT
    assert score == 1.0 and type(score) is float
    assert dict(extra) == {}
    assert await strict.calculate_score(sid) == 1.0


async def test_wrong_answer_asks_to_try_again(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s1", ground_truth="18")
    should_terminate, content, score, extra = await strict.generate_response(sid, chat("#### 17"))
    assert should_terminate is False
    assert content == INCORRECT
    assert score == 0.0 and type(score) is float
    assert dict(extra) == {}


async def test_a_reply_is_a_shared_constant_no_caller_can_change(
    strict: Gsm8kInteraction,
) -> None:
    import copy
    import json
    import pickle

    a = await strict.start_interaction("a", ground_truth=18)
    b = await strict.start_interaction("b", ground_truth=18)
    first = await turn(strict, a, chat("#### 18"))
    second = await turn(strict, b, chat("#### 18"))
    # The same reply object every time: built once, immutable, its extra read-only.
    assert first is second and isinstance(first.extra, dict) and first.extra == {}
    with pytest.raises(TypeError, match=r"extra=\{\.\.\.\}"):
        first.extra["seen_by_trainer"] = True
    assert second.extra == {} and dict(second.extra) == {}
    assert pickle.loads(pickle.dumps(second)) == second
    assert copy.deepcopy(second) == second
    assert json.loads(json.dumps(second)) == [True, "Your response is correct!", 1.0, {}]


async def test_only_the_last_assistant_message_counts(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s", ground_truth=18)
    wrong_after_right = chat("#### 18", INCORRECT, "#### 17")
    assert (await turn(strict, sid, wrong_after_right)).score == 0.0
    right_after_wrong = chat("#### 17", INCORRECT, "#### 18")
    assert (await turn(strict, sid, right_after_wrong)).score == 1.0
    # Messages after the last assistant message (e.g. a trailing user turn) are skipped.
    trailing_user = [*chat("#### 18"), {"role": "user", "content": "#### 17"}]
    assert (await turn(strict, sid, trailing_user)).score == 1.0


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": "9 * 2 = 18\n"}, {"type": "text", "text": "#### 18"}],
        ["9 * 2 = 18\n", "#### 18"],
        [
            {"type": "image_url", "image_url": {"url": "data:..."}},
            {"type": "text", "text": "#### 18"},
        ],
        ("#### ", {"type": "text", "text": "18"}),
    ],
)
async def test_list_of_parts_content(strict: Gsm8kInteraction, content: Any) -> None:
    sid = await strict.start_interaction("s", ground_truth=18)
    assert (await turn(strict, sid, chat(content))).content == CORRECT


@pytest.mark.parametrize("content", [None, [], [{"type": "image_url"}], 18, ""])
async def test_content_without_text_scores_zero(strict: Gsm8kInteraction, content: Any) -> None:
    sid = await strict.start_interaction("s", ground_truth=18)
    result = await turn(strict, sid, chat(content))
    assert result == (False, INCORRECT, 0.0, result.extra)
    assert type(result.score) is float


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "user", "content": "#### 18"}],
        [{"role": "system", "content": "be brief"}, {"role": "tool", "content": "#### 18"}],
    ],
)
async def test_no_assistant_message_scores_zero(
    strict: Gsm8kInteraction, messages: list[dict[str, Any]]
) -> None:
    sid = await strict.start_interaction("s", ground_truth=18)
    result = await turn(strict, sid, messages)
    assert (result.should_terminate, result.content, result.score) == (False, INCORRECT, 0.0)


@pytest.mark.parametrize("ground_truth", ["18", " 18\n", 18, 18.0])
async def test_ground_truth_types(strict: Gsm8kInteraction, ground_truth: Any) -> None:
    sid = await strict.start_interaction("s", ground_truth=ground_truth)
    assert (await turn(strict, sid, chat("#### 18"))).score == 1.0


async def test_ground_truth_with_thousands_separator(flexible: Gsm8kInteraction) -> None:
    sid = await flexible.start_interaction("s", ground_truth="1,234")
    assert (await turn(flexible, sid, chat("It is 1,234."))).score == 1.0


async def test_missing_ground_truth_never_matches(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s")
    result = await turn(strict, sid, chat("#### 18"))
    assert (result.score, type(result.score)) == (0.0, float)


async def test_bad_ground_truth_type_fails_at_start(strict: Gsm8kInteraction) -> None:
    with pytest.raises(TypeError, match="ground_truth"):
        await strict.start_interaction("s", ground_truth=[18])
    assert strict.open_sessions == 0


async def test_strict_and_flexible_differ(
    strict: Gsm8kInteraction, flexible: Gsm8kInteraction
) -> None:
    messages = chat("Janet makes $18.")
    for interaction, expected in ((strict, 0.0), (flexible, 1.0)):
        sid = await interaction.start_interaction("s", ground_truth=18)
        assert (await turn(interaction, sid, messages)).score == expected


async def test_calculate_score_tracks_the_last_turn(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s", ground_truth=18)
    before = await strict.calculate_score(sid)
    assert (before, type(before)) == (0.0, float)
    await strict.generate_response(sid, chat("#### 18"))
    assert await strict.calculate_score(sid) == 1.0
    await strict.generate_response(sid, chat("#### 18", INCORRECT, "#### 7"))
    after = await strict.calculate_score(sid)
    assert (after, type(after)) == (0.0, float)


async def test_sessions_are_isolated(strict: Gsm8kInteraction) -> None:
    """Two concurrent sessions with different references do not see each other."""

    async def episode(sid: str, ground_truth: int, answer: str) -> tuple[float, float]:
        await strict.start_interaction(sid, ground_truth=ground_truth)
        await asyncio.sleep(0)  # let the other session start in between
        result = await turn(strict, sid, chat(f"#### {answer}"))
        await asyncio.sleep(0)
        return result.score, await strict.calculate_score(sid)

    results = await asyncio.gather(
        episode("a", 18, "18"), episode("b", 42, "18"), episode("c", 42, "42")
    )
    assert results == [(1.0, 1.0), (0.0, 0.0), (1.0, 1.0)]
    assert strict.open_sessions == 3


async def test_reusing_a_live_instance_id_is_an_error(strict: Gsm8kInteraction) -> None:
    await strict.start_interaction("s", ground_truth=18)
    with pytest.raises(SessionError, match="'s'"):
        await strict.start_interaction("s", ground_truth=42)
    # The live session was not overwritten.
    assert (await turn(strict, "s", chat("#### 18"))).score == 1.0
    await strict.finalize_interaction("s")
    assert await strict.start_interaction("s", ground_truth=42) == "s"


async def test_finalize_drops_the_state(strict: Gsm8kInteraction) -> None:
    sids = [await strict.start_interaction(ground_truth=i) for i in range(3)]
    assert len(set(sids)) == 3  # fresh ids when none is given
    assert strict.open_sessions == 3
    for sid in sids:
        await strict.finalize_interaction(sid)
    assert strict.open_sessions == 0
    await strict.finalize_interaction(sids[0])  # finalizing twice is harmless
    with pytest.raises(SessionError):
        await strict.generate_response(sids[0], chat("#### 0"))
    with pytest.raises(SessionError):
        await strict.calculate_score(sids[0])


async def test_unknown_session_is_an_error(strict: Gsm8kInteraction) -> None:
    with pytest.raises(SessionError, match="start_interaction"):
        await strict.generate_response("never-started", chat("#### 18"))


async def test_verl_interaction_kwargs_are_accepted(strict: Gsm8kInteraction) -> None:
    """verl passes the whole ``interaction_kwargs`` (name, query, ...) to start."""
    kwargs = {"name": "gsm8k", "query": "How many eggs?", "ground_truth": "18"}
    sid = await strict.start_interaction("s", **kwargs)
    assert (await turn(strict, sid, chat("#### 18"))).score == 1.0


async def test_respond_path_matches_generate_response(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s", ground_truth=18)
    state = strict.session_state(sid)
    # Plain functions (they await nothing), called directly by the base class.
    assert strict.respond(state, chat("#### 18")) == (True, CORRECT, 1.0, {})
    assert strict.score(state) == 1.0
    assert strict.respond(state, chat("#### 1")) == (False, INCORRECT, 0.0, {})
    assert strict.score(state) == 0.0


async def test_session_state_is_small(strict: Gsm8kInteraction) -> None:
    sid = await strict.start_interaction("s", ground_truth="1,234")
    state = strict.session_state(sid)
    assert not hasattr(state, "__dict__")
    assert state.ground_truth == "1234"  # normalised once, at start


# -- configuration -----------------------------------------------------------------


def test_default_config() -> None:
    interaction = Gsm8kInteraction()
    assert interaction.name == "gsm8k"
    assert interaction.settings == Gsm8kConfig(method="strict")


def test_config_name_is_the_alias() -> None:
    interaction = Gsm8kInteraction({"name": "math", "method": "flexible"})
    assert interaction.name == "math"
    assert interaction.settings.method == "flexible"


def test_unknown_method_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=re.escape("'strict' | 'flexible'")) as info:
        Gsm8kInteraction({"name": "gsm8k", "method": "fuzzy"})
    assert "fuzzy" in str(info.value)


def test_unknown_option_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match="allowed options: method") as info:
        Gsm8kInteraction({"name": "gsm8k", "mode": "flexible"})
    assert "'mode'" in str(info.value)


def test_schema_validates_on_its_own() -> None:
    with pytest.raises(ValueError, match="method"):
        Gsm8kConfig(method="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Gsm8kConfig().method = "flexible"  # type: ignore[misc]


def test_schema_documents_its_option() -> None:
    (field,) = attrs.fields(Gsm8kConfig)
    assert field.name == "method"
    assert "300" in field.metadata["help"]


# -- packaging ---------------------------------------------------------------------


def test_registered_under_the_entry_point_group() -> None:
    try:
        dist = metadata.distribution("interactions-gsm8k")
    except metadata.PackageNotFoundError:
        pytest.skip("interactions-gsm8k is not installed")
    (entry_point,) = [
        ep for ep in dist.entry_points if ep.group == "interactions_core.interactions"
    ]
    assert (entry_point.name, entry_point.value) == ("gsm8k", "interactions_gsm8k:Gsm8kInteraction")
    assert entry_point.load() is Gsm8kInteraction
    assert dist.version == "0.1.0"
