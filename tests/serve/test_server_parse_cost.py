"""What one message may cost the server before anything checks it, on a real server.

OpenEnv parses every message (``json.loads``) on the event loop before the token
check: a reset whose ``interaction_kwargs`` held 5,000,000 empty lists (14 KiB
compressed) held the loop 2.9 s and the server 380 MB. A message or request body
holding more JSON values than a reset within ``--max-episode-chars`` needs is
refused unparsed; text full of brackets and commas, inside strings, is not.

``interaction_kwargs`` count against ``--max-episode-chars``: the session keeps them.

With ``--ws-compression``, uvicorn keeps every frame of a message until its last:
fragments of compressed zeros, never finished, held 16 MB per connection for 15 KB
sent. A message that grows far past its size on the wire closes the connection.

A text frame that is not UTF-8 made uvicorn log a whole traceback every time.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server, ws_connection, ws_next
from websockets.client import ClientProtocol
from websockets.frames import Close

CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
"""


def _connection(server: Server, compress: bool = False) -> tuple[socket.socket, ClientProtocol]:
    return ws_connection(server, compress)


def _answer(sock: socket.socket, client: ClientProtocol, within: float = 15) -> Close | str | None:
    """The server's next text message, or its close frame, within ``within`` seconds."""
    return ws_next(sock, client, within)  # type: ignore[no-any-return]


def _exchange(server: Server, data: bytes, within: float = 15) -> Close | str | None:
    """Send one text message on a new WebSocket; the answer (see :func:`_answer`)."""
    sock, client = _connection(server)
    client.send_text(data)
    sock.sendall(b"".join(client.data_to_send()))
    answer = _answer(sock, client, within)
    sock.close()
    return answer


def _reset(prompt: object, **kwargs: object) -> str:
    data = {
        "prompt": prompt,
        "interaction_kwargs": {"name": "gsm8k", "ground_truth": "4", **kwargs},
    }
    return json.dumps({"type": "reset", "data": data})


def _still_serves(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        assert env.reset(prompt=[{"role": "user", "content": "1+1?"}]).observation["turn"] == 0


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Server]:
    # At most 16,384 JSON values a message (the floor), 100,000 characters an episode.
    running = start_server(tmp_path, CONFIG, "--max-episode-chars", "100000")
    yield running
    assert running.stop() == 0, running.output()


def test_a_message_of_many_empty_lists_closes_with_1009_unparsed(small: Server) -> None:
    answer = _exchange(small, _reset("hi", x=[[]] * 20_000).encode())  # 80 KB, 40,000 values
    assert isinstance(answer, Close), f"the reset was parsed and answered: {answer!r:.200}"
    assert answer.code == 1009
    assert "16,384 JSON values" in answer.reason and "send fewer" in answer.reason
    assert "Traceback" not in small.output()
    _still_serves(small)


def test_brackets_and_commas_inside_strings_are_not_counted(small: Server) -> None:
    text = '[a, {"b": [1, 2]}], \\"x, y\\", ' * 3_000  # 90,000 characters, 27,000 brackets
    answer = _exchange(small, _reset([{"role": "user", "content": text}]).encode())
    assert isinstance(answer, str), answer
    reply = json.loads(answer)
    assert reply["type"] == "observation", reply
    assert reply["data"]["observation"]["messages"][0]["content"] == text


def test_an_http_reset_of_many_values_is_refused_with_413(small: Server) -> None:
    body = {"prompt": "hi", "interaction_kwargs": {"name": "gsm8k", "x": [{}] * 20_000}}
    status, answer = small.post("/reset", body)
    assert status == 413, answer
    assert "16,384 JSON values" in answer["detail"]
    status, answer = small.post("/reset", {"prompt": "hi", "interaction_kwargs": {"x": [1, 2]}})
    assert status == 200, answer


