"""``interactions serve`` with the ``usersim`` interaction: an OpenEnv client is the assistant.

The simulated user and the judge are the plugin's scripted server on 127.0.0.1;
the assistant is the test, through OpenEnv's own client. The refund customer
hears "Could you give me your order number?", answers with the order number
(the simulator's scripted line, as the step's feedback), then ends the
conversation when the refund is issued, judged 9/10.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/interactions-usersim/tests"))
from usersim_server import ScriptedServer
from usersim_support import REFUND_GOAL, script


@pytest.fixture
def simulator() -> Iterator[ScriptedServer]:
    running = ScriptedServer(script)
    yield running
    running.close()


@pytest.fixture
def server(tmp_path: Path, simulator: ScriptedServer) -> Iterator[Server]:
    config = (
        "interaction:\n  - name: support\n    plugin: usersim\n    config:\n"
        f"      base_url: {simulator.url}\n      model: sim\n      judge_model: judge\n"
        "      max_turns: 4\n"
    )
    running = start_server(tmp_path, config)
    yield running
    assert running.stop() == 0, running.output()


def test_an_openenv_client_plays_the_assistant_to_a_simulated_user(
    server: Server, simulator: ScriptedServer
) -> None:
    opening = [{"role": "user", "content": "Hi, I need help with something."}]
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(prompt=opening, interaction_kwargs={"name": "support", "goal": REFUND_GOAL})
        first = env.step({"content": "Could you give me your order number?"})
        assert (first.done, first.reward) == (False, 0.0)
        assert first.observation["feedback"] == "It is order 1234."  # the simulated user
        last = env.step({"content": "Refund issued for order 1234."})
        assert last.done is True
        assert last.reward == 0.9 and last.observation["final_score"] == 0.9
    counts = server.wait_sessions(0)
    assert counts["started"] == counts["finalized"] == 1
    # The simulator saw the client's replies as the other side of its conversation.
    (first_call, second_call) = simulator.by_model("sim")
    assert first_call["messages"][-1] == {
        "role": "user",
        "content": "Could you give me your order number?",
    }
    assert second_call["messages"][-2] == {"role": "assistant", "content": "It is order 1234."}
    assert len(simulator.by_model("judge")) == 1
