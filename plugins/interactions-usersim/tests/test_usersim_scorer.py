"""A scoring function in code in place of the judge model (``scorer: module:function``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from interactions_usersim import UserSimInteraction
from usersim_server import ScriptedServer
from usersim_support import samples, script

from interactions_core.runtime import ReplayPolicy, run_episodes


def play(scorer: str, **options: Any) -> tuple[Any, ScriptedServer]:
    server = ScriptedServer(script)
    try:
        config = {"base_url": server.url, "model": "sim", "scorer": scorer, **options}
        interaction = UserSimInteraction({"name": "support", **config})
        rows = samples(2)
        for row in rows:
            row["responses"] = ["Could you give me your order number?", "Refund issued."] * 2
        summary = asyncio.run(
            run_episodes(rows, ReplayPolicy(), {"support": interaction}, keep_records=True)
        )
    finally:
        server.close()
    return summary, server


def test_the_scorer_scores_and_the_judge_is_never_asked() -> None:
    summary, server = play("usersim_support:refund_scorer", judge_turns=True)
    refund, hours = sorted(summary.records, key=lambda r: r.sample_id)
    assert refund.scores == [0.0, 1.0] and refund.final_score == 1.0
    assert hours.final_score == 1.0 and len(hours.scores) == 4  # the refund was issued too
    assert server.by_model("sim") and not [r for r in server.requests if r["model"] != "sim"]


def test_a_score_out_of_range_is_an_error_of_the_sample() -> None:
    summary, _ = play("usersim_support:out_of_range_scorer")
    for record in summary.records:
        (error,) = record.errors
        assert "scorer usersim_support:out_of_range_scorer returned 7.0" in error["message"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "must be 'package.module:function'"),
        ("no_such_module_xyz:f", "cannot import the scorer's module"),
        ("usersim_support:nothing_here", "has no function 'nothing_here'"),
    ],
)
def test_a_bad_scorer_fails_when_the_interaction_is_built(target: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        UserSimInteraction({"model": "sim", "scorer": target})
