"""``interactions serve --rewards final`` as a real process, driven by OpenEnv's own client;
and ``/schema`` publishing the reset observation as OpenEnv 0.10 servers do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

CONFIG = """\
default: logged
interaction:
  - name: logged
    class_name: serve_plugins.Logged
    config: {log: "{events}"}
"""


@pytest.fixture(scope="module")
def final(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("final"), CONFIG, "--rewards", "final")
    yield running
    assert running.stop() == 0, running.output()


def test_final_rewards_are_zero_until_the_last_step_which_carries_the_score(
    final: Server,
) -> None:
    with GenericEnvClient(base_url=final.url).sync() as env:
        env.reset(prompt="say x", interaction_kwargs={"ground_truth": "x"})
        steps = [env.step({"content": answer}) for answer in ("a", "b", "x")]
    assert [(s.reward, s.done) for s in steps] == [(0.0, False), (0.0, False), (0.25, True)]
    assert [s.observation["feedback"] for s in steps] == ["wrong: a", "wrong: b", "right"]
    assert steps[-1].observation["final_score"] == 0.25
    assert sum(s.reward or 0.0 for s in steps) == 0.25
    described = final.wait_sessions(0)
    assert described["started"] == described["finalized"] == 1
    assert final.get("/interactions")["rewards"] == "final"


def test_schema_includes_the_reset_observation(final: Server) -> None:
    schema = final.get("/schema")
    assert set(schema) >= {"action", "observation", "reset_observation", "state"}
    reset = schema["reset_observation"]["properties"]
    assert {"messages", "turn", "interaction", "done", "reward"} <= set(reset)


def test_turn_is_the_default_mode(tmp_path: Path) -> None:
    running = start_server(tmp_path, CONFIG)
    try:
        assert running.get("/interactions")["rewards"] == "turn"
        with GenericEnvClient(base_url=running.url).sync() as env:
            env.reset(prompt="say x", interaction_kwargs={"ground_truth": "x"})
            steps = [env.step({"content": answer}) for answer in ("a", "x")]
        assert [(s.reward, s.done) for s in steps] == [(0.0, False), (1.0, True)]
    finally:
        assert running.stop() == 0, running.output()
