"""Connections that never finish their request, on a real server on 127.0.0.1.

A client that opens a connection and sends nothing, or its request head a byte at a
time, or half a body, must not hold a file descriptor for ever; many of them must not
use up the process's open-file limit, so that ``/health`` and a real episode still get
through while they are held; and the log stays a few lines long. WebSockets that
never reset cannot keep a client that does out of a connection.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server
from test_server_guard import handshake

CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
"""
HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(server)), timeout=10)


def _closed_by_server(sock: socket.socket, within: float, websocket: bool = False) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (reading what it sends).

    On a WebSocket the server's close frame (opcode 8) counts as closing.
    """
    sock.settimeout(min(0.2, within))
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
            if data == b"" or (websocket and data[:1] == b"\x88"):
                return True
        except TimeoutError:
            continue
        except OSError:  # reset by the server
            return True
    return False


def _read_until_closed(sock: socket.socket, within: float) -> bytes:
    """Everything the server sends until it closes ``sock`` (a response may come in parts)."""
    sock.settimeout(0.2)
    data = b""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            part = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if not part:
            return data
        data += part
    raise AssertionError(f"the server did not close the connection; it sent {data!r}")


@pytest.fixture
def quick(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path, CONFIG, "--header-timeout", "1")
    yield running
    assert running.stop() == 0, running.output()


def test_connections_that_never_complete_a_request_are_closed(quick: Server) -> None:
    silent = _connect(quick)
    half_head = _connect(quick)
    half_head.sendall(HEAD)
    half_body = _connect(quick)
    half_body.sendall(
        b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"prompt": '
    )
    # Keep-alive: a whole request is answered, then the next head never ends.
    second = _connect(quick)
    second.sendall(HEAD + b"\r\n")
    assert b"200 OK" in second.recv(65536)
    second.sendall(HEAD)
    trickle = _connect(quick)
    started = time.monotonic()
    closed = False
    for byte in HEAD:  # one byte every 0.2 s: never a complete head within the deadline
        try:
            trickle.send(bytes([byte]))
        except OSError:
            closed = True
            break
        if _closed_by_server(trickle, 0.2):
            closed = True
            break
    assert closed, "a head sent a byte at a time was never closed"
    assert time.monotonic() - started < 6
    for sock in (silent, half_head, half_body, second):
        assert _closed_by_server(sock, 5)
        sock.close()
    trickle.close()
    # A client that sends its request at once is answered as ever.
    assert quick.get("/health")["status"] == "healthy"
    assert quick.get("/interactions")["connections"]["http"] <= 1
    log = quick.output()
    assert "sent no complete request within 1 s (--header-timeout)" in log
    assert "Traceback" not in log


def test_held_connections_cannot_use_up_the_open_files(tmp_path: Path) -> None:
    # 256 open files: 128 for WebSockets (twice the default 64 sessions) and 64 kept
    # back leave room for 64 HTTP connections; 600 half-sent requests are held.
    server = start_server(tmp_path, CONFIG, "--header-timeout", "60", open_files=256)
    held: list[socket.socket] = []
    try:
        for _ in range(600):
            sock = _connect(server)
            sock.sendall(HEAD)
            held.append(sock)
        time.sleep(1)
        # /health and a whole episode get through while the 600 are held.
        assert server.get("/health")["status"] == "healthy"
        with GenericEnvClient(base_url=server.url).sync() as client:
            client.reset(prompt="2+2?", interaction_kwargs={"ground_truth": "4"})
            result = client.step({"content": "#### 4"})
            assert result.done is True
            assert result.reward == 1.0
        # The connections made room for are closed by the server, not left dangling.
        closed = sum(_closed_by_server(sock, 0.05) for sock in held)
        assert closed >= 600 - 64
        log = server.output()
        assert log.count("\n") < 40, log[-4000:]
        assert "Traceback" not in log
        assert "closed the one that waited longest for its request" in log
    finally:
        for sock in held:
            with contextlib.suppress(OSError):
                sock.close()
        code = server.stop()
    assert code == 0, server.output()


def test_websockets_that_never_reset_make_room_for_one_that_does(tmp_path: Path) -> None:
    server = start_server(
        tmp_path, CONFIG, "--max-connections", "2", "--idle-timeout", "60", "--max-sessions", "2"
    )
    try:
        idle = [handshake(server)[1] for _ in range(2)]
        assert server.get("/interactions")["connections"]["open"] == 2
        played = []
        for _ in range(2):  # each closes the oldest idle one, resets and plays
            client = GenericEnvClient(base_url=server.url).sync()
            client.connect()
            client.reset(prompt="2+2?", interaction_kwargs={"ground_truth": "4"})
            assert client.step({"content": "#### 4"}).reward == 1.0
            played.append(client)
        for sock in idle:
            assert _closed_by_server(sock, 5, websocket=True)
            sock.close()
        # Both open connections have played: a third is refused, theirs are kept.
        status, sock = handshake(server)
        sock.close()
        assert status == 403
        client = played[0]
        client.reset(prompt="3+3?", interaction_kwargs={"ground_truth": "6"})
        assert client.step({"content": "#### 6"}).reward == 1.0
        for client in played:
            client.close()
        log = server.output()
        assert "closed the oldest one that has not reset an episode" in log
    finally:
        code = server.stop()
    assert code == 0, server.output()


def test_websockets_whose_resets_were_refused_make_room_for_one_that_plays(
    tmp_path: Path,
) -> None:
    """Without a token every reset passes the token check: connections whose resets were
    refused (an interaction not served) were no longer evictable, so four of them, holding
    no session, kept every new client out (403) for as long as they kept talking."""
    server = start_server(tmp_path, CONFIG, "--max-connections", "2", "--max-sessions", "2")
    try:
        refused = []
        for _ in range(2):
            client = GenericEnvClient(base_url=server.url).sync()
            client.connect()
            with pytest.raises(Exception, match="not served here"):
                client.reset(prompt="hi", interaction_kwargs={"name": "nope"})
            refused.append(client)
        assert server.get("/interactions")["sessions"]["admitted"] == 0
        client = GenericEnvClient(base_url=server.url).sync()
        client.connect()  # closes the oldest of the two: it never took a session
        client.reset(prompt="2+2?", interaction_kwargs={"ground_truth": "4"})
        assert client.step({"content": "#### 4"}).reward == 1.0
        client.close()
        for old in refused:
            with contextlib.suppress(Exception):
                old.close()
    finally:
        code = server.stop()
    assert code == 0, server.output()


@pytest.mark.parametrize("compress", [False, True])
def test_websocket_compression_is_off_unless_asked_for(tmp_path: Path, compress: bool) -> None:
    args = ("--ws-compression",) if compress else ()
    server = start_server(tmp_path, CONFIG, *args)
    try:
        sock = _connect(server)
        sock.sendall(
            b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
        )
        head = sock.recv(65536).split(b"\r\n\r\n", 1)[0].lower()
        sock.close()
        assert head.startswith(b"http/1.1 101")
        assert (b"permessage-deflate" in head) is compress
        # OpenEnv's client plays an episode either way.
        with GenericEnvClient(base_url=server.url).sync() as client:
            client.reset(prompt="2+2?", interaction_kwargs={"ground_truth": "4"})
            assert client.step({"content": "#### 4"}).reward == 1.0
    finally:
        code = server.stop()
    assert code == 0, server.output()


def test_a_body_sent_a_byte_at_a_time_is_closed_at_the_deadline(tmp_path: Path) -> None:
    """Complete heads, then a body that never ends: held against a limit of 300 files."""
    server = start_server(
        tmp_path, CONFIG, "--max-sessions", "8", "--header-timeout", "2", open_files=300
    )
    head = (
        f"POST /reset HTTP/1.1\r\nHost: 127.0.0.1:{_port(server)}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
    ).encode()
    socks: list[socket.socket] = []
    try:
        for _ in range(230):  # more than the 300 - 16 - 64 = 220 HTTP connections allowed
            sock = _connect(server)
            sock.sendall(head + b'{"prompt": "')
            socks.append(sock)
        for _ in range(6):  # three deadlines, a byte a second on every connection
            time.sleep(1)
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.send(b"x")
        assert server.get("/health")["status"] == "healthy"
        assert server.get("/interactions")["connections"]["http"] <= 2
    finally:
        for sock in socks:
            sock.close()
        code = server.stop()
    assert code == 0, server.output()


def test_a_body_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # --max-episode-chars 1000: bodies up to 8 * 1000 + 65536 bytes are read.
    server = start_server(tmp_path, CONFIG, "--max-episode-chars", "1000")
    try:
        sock = _connect(server)
        sock.sendall(
            b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n{"
        )
        answer = _read_until_closed(sock, 10)
        assert answer.startswith(b"HTTP/1.1 413"), answer
        assert b"over this server's limit of 73,536" in answer
        sock.close()
        # Without a length (chunked), the request ends once the body passes the limit.
        sock = _connect(server)
        sock.sendall(
            b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
        with contextlib.suppress(OSError):
            for _ in range(10):  # 160 KiB
                sock.sendall(chunk)
        assert _closed_by_server(sock, 5)
        sock.close()
        assert server.get("/health")["status"] == "healthy"
        assert server.sessions()["started"] == 0
    finally:
        code = server.stop()
    assert code == 0, server.output()


def _masked_frame(payload: bytes) -> bytes:
    """One client text frame (masked with a zero key), its length encoded minimally."""
    size = len(payload)
    short = bytes([0x81, 0x80 | size]) if size < 126 else b""
    head = short or bytes([0x81, 0xFE]) + size.to_bytes(2, "big")
    return head + b"\0\0\0\0" + payload


def _stuck_websocket(port: int) -> socket.socket:
    """A WebSocket that sends resets without the token and never reads the refusals."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    data = b'{"type": "reset", "data": {"prompt": "hi"}}'
    frame = bytes([0x81, 0x80 | len(data)]) + b"\0\0\0\0" + data
    sock.settimeout(3)
    with contextlib.suppress(OSError):
        while True:  # until the server stops reading: its unread replies fill the socket
            sock.send(frame * 1000)
    return sock


