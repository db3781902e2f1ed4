"""One group's counters: what an errored episode counts in, turn scores, the solving turn."""

from __future__ import annotations

import pytest

from interactions_core.runtime.record import error_kind
from interactions_core.runtime.stats import GroupStats


def test_an_errored_episode_counts_only_where_a_crash_belongs() -> None:
    group = GroupStats()
    errors = [{"where": "generate_response", "type": "ValueError"}, {"where": None}]
    group.add("error", 2, [1.0, 1.0], 1.0, errors, True, 1.0)
    assert (group.episodes, group.errors, group.turns, group.end_reasons) == (
        1,
        1,
        {2: 1},
        {"error": 1},
    )
    assert group.errors_by_kind == {"generate_response: ValueError": 1, "?: Error": 1}
    # a crash is not a score: nothing of the scores is counted
    assert group.final_score()["n"] == 0 and group.scored == 0
    assert group.score_by_turn() == {} and group.solved_by_turn() == {}


def test_turn_scores_average_over_the_episodes_that_reached_the_turn() -> None:
    group = GroupStats()
    group.add("exhausted", 1, [0.5], 0.5, [], True, 1.0)
    group.add("terminated", 3, [0.0, 1.0, 1.0], 1.0, [], True, 1.0)
    assert group.score_by_turn() == {1: 0.25, 2: 1.0, 3: 1.0}
    # the second episode is solved at turn 2 (its first full mark), once
    assert group.solved_at == {2: 1}
    assert group.solved_by_turn() == {1: 0.0, 2: 0.5, 3: 0.5}
    assert group.terminated == 1 and group.final_score()["mean"] == pytest.approx(0.75)


def test_the_threshold_decides_what_solves() -> None:
    group = GroupStats()
    group.add("exhausted", 2, [0.6, 0.9], 0.9, [], True, 0.8)
    assert group.solved_at == {2: 1}


def test_without_an_interaction_an_episode_is_not_scored() -> None:
    group = GroupStats()
    group.add("exhausted", 1, [1.0], 1.0, [], False, 1.0)
    assert group.scored == 0 and group.solved_at == {}
    assert group.score_by_turn() == {1: 1.0}  # the turn scores still count


def test_error_kind_names_where_and_what() -> None:
    assert error_kind({"where": "policy", "type": "TimeoutError"}) == "policy: TimeoutError"
    assert error_kind({}) == "?: Error"
