"""The server's front door on 127.0.0.1: token before any session, Origin and Host, idle
connections, a non-ASCII token, and OpenEnv routes the server does not offer."""

from __future__ import annotations

import base64
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

CONFIG = """\
default: weather
interaction:
  - name: weather
"""
TOKEN = "pässwörd-ß"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Server]:
    running = start_server(
        tmp_path,
        CONFIG,
        "--max-sessions",
        "2",
        "--idle-timeout",
        "1",
        env={"INTERACTIONS_SERVE_TOKEN": TOKEN, "ENABLE_WEB_INTERFACE": "true"},
    )
    yield running
    assert running.stop() == 0, running.output()


def handshake(
    server: Server, headers: dict[str, str] | None = None, path: str = "/ws"
) -> tuple[int, socket.socket]:
    """Open a raw WebSocket handshake to ``path``; return the status and the open socket."""
    port = int(server.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    fields = {
        "Host": f"127.0.0.1:{port}",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
    }
    fields.update(headers or {})
    request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    sock.sendall((request + "\r\n").encode())
    status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), sock


def test_mcp_is_not_mounted_so_it_allocates_nothing(guarded: Server) -> None:
    for _ in range(8):
        status, body = guarded.post("/mcp", {"method": "openenv/session/create"})
        assert status in (404, 405), (status, body)
    assert guarded.get("/interactions")["sessions"]["open"] == 0
    with GenericEnvClient(base_url=guarded.url).sync() as env:
        result = env.reset(interaction_kwargs={"name": "weather"}, token=TOKEN)
        assert result.observation["interaction"] == "weather"
    assert "does not offer OpenEnv's web interface" in guarded.output()