def test_websockets_that_never_read_cannot_lock_out_a_token_holder(tmp_path: Path) -> None:
    server = start_server(
        tmp_path, CONFIG, "--max-sessions", "2", env={"INTERACTIONS_SERVE_TOKEN": "sekrit"}
    )
    socks: list[socket.socket] = []
    try:
        socks = [_stuck_websocket(_port(server)) for _ in range(6)]  # --max-connections 4
        with GenericEnvClient(base_url=server.url).sync() as client:
            client.reset(
                prompt="2+2?",
                interaction_kwargs={"name": "gsm8k", "ground_truth": "4"},
                token="sekrit",
            )
            assert client.step({"content": "#### 4"}).reward == 1.0
    finally:
        for sock in socks:
            sock.close()
        code = server.stop()
    assert code == 0, server.output()


def test_responses_a_client_never_reads_do_not_hold_the_connection(tmp_path: Path) -> None:
    """Thousands of pipelined requests, no response read: closed at --header-timeout."""
    server = start_server(tmp_path, CONFIG, "--header-timeout", "2")
    socks: list[socket.socket] = []
    try:
        for _ in range(5):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
            sock.connect(("127.0.0.1", _port(server)))
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.send(b"GET /schema HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 1000)
            socks.append(sock)
        deadline = time.monotonic() + 40
        while server.get("/interactions")["connections"]["http"] > 1:
            assert time.monotonic() < deadline, server.get("/interactions")["connections"]
            time.sleep(0.5)
        log = server.output()
        assert "took no response" in log or "sent no complete request" in log
    finally:
        for sock in socks:
            sock.close()
        code = server.stop()
    assert code == 0, server.output()


def test_a_proven_websocket_that_reads_nothing_is_closed_without_a_traceback(
    tmp_path: Path,
) -> None:
    server = start_server(
        tmp_path, CONFIG, "--idle-timeout", "2", env={"INTERACTIONS_SERVE_TOKEN": "sekrit"}
    )
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", _port(server)))
        sock.sendall(
            b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        reset = (
            b'{"type": "reset", "data": {"prompt": "2+2?", "token": "sekrit", '
            b'"interaction_kwargs": {"ground_truth": "4"}}}'
        )
        sock.settimeout(10)
        seen = b""
        while b"\r\n\r\n" not in seen:  # the handshake's answer, before any frame
            seen += sock.recv(65536)
        sock.sendall(_masked_frame(reset))
        while b'"observation"' not in seen:  # a reset that passed: the connection has played
            part = sock.recv(65536)
            assert part, f"the server closed the connection: {seen!r}"
            seen += part
        burst = _masked_frame(b'{"type": "state"}') * 200
        sock.settimeout(0.5)
        started, closed = time.monotonic(), False
        while time.monotonic() - started < 20:  # send on, read nothing
            try:
                sock.send(burst)
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
        sock.close()
        assert closed
        assert server.wait_sessions(0)["open"] == 0
    finally:
        code = server.stop()
    assert code == 0, server.output()
    assert "Traceback" not in server.output(), server.output()


SLOW_START = """\
default: slow
interaction:
  - name: slow
    class_name: serve_plugins.SlowStart
    config: {start: 2.0}
"""


def test_a_token_holder_is_not_evicted_while_its_session_starts(tmp_path: Path) -> None:
    """A connection was evictable until its first observation: handshakes without the
    token, sent while a token holder's slow `start_interaction` ran, closed it."""
    import threading

    server = start_server(
        tmp_path,
        SLOW_START,
        "--max-connections",
        "2",
        "--max-sessions",
        "2",
        env={"INTERACTIONS_SERVE_TOKEN": "tok"},
    )
    try:
        outcome: list[object] = []

        def play() -> None:
            try:
                with GenericEnvClient(base_url=server.url).sync() as env:
                    env.reset(prompt="2+2?", interaction_kwargs={"ground_truth": "4"}, token="tok")
                    outcome.append(env.step({"content": "4"}).reward)
            except Exception as exc:
                outcome.append(exc)

        player = threading.Thread(target=play)
        player.start()
        time.sleep(0.7)  # the reset passed the token check; the session is starting
        strangers = [handshake(server)[1] for _ in range(4)]
        player.join(30)
        assert outcome == [1.0], (outcome, server.output())
        for sock in strangers:
            sock.close()
    finally:
        assert server.stop() == 0, server.output()


def test_a_flood_of_invalid_http_requests_logs_a_line_not_one_each(quick: Server) -> None:
    # uvicorn logged "Invalid HTTP request received." for each: 2,000 requests in half a
    # second added 2,000 lines to the log, from one client with no token.
    port = int(quick.url.rsplit(":", 1)[1])
    for _ in range(300):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 400")
    assert quick.get("/health")["status"] == "healthy"
    log = quick.output()
    assert log.count("Invalid HTTP request received") == 0, log[-2000:]
    assert 1 <= log.count("refused a request that is not valid HTTP/1.1") <= 3, log[-2000:]
