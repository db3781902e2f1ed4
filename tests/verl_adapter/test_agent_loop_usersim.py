"""The ``usersim`` interaction in verl's agent loop: the user is a model on its own endpoint.

verl's own rollout workers run the batch (the legacy one and the default v1 one);
the assistant is the harness's scripted token server, the simulated user and the
judge are the plugin's scripted chat server on 127.0.0.1. The refund customer gives the order number
(the simulator's line, appended as a user turn outside the response mask) and
ends the conversation once the refund is issued; the judge scores it 9/10, which
is the sample's reward.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import ScriptedServer, make_worker, run_batch, trainer_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/interactions-usersim/tests"))
from usersim_server import ScriptedServer as ChatServer
from usersim_support import REFUND_GOAL, script

pytestmark = pytest.mark.both_workers


@pytest.fixture
def simulator() -> Iterator[ChatServer]:
    running = ChatServer(script)
    yield running
    running.close()


def test_a_simulated_user_talks_to_the_policy_and_the_judge_gives_the_reward(
    tmp_path: Path, model_dir: Path, tokenizer: Any, simulator: ChatServer
) -> None:
    config = tmp_path / "interactions.yaml"
    config.write_text(
        "interaction:\n  - name: support\n    plugin: usersim\n    config:\n"
        f"      base_url: {simulator.url}\n      model: sim\n      judge_model: judge\n"
        "      max_turns: 4\n"
    )
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
    )
    replies = ["Could you give me your order number?", "Refund issued for order 1234."]
    model = ScriptedServer(tokenizer, lambda prompt, n: replies[min(n, 1)])
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=4), model)
    row = {
        "prompt": [{"role": "user", "content": "Hi, I need help with something."}],
        "extra_info": {"interaction_kwargs": {"name": "support", "goal": REFUND_GOAL}},
    }
    out = run_batch(worker, [row])
    assert list(out.non_tensor_batch["interaction_end_reason"]) == ["terminated"]
    assert list(out.non_tensor_batch["turn_scores"][0]) == [0.0, 0.9]
    assert out.batch["rm_scores"].sum().item() == pytest.approx(0.9)
    assert len(model.replies) == 2
    # The simulator's line reached the policy as the user's turn.
    assert "It is order 1234." in tokenizer.decode(model.requests[1]["prompt_ids"])
    assert len(simulator.by_model("sim")) == 2 and len(simulator.by_model("judge")) == 1