def test_mcp_messages_over_the_websocket_are_refused(guarded: Server) -> None:
    # OpenEnv answers mcp messages on /ws: session/create handed a connection its session
    # id, and session/close ended the session it named from any connection, one without
    # the token included; the token holder's next step then read "the episode ended with
    # an error".
    import json

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = guarded.url.replace("http://", "ws://") + "/ws"
    with GenericEnvClient(base_url=guarded.url).sync() as env:
        env.reset(interaction_kwargs={"name": "weather"}, token=TOKEN)
        for method in ("openenv/session/create", "openenv/session/close", "escaped"):
            with connect(url) as intruder:
                request = {"method": method, "params": {"session_id": "any"}}
                text = json.dumps({"type": "mcp", "data": request})
                if method == "escaped":  # JSON spells the type with an escape just as well
                    text = text.replace('"mcp"', '"\\u006dcp"')
                intruder.send(text)
                with pytest.raises(ConnectionClosed) as closed:
                    intruder.recv(timeout=10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
                assert "serves no MCP" in closed.value.rcvd.reason
        # a step whose text mentions mcp is a step, and the token holder plays on
        result = env.step({"content": "the weather in mcp city"})
        assert "observation" in str(type(result)).lower() or result.observation
    assert "closed a WebSocket: this server serves no MCP" in guarded.output()


def test_a_binary_frame_of_json_is_read_as_text(guarded: Server) -> None:
    # OpenEnv reads text frames only: a binary one was answered "'text'" and the
    # connection closed, its open episode finalized.
    import json

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = guarded.url.replace("http://", "ws://") + "/ws"
    with connect(url) as ws:
        reset = {"type": "reset", "data": {"interaction_kwargs": {"name": "weather"}}}
        ws.send(json.dumps({**reset, "data": {**reset["data"], "token": TOKEN}}).encode())
        answer = json.loads(ws.recv(timeout=10))
        assert answer["type"] == "observation", answer
        ws.send(b"\xff\xfe not text")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007


def echoed(levels: int, kind: str) -> str:
    """A ``kind`` message with a field OpenEnv does not know, nested ``levels`` deep."""
    data = ', "data": {"content": "x"}' if kind == "step" else ""
    return '{"type": "' + kind + '"' + data + ', "zz": ' + "[" * levels + "]" * levels + "}"


def test_a_message_that_is_not_an_object_is_answered_and_the_connection_serves_on(
    guarded: Server,
) -> None:
    # OpenEnv's handler answered "'list' object has no attribute 'get'" (or a recursion
    # error, for a message nested 3,000 deep) and closed the connection, its episode
    # finalized.
    import json

    from websockets.sync.client import connect

    url = guarded.url.replace("http://", "ws://") + "/ws"
    reset = {"type": "reset", "data": {"interaction_kwargs": {"name": "weather"}, "token": TOKEN}}
    deep = '{"type": "step", "data": {"content": "x", "z": ' + "[" * 3000 + "]" * 3000 + "}}"
    with connect(url) as ws:
        ws.send(json.dumps(reset))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        for wrong, told in [
            ("[]", "must be a JSON object"),
            ("null", "must be a JSON object"),
            ('"x"', "must be a JSON object"),
            (deep, "too deep for the JSON reader (its recursion limit)"),
            # JSON to Python's reader; a first-character test had let them through to
            # OpenEnv's handler, which closed the connection and finalized the episode
            ("NaN", "must be a JSON object"),
            ("Infinity", "must be a JSON object"),
            (" NaN", "must be a JSON object"),
            ("-Infinity", "must be a JSON object"),
            # deep enough that OpenEnv's echo of the invalid message (pydantic's JSON
            # writer gives up near 255 levels) failed, and it closed the connection
            (echoed(300, "step"), "more than 200 levels deep"),
            (echoed(900, "state"), "more than 200 levels deep"),
            # a lone surrogate OpenEnv would echo in its refusal, which cannot be
            # written as UTF-8: its handler closed the connection
            ('{"type": "state", "note": "\\ud800"}', "a state message holds only type"),
            ('{"type": "reset", "data": "\\ud800"}', "data must be a JSON object"),
            ('{"type": "close", "data": "\\ud800"}', "a close message holds only type"),
            # a type that is a list or an object: the guard's lookup of it raised
            # ("unhashable type"), and OpenEnv's handler closed the connection
            ('{"type": [], "x": "caf\\u00e9 \\ud83d\\ude00"}', "Unknown message type: []"),
            ('{"type": {}, "x": "\\ud800"}', "Unknown message type: {}"),
            ('{"type": "zz\\ud800zz"}', "unknown message type 'zz\\ud800zz'"),
        ]:
            ws.send(wrong)
            answer = json.loads(ws.recv(timeout=10))
            assert answer["type"] == "error" and told in answer["data"]["message"], answer
        ws.send(json.dumps({"type": "step", "data": {"content": "What is the weather?"}}))
        answer = json.loads(ws.recv(timeout=10))
        assert answer["type"] == "observation", answer  # the episode went on
    assert guarded.wait_sessions(0)["open"] == 0


def test_a_non_ascii_token_is_compared_as_bytes(guarded: Server) -> None:
    status, body = guarded.post("/reset", {"token": "wrong"})
    assert status == 401 or status == 403, (status, body)
    assert "the token does not match" in body["detail"]
    status, body = guarded.post("/reset", {"token": TOKEN})
    assert status == 200, (status, body)
    assert "Traceback" not in guarded.output()


def test_foreign_origins_and_hosts_are_refused(guarded: Server) -> None:
    port = guarded.url.rsplit(":", 1)[1]
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Host": "attacker.example"},
        {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"},
    ):
        status, sock = handshake(guarded, headers)
        sock.close()
        assert status == 403, headers
    for headers in ({}, {"Origin": f"http://127.0.0.1:{port}"}, {"Host": f"localhost:{port}"}):
        status, sock = handshake(guarded, headers)
        sock.close()
        assert status == 101, headers
    status, sock = handshake(guarded, {"Origin": "https://evil.example"})
    sock.close()
    assert "Origin 'https://evil.example' is not allowed" in guarded.output()


def test_an_allowed_origin_connects(tmp_path: Path) -> None:
    running = start_server(tmp_path, CONFIG, "--allow-origin", "https://lab.example")
    try:
        for origin, expected in (("https://lab.example", 101), ("https://evil.example", 403)):
            status, sock = handshake(running, {"Origin": origin})
            sock.close()
            assert status == expected, origin
    finally:
        assert running.stop() == 0, running.output()


def test_idle_connections_are_closed_and_never_hold_a_session(guarded: Server) -> None:
    # --max-sessions 2: four connections (the connection limit) that never reset
    idle = [handshake(guarded)[1] for _ in range(4)]
    counts = guarded.get("/interactions")
    assert counts["connections"]["open"] == 4
    assert counts["sessions"]["open"] == 0
    # A fifth connection closes the oldest of them, which never reset.
    status, sock = handshake(guarded)
    sock.close()
    assert status == 101
    time.sleep(2.5)  # --idle-timeout 1: the idle connections are closed
    for sock in idle:
        sock.settimeout(5)
        try:
            data = sock.recv(4096)
        except ConnectionResetError:
            data = b""
        assert data == b"" or data[:1] == b"\x88", data  # the server closed it
        sock.close()
    deadline = time.monotonic() + 10
    while guarded.get("/interactions")["connections"]["open"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert guarded.get("/interactions")["connections"]["open"] == 0
    with GenericEnvClient(base_url=guarded.url).sync() as env:
        env.reset(interaction_kwargs={"name": "weather"}, token=TOKEN)
        assert guarded.get("/interactions")["sessions"]["open"] == 1
    assert guarded.wait_sessions(0)["open"] == 0


def test_a_websocket_may_not_join_another_connections_session(guarded: Server) -> None:
    """OpenEnv lets /ws?session_id=ID join a session; an episode the joined connection
    started was never ended (only the owner's close ends one): 4 joins held
    --max-sessions 4 until shutdown. The handshake is refused."""
    for path in (
        "/ws?session_id=anything",
        "/ws?x=1&session_id=abc",
        "/ws?session%5Fid=abc",  # percent-encoded names are decoded, as OpenEnv reads them
        "/ws?%73ession_id=abc",
    ):
        status, sock = handshake(guarded, path=path)
        sock.close()
        assert status == 403, path
    status, sock = handshake(guarded, path="/ws?other=1")
    sock.close()
    assert status == 101
    assert "joining another connection's session" in guarded.output()


def test_a_forwarded_client_address_does_not_cut_its_connection(tmp_path: Path) -> None:
    """Behind a proxy on the same machine, uvicorn rewrote the client address from
    X-Forwarded-For, which matched no connection of the gate: every keep-alive
    connection (and WebSocket) was cut `--header-timeout` after it opened."""
    import http.client
    from urllib.parse import urlsplit

    running = start_server(tmp_path, CONFIG, "--header-timeout", "2")
    try:
        port = urlsplit(running.url).port
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(5):  # over 4 s on one connection, twice the deadline
            connection.request("GET", "/health", headers={"X-Forwarded-For": "203.0.113.7"})
            response = connection.getresponse()
            assert response.status == 200
            response.read()
            time.sleep(1.0)
        connection.close()
    finally:
        assert running.stop() == 0, running.output()
    assert "no complete request within" not in running.output()


def test_a_refused_reset_leaves_the_episode_in_progress_playing(guarded: Server) -> None:
    # A reset refused by its token, its route or its row had ended the episode first:
    # the next step was told "the episode ended with an error".
    import json

    from websockets.sync.client import connect

    url = guarded.url.replace("http://", "ws://") + "/ws"
    reset = {"type": "reset", "data": {"interaction_kwargs": {"name": "weather"}, "token": TOKEN}}
    step = {"type": "step", "data": {"content": "What is the weather?"}}
    with connect(url) as ws:
        for refused in [
            {"interaction_kwargs": {"name": "weather"}, "token": "wrong"},
            {"interaction_kwargs": {"name": "no-such"}, "token": TOKEN},
            {"split": "none", "index": 0, "token": TOKEN},
        ]:
            ws.send(json.dumps(reset))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
            ws.send(json.dumps({"type": "reset", "data": refused}))
            assert json.loads(ws.recv(timeout=10))["type"] == "error"
            ws.send(json.dumps(step))
            answer = json.loads(ws.recv(timeout=10))
            assert answer["type"] == "observation", (refused, answer)
    assert guarded.wait_sessions(0)["open"] == 0


def test_an_idle_or_evicted_connection_is_told_why_it_is_closed(guarded: Server) -> None:
    # Both were closed with OpenEnv's plain 1000 and no reason: a client could not tell
    # its episode had been ended.
    import json

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = guarded.url.replace("http://", "ws://") + "/ws"
    reset = {"type": "reset", "data": {"interaction_kwargs": {"name": "weather"}, "token": TOKEN}}
    with connect(url) as ws:  # --idle-timeout 1
        ws.send(json.dumps(reset))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert "idle for 1 s: any episode on this connection is over" in closed.value.rcvd.reason
    import contextlib

    with contextlib.ExitStack() as stack:  # the connection limit, none of them reset
        waiting = [stack.enter_context(connect(url)) for _ in range(4)]
        with connect(url) as newcomer:  # takes the place of the oldest
            newcomer.send(json.dumps(reset))
            assert json.loads(newcomer.recv(timeout=10))["type"] == "observation"
        with pytest.raises(ConnectionClosed) as evicted:
            waiting[0].recv(timeout=10)
        assert evicted.value.rcvd is not None and evicted.value.rcvd.code == 1013
        assert "closed to make room for a client that resets" in evicted.value.rcvd.reason
    assert guarded.wait_sessions(0)["open"] == 0
