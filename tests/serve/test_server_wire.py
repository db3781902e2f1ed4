"""Observations that UTF-8 JSON cannot carry: escaped, or the episode ends and its session
is given back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

CONFIG = """\
default: odd
interaction:
  - name: odd
    class_name: odd_plugins.Surrogate
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path, CONFIG, "--max-sessions", "1")
    yield running
    assert running.stop() == 0, running.output()


def test_a_lone_surrogate_is_escaped_and_the_score_arrives(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(prompt=[{"role": "user", "content": "hi \udc80"}])
        first = env.step({"content": "a"})
        assert first.observation["feedback"] == "odd \\ud800"
        assert first.observation["messages"][0]["content"] == "hi \\udc80"
        second = env.step({"content": "b"})
        assert (second.done, second.reward, second.observation["final_score"]) == (True, 1.0, 0.5)
    assert server.wait_sessions(0)["open"] == 0


def test_a_lone_surrogate_in_a_messages_own_key_is_escaped_too(server: Server) -> None:
    # The observation's check wrote a message's own key lossily instead of failing, and
    # OpenEnv's reply then failed on it: over /ws every answer was a serialiser error
    # while the plugin judged every turn; over HTTP each reset was a 500 and a traceback.
    prompt = [{"role": "user", "content": "hi", "\ud800": 1}]
    with GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(prompt=prompt)
        assert first.observation["messages"][0] == {"role": "user", "content": "hi", "\\ud800": 1}
        env.step({"content": "a"})
        second = env.step({"content": "b"})
        assert (second.done, second.reward) == (True, 1.0)
    status, body = server.post("/reset", {"prompt": prompt})
    assert status == 200, body
    assert server.wait_sessions(0)["open"] == 0
    assert "Traceback" not in server.output()


def test_a_prompt_too_deep_to_send_gives_its_session_back(server: Server) -> None:
    nested: Any = "x"
    for _ in range(900):
        nested = {"a": nested}
    with GenericEnvClient(base_url=server.url).sync() as env:
        with pytest.raises(Exception) as raised:
            env.reset(prompt=[{"role": "user", "content": "deep", "extra": nested}])
        assert "Traceback" not in str(raised.value)
    assert server.wait_sessions(0)["open"] == 0
    with GenericEnvClient(base_url=server.url).sync() as env:  # --max-sessions 1: free again
        env.reset(prompt=[{"role": "user", "content": "shallow"}])
    assert server.wait_sessions(0)["open"] == 0


FLOOD = """\
default: flood
interaction:
  - name: flood
    class_name: odd_plugins.Flood
    config: {size: 600}
"""


def test_a_huge_feedback_ends_the_episode_with_an_error_not_a_huge_frame(
    tmp_path: Path,
) -> None:
    """The feedback would be sent twice (messages and feedback): 1,203 characters, over 1,000.

    (A plugin answering 50 MB under the default bound once made a 105 MB frame.)
    """
    running = start_server(tmp_path, FLOOD, "--max-sessions", "1", "--max-episode-chars", "1000")
    try:
        with GenericEnvClient(base_url=running.url).sync() as env:
            env.reset(prompt=[{"role": "user", "content": "hi"}])
            with pytest.raises(Exception, match=r"observation to 1,203 characters, over"):
                env.step({"content": "a"})
            assert running.wait_sessions(0)["open"] == 0
            env.reset(prompt=[{"role": "user", "content": "again"}])  # the connection plays on
    finally:
        assert running.stop() == 0, running.output()
