"""Resets nested too deeply, over HTTP and the WebSocket: a readable refusal, no session taken.

The JSON is written by hand so that depths no encoder would produce (100,000
levels) reach the server exactly as a hostile client sends them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from server_harness import Server, start_server
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("nesting"), CONFIG, "--max-sessions", "1")
    yield running
    assert running.stop() == 0, running.output()


PLAIN = '{"prompt":[{"role":"user","content":"hi"}],"interaction_kwargs":{"ground_truth":"1"}}'


def deep_json(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + '"x"' + "]" * depth
    return '{"a":' * depth + '"x"' + "}" * depth


def reset_body(depth: int, kind: str, where: str) -> str:
    deep = deep_json(depth, kind)
    if where == "content":
        message = '{"role":"user","content":' + deep + "}"
    else:
        message = '{"role":"user","content":"hi","extra":' + deep + "}"
    return '{"prompt":[' + message + '],"interaction_kwargs":{"ground_truth":"1"}}'


def post_reset(server: Server, body: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + "/reset", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def ws_reset(server: Server, body: str) -> dict[str, Any]:
    with connect(server.url.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        ws.send('{"type":"reset","data":' + body + "}")
        reply: dict[str, Any] = json.loads(ws.recv(timeout=30))
        return reply


def assert_free(server: Server, started: int) -> None:
    """No session was started by the refused reset, and the one slot still plays."""
    counts = server.wait_sessions(0)
    assert (counts["open"], counts["started"]) == (0, started), counts
    status, body = post_reset(server, PLAIN)
    assert status == 200, body
    assert server.wait_sessions(0)["started"] == started + 1


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("where", ["content", "extra"])
def test_a_prompt_nested_900_levels_is_refused_before_any_session(
    server: Server, kind: str, where: str
) -> None:
    body = reset_body(900, kind, where)
    started = server.sessions()["started"]
    status, answer = post_reset(server, body)
    assert status == 400, answer
    assert "prompt[0] nests lists and objects more than 100 levels deep" in answer["detail"]
    assert_free(server, started)
    started += 1
    reply = ws_reset(server, body)
    assert reply["type"] == "error", reply
    # over 200 levels, the /ws guard answers before OpenEnv's handler sees it
    assert "more than 200 levels deep" in reply["data"]["message"]
    assert "a prompt or interaction_kwargs may nest 100 levels" in reply["data"]["message"]
    assert_free(server, started)
    assert "Traceback" not in server.output()


def test_a_ws_prompt_nested_under_the_guards_bound_gets_the_runtimes_refusal(
    server: Server,
) -> None:
    started = server.sessions()["started"]
    reply = ws_reset(server, reset_body(150, "dict", "extra"))
    assert reply["type"] == "error", reply
    assert "prompt[0] nests lists and objects more than 100 levels deep" in str(reply)
    assert_free(server, started)


def test_a_body_too_deep_to_parse_is_refused_and_takes_no_session(server: Server) -> None:
    body = reset_body(5_000, "list", "content")
    started = server.sessions()["started"]
    status, answer = post_reset(server, body)
    assert status == 400, answer
    assert_free(server, started)
    reply = ws_reset(server, body)
    assert reply["type"] == "error" and "recursion" in reply["data"]["message"], reply
    assert_free(server, started + 1)
    assert "Traceback" not in server.output()


def test_a_body_nested_past_the_json_value_bound_is_refused_unparsed(server: Server) -> None:
    """100,000 levels are 100,000 lists: more values than a reset may hold (62,500)."""
    body = reset_body(100_000, "list", "content")
    started = server.sessions()["started"]
    status, answer = post_reset(server, body)
    assert status == 413 and "62,500 JSON values" in answer["detail"], answer
    assert_free(server, started)
    with connect(server.url.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        ws.send('{"type":"reset","data":' + body + "}")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert_free(server, started + 1)
    assert "Traceback" not in server.output()


def test_a_prompt_at_the_nesting_limit_is_played_and_sent(server: Server) -> None:
    body = reset_body(100, "dict", "content")
    status, answer = post_reset(server, body)
    assert status == 200, answer
    assert answer["observation"]["messages"][0]["content"] == json.loads(deep_json(100, "dict"))
    reply = ws_reset(server, body)
    assert reply["type"] == "observation", str(reply)[:300]
    assert server.wait_sessions(0)["open"] == 0