@pytest.mark.parametrize("length", ["0", None])
def test_a_chunked_body_is_checked_whatever_content_length_says(
    small: Server, length: str | None
) -> None:
    """`Content-Length: 0` with `Transfer-Encoding: chunked`: the server reads the chunked
    body (RFC 9112), and the check skipped it: 13.5 MB of lists held the loop 5 s."""
    import http.client
    from urllib.parse import urlsplit

    body = json.dumps({"prompt": "hi", "interaction_kwargs": {"x": [{}] * 20_000}}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", urlsplit(small.url).port, timeout=15)
    connection.putrequest("POST", "/reset")
    connection.putheader("Content-Type", "application/json")
    if length is not None:
        connection.putheader("Content-Length", length)
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    for start in range(0, len(body), 8192):
        chunk = body[start : start + 8192]
        connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    connection.send(b"0\r\n\r\n")
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 413 and "16,384 JSON values" in answer["detail"], answer
    _still_serves(small)


def test_costly_text_before_parsing_is_refused_and_the_server_keeps_serving(
    small: Server,
) -> None:
    """Over the value limit, then an unterminated run of escaped quotes (100 KB: 9 s of
    event loop to refuse, no token needed); and numbers of 4,299 digits under the limit."""
    costly = "," * 16_385 + '"' + '\\"' * 40_000
    long_numbers = _reset("hi", x=["1" * 4_299] * 10).replace('"1', "1").replace('1"', "1")
    for text, why in [(costly, "JSON values"), (long_numbers, "digits")]:
        answer = _exchange(small, text.encode())
        assert isinstance(answer, Close) and answer.code == 1009, answer
        assert why in answer.reason, answer.reason
        status, body = small.post("/reset", json.loads(long_numbers)["data"])
        assert status == 413 and "digits" in body["detail"], body
    _still_serves(small)


def test_interaction_kwargs_count_against_the_episode_bound(small: Server) -> None:
    answer = _exchange(small, _reset("hi", notes="n" * 150_000).encode())
    assert isinstance(answer, str), answer
    reply = json.loads(answer)
    assert reply["type"] == "error", reply
    assert "interaction_kwargs hold 150,0" in reply["data"]["message"]
    assert "--max-episode-chars" in reply["data"]["message"]
    assert small.sessions()["open"] == 0


def test_unfinished_compressed_fragments_close_with_1009(tmp_path: Path) -> None:
    server = start_server(tmp_path, CONFIG, "--ws-compression")  # 16 MB messages allowed
    try:
        sock, client = _connection(server, compress=True)
        client.send_text(b" " * 10, fin=False)
        for _ in range(4):  # 2 MiB of zeros, about 2 KB on the wire, and no last frame
            client.send_continuation(b"\0" * (512 << 10), fin=False)
        sock.sendall(b"".join(client.data_to_send()))
        answer = _answer(sock, client)
        sock.close()
        assert isinstance(answer, Close), answer
        assert answer.code == 1009
        assert "send it uncompressed" in answer.reason
        _still_serves(server)
    finally:
        assert server.stop() == 0, server.output()


def test_text_frames_that_are_not_utf8_log_a_line_not_tracebacks(small: Server) -> None:
    for _ in range(20):
        answer = _exchange(small, b"\xff\xfe", within=5)
        assert isinstance(answer, Close) and answer.code == 1007, answer
    with urllib.request.urlopen(small.url + "/health", timeout=10):
        pass
    output = small.output()
    assert "Traceback" not in output
    assert output.count("not UTF-8") == 1, output[-2000:]


def test_a_stop_signal_during_a_long_check_of_a_reset_ends_it_quietly(tmp_path: Path) -> None:
    """The watchdog broke the server's own work with ``LoopBlocked``: an ASGI traceback."""
    # A bound this large allows 12,500,000 values: a reset of 4,000,000 empty lists
    # holds the loop seconds (parsing, then checking its nesting).
    server = start_server(tmp_path, CONFIG, "--max-episode-chars", "400000000")
    try:
        sock, client = _connection(server)
        client.send_text(_reset("hi", x=[[]] * 4_000_000).encode())
        sock.sendall(b"".join(client.data_to_send()))
        time.sleep(0.5)
        assert server.stop() == 0, server.output()
        sock.close()
    finally:
        server.stop()
    output = server.output()
    assert "blocked the event loop" in output  # the block happened, and was reported
    assert "Exception in ASGI application" not in output, output[-3000:]
    assert "Traceback" not in output


def test_a_body_in_utf16_is_refused_before_it_is_parsed(small: Server) -> None:
    """FastAPI reads UTF-16 and UTF-32 bodies too, whose NUL bytes split the digit runs
    the number check looks for: 1,800 integers of 4,299 digits passed it."""
    import urllib.error

    body = json.dumps({"prompt": "hi", "interaction_kwargs": {"x": [int("7" * 99)]}})
    for encoding in ("utf-16-le", "utf-32"):
        request = urllib.request.Request(
            small.url + "/reset",
            data=body.encode(encoding),
            headers={"Content-Type": "application/json"},
        )
        try:
            urllib.request.urlopen(request, timeout=10)
        except urllib.error.HTTPError as exc:
            status, answer = exc.code, json.loads(exc.read())
        assert status == 413 and "not UTF-8" in answer["detail"], (encoding, answer)
    _still_serves(small)


def test_an_http_reset_with_a_non_finite_number_is_a_readable_422(small: Server) -> None:
    """`{"seed": 1e999}` (valid to Python's JSON reader) made FastAPI's 422 unwritable:
    every such request was a 500 with two tracebacks in the log, no token needed."""
    for body in ({"seed": float("inf")}, {"episode_id": float("nan"), "prompt": "a"}):
        status, answer = small.post("/reset", body)
        assert status == 422, answer
        assert answer["detail"], answer
    assert "Traceback" not in small.output()
    _still_serves(small)


def test_an_http_request_refused_with_a_lone_surrogate_is_a_readable_422(tmp_path: Path) -> None:
    # FastAPI's 422 echoes the refused input: one holding "\ud83d" could not be encoded,
    # and every such request was a 500 with two tracebacks in the log.
    server = start_server(tmp_path, CONFIG)
    try:
        status, body = server.post("/reset", {"seed": "\ud83d", "interaction_kwargs": {}})
        assert status == 422, (status, body)
        assert "\\ud83d" in json.dumps(body), body
        # a lone surrogate in a key had been told in pydantic's words ("Input should be
        # a valid string"), which named the wrong problem
        for path, payload in [
            ("/reset", {"bog\ud800us": 1}),
            ("/step", {"action": {"content": "x", "b\ud800": 1}}),
        ]:
            status, body = server.post(path, payload)
            assert status == 422, (status, body)
            assert "holds a lone surrogate (such as" in str(body), body
            assert "valid string" not in str(body), body
    finally:
        assert server.stop() == 0, server.output()
    assert "Exception in ASGI application" not in server.output()
