"""rg/<dataset> interactions: the dataset's scorer, retries, config pass-through, clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from interactions_reasoning_gym import ReasoningGymInteraction, build_rows, wrong_answer

from interactions_core.errors import ConfigError, SessionError
from interactions_core.testing import Episode, SessionDriver, check_interaction

WRONG = f"<answer>{wrong_answer()}</answer>"


def make(dataset: str = "countdown", **config: Any) -> ReasoningGymInteraction:
    return ReasoningGymInteraction({"name": f"rg/{dataset}", "dataset": dataset, **config})


def rows(dataset: str = "countdown", count: int = 3, **options: Any) -> list[dict[str, Any]]:
    return list(build_rows(dataset, count=count, seed=11, **options))


def kwargs_of(row: dict[str, Any]) -> dict[str, Any]:
    return dict(row["extra_info"]["interaction_kwargs"])


async def test_reference_answer_solves_on_the_first_turn() -> None:
    driver = SessionDriver(make())
    for row in rows():
        transcript = await driver.play(row["responses"], **kwargs_of(row))
        assert transcript.scores == [1.0]
        assert transcript.terminated and transcript.final_score == 1.0
        assert transcript.results[0].content == "Correct!"
        assert transcript.results[0].extra["raw_score"] == 1.0


async def test_wrong_then_right_retries_with_feedback() -> None:
    row = rows()[0]
    driver = SessionDriver(make(max_attempts=3))
    transcript = await driver.play([WRONG, *row["responses"]], **kwargs_of(row))
    assert transcript.scores == [0.0, 1.0]
    assert "2 attempts left" in transcript.results[0].content
    assert not transcript.results[0].should_terminate
    assert transcript.final_score == 1.0


async def test_attempts_run_out_with_score_zero() -> None:
    row = rows()[0]
    driver = SessionDriver(make(max_attempts=2))
    transcript = await driver.play([WRONG] * 5, **kwargs_of(row))
    assert transcript.turns == 2 and transcript.terminated
    assert transcript.final_score == 0.0
    assert "no attempts are left" in transcript.results[-1].content


async def test_missing_answer_tag_is_explained() -> None:
    row = rows()[0]
    answer = row["reward_model"]["ground_truth"]
    driver = SessionDriver(make())
    transcript = await driver.play([answer], **kwargs_of(row))  # right answer, no tag
    assert "<answer>" in transcript.results[0].content and transcript.final_score == 0.0
    raw = SessionDriver(make(answer_format="raw"))
    assert (await raw.play([answer], **kwargs_of(row))).final_score == 1.0


async def test_raw_reward_passes_partial_credit_through() -> None:
    row = rows()[0]
    numbers = row["responses"][0]  # right numbers, wrong arithmetic: countdown gives 0.05
    wrong_sum = (
        "<answer>"
        + "+".join(str(n) for n in __import__("re").findall(r"\d+", numbers))
        + "</answer>"
    )
    driver = SessionDriver(make(reward="raw", max_attempts=1))
    transcript = await driver.play([wrong_sum], **kwargs_of(row))
    assert 0.0 < transcript.final_score < 1.0
    assert transcript.results[0].extra["raw_score"] == transcript.final_score


async def test_generation_options_pass_through() -> None:
    options = {"min_numbers": 3, "max_numbers": 3}
    row = rows(dataset_options=options)[0]
    assert kwargs_of(row)["dataset_options"] == options
    interaction = make()
    driver = SessionDriver(interaction)
    assert (await driver.play(row["responses"], **kwargs_of(row))).final_score == 1.0
    async with driver.session(**kwargs_of(row)) as session:
        state = interaction.session_state(session.instance_id)
        assert len(state.entry["metadata"]["numbers"]) == 3


async def test_config_defaults_serve_samples_with_only_an_index() -> None:
    row = list(build_rows("countdown", count=2, seed=5, size=50))[1]
    interaction = make(seed=5, size=50)
    transcript = await SessionDriver(interaction).play(row["responses"], index=1)
    assert transcript.final_score == 1.0


async def test_an_entry_can_be_given_instead_of_an_index() -> None:
    import reasoning_gym

    entry = reasoning_gym.create_dataset("basic_arithmetic", seed=3, size=5)[2]
    driver = SessionDriver(make("basic_arithmetic"))
    right = await driver.play([f"<answer>{entry['answer']}</answer>"], entry=entry)
    assert right.final_score == 1.0


async def test_a_crashing_scorer_counts_as_wrong() -> None:
    row = rows("prime_factorization", count=1)[0]
    driver = SessionDriver(make("prime_factorization", max_attempts=1))
    transcript = await driver.play(["<answer>x * y</answer>"], **kwargs_of(row))
    assert transcript.final_score == 0.0
    assert "scorer_error" in transcript.results[0].extra


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs the problem"),
        ({"index": -1}, "non-negative int"),
        ({"index": 10, "size": 5}, "outside the dataset"),
        ({"index": 0, "dataset_options": [1]}, "must be a mapping"),
        ({"index": 0, "dataset_options": {"min_numbers": 0}}, "refused the generation options"),
    ],
)
async def test_bad_samples_get_clear_session_errors(kwargs: dict[str, Any], message: str) -> None:
    interaction = make()
    with pytest.raises(SessionError, match=message):
        await interaction.start_interaction(None, **kwargs)
    assert interaction.open_sessions == 0


def test_bad_configs_fail_at_load_time() -> None:
    with pytest.raises(ConfigError, match="did you mean 'countdown'"):
        make("countdwn")
    with pytest.raises(ConfigError, match="max_attempts must be at least 1"):
        make(max_attempts=0)
    with pytest.raises(ConfigError, match="refused the generation options"):
        make(dataset_options={"no_such_option": 1})
    with pytest.raises(ConfigError, match="unknown option"):
        make(attempts=3)


def test_dataset_cache_is_bounded() -> None:
    from interactions_reasoning_gym.interaction import DATASET_CACHE

    interaction = make()
    for seed in range(DATASET_CACHE + 5):
        interaction._dataset(seed, 10, {})
    assert len(interaction._datasets) == DATASET_CACHE


@pytest.mark.parametrize("dataset", ["countdown", "basic_arithmetic", "arc_1d"])
def test_conformance(dataset: str) -> None:
    samples = rows(dataset, count=3)
    episodes = [
        Episode([WRONG, *row["responses"]], kwargs_of(row), row["prompt"][-1]["content"])
        for row in samples
    ]
    check_interaction(make(dataset).__class__, {"dataset": dataset}, episodes=episodes)
