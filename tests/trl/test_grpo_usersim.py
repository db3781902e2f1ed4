"""Two GRPO steps on CPU with the ``usersim`` interaction as TRL's environment.

The tiny model (``tiny.py``) answers through the ``answer`` tool; the simulated
user's conversation is one assistant turn long (``max_turns: 1``), so each answer
ends it and the judge, on the plugin's scripted server on 127.0.0.1, scores it:
9/10 for the right total, 3/10 for the wrong one. The reward TRL logs must be the
mean of those scores, and no session may stay open.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_grpo import dataset, train
from tiny import RIGHT

from interactions_core.integrations.trl import environment_factory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/interactions-usersim/tests"))
from usersim_server import ScriptedServer


def judge(body: dict[str, Any]) -> str:
    """The judge: 9 when the assistant gave the right total, else 3."""
    assert body["model"] == "judge", body["model"]
    transcript = body["messages"][-1]["content"]
    return "SCORE: 9" if f"#### {RIGHT}" in transcript else "SCORE: 3"


@pytest.fixture
def judge_server() -> Iterator[ScriptedServer]:
    running = ScriptedServer(judge)
    yield running
    running.close()


def test_grpo_with_a_simulated_user(tmp_path: Path, judge_server: ScriptedServer) -> None:
    config = {
        "interaction": [
            {
                "name": "gsm8k",  # the name the shared dataset's rows ask for
                "plugin": "usersim",
                "config": {
                    "base_url": judge_server.url,
                    "model": "sim",
                    "judge_model": "judge",
                    "max_turns": 1,
                },
            }
        ]
    }
    rows = dataset().map(
        lambda row: {"interaction_kwargs": {"name": "gsm8k", "goal": "Get the egg total right."}}
    )
    factory = environment_factory(config)
    history, rewards = train(factory, tmp_path, rows)
    assert len(history) == 2
    assert len(rewards) == 4 and set(rewards) <= {0.9, 0.3}
    logged = [entry["rewards/Recorded/mean"] for entry in history]
    assert logged == pytest.approx([sum(rewards[:2]) / 2, sum(rewards[2:]) / 2])
    assert len(judge_server.by_model("judge")) == len(rewards)  # one judged conversation each
    hub = factory._backend.hub
    assert hub.tracker.open == 0 and hub.open_sessions == 0
