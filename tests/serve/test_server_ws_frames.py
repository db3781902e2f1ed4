"""What a WebSocket client's frames may cost the server, on a real server on 127.0.0.1.

uvicorn parsed a whole read (up to 256 KiB) in one callback of the event loop: a
read of 6-byte frames (empty pongs, pings, continuation fragments) is about
43,000 of them, and one client sending them held the loop 0.35 s per read. Every
other client waited: with four such clients a token holder's step took 1.3 s, and
the watchdog said nothing (no single call held the loop a second). The server
must parse a bounded piece per turn of the loop and close a connection that
floods it with frames that carry no message (1008), while a client fragmenting
a message in small pieces, or sending keep-alive pings, is served as before.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server, ws_connection, ws_next
from websockets.client import ClientProtocol
from websockets.frames import Close
from websockets.protocol import State
from websockets.uri import parse_uri

CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path, CONFIG)
    yield running
    assert running.stop() == 0, running.output()


def _flood(client: ClientProtocol, kind: str, frames: int) -> bytes:
    """``frames`` frames of ``kind`` that carry nothing, as bytes for the wire."""
    if kind == "fragment":
        client.send_text(b"", fin=False)
    for _ in range(frames):
        if kind == "pong":
            client.send_pong(b"")
        elif kind == "ping":
            client.send_ping(b"")
        else:
            client.send_continuation(b"", fin=False)
    return b"".join(client.data_to_send())


def _send_all(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the server may close it while it is sent
        sock.sendall(data)


@pytest.mark.parametrize("kind", ["pong", "ping", "fragment"])
def test_a_flood_of_frames_that_carry_nothing_is_closed(server: Server, kind: str) -> None:
    sock, client = ws_connection(server, compress=False)
    flood = _flood(client, kind, 20_000)  # 120 KB or so: one read of the server's
    sender = threading.Thread(target=_send_all, args=(sock, flood), daemon=True)
    sender.start()
    # Closing with the flood still arriving unread resets TCP, which may drop the close frame.
    ending = ws_next(sock, client, within=15, skip_text=True, gone="reset")
    sock.close()
    assert ending is not None, f"the connection was still open 15 s after a flood of {kind}s"
    if isinstance(ending, Close):
        assert ending.code == 1008 and "carry little or nothing" in ending.reason, ending
    with GenericEnvClient(base_url=server.url).sync() as env:
        assert env.reset(prompt=[{"role": "user", "content": "1+1?"}]).observation["turn"] == 0
    assert "flood of nearly empty frames" in server.output()


def test_a_message_in_small_fragments_and_keepalive_pings_are_served(server: Server) -> None:
    """A reset in 512-byte fragments was closed as frames carrying no message."""
    sock, client = ws_connection(server, compress=False)
    data = {"prompt": "1+1?", "interaction_kwargs": {"name": "gsm8k", "pad": "x" * 200_000}}
    text = json.dumps({"type": "reset", "data": data}).encode()
    pieces = [text[i : i + 128] for i in range(0, len(text), 128)]  # about 1,600 fragments
    for _ in range(40):  # more pings than the allowance's burst would take unearned
        client.send_ping(b"keepalive")
    sock.sendall(b"".join(client.data_to_send()))
    time.sleep(0.5)
    client.send_text(pieces[0], fin=False)
    for piece in pieces[1:-1]:
        client.send_continuation(piece, fin=False)
    client.send_continuation(pieces[-1], fin=True)
    sock.sendall(b"".join(client.data_to_send()))
    answer = ws_next(sock, client, within=15)
    sock.close()
    assert isinstance(answer, str), answer
    assert json.loads(answer)["type"] == "observation", answer[:200]


def _keep_flooding(server: Server, until: float) -> None:
    """Empty pongs, reading nothing, until ``until``: on one connection while the server
    keeps it, then on a new one."""
    while time.monotonic() < until:
        with contextlib.suppress(OSError):
            sock, client = ws_connection(server, compress=False)
            flood = _flood(client, "pong", 40_000)
            with sock:
                while time.monotonic() < until:
                    sock.sendall(flood)


def test_other_clients_are_served_while_frames_flood(server: Server) -> None:
    """Beside four clients sending empty pongs, steps stalled up to 1.3 s, each time the
    loop parsed a read of them (150 steps in 4 s); now at most 0.02 s (950 steps)."""
    until = time.monotonic() + 4
    floods = [
        threading.Thread(target=_keep_flooding, args=(server, until), daemon=True) for _ in range(4)
    ]
    for flood in floods:
        flood.start()
    steps, done = [], True
    with GenericEnvClient(base_url=server.url).sync() as env:
        while time.monotonic() < until:
            if done:  # a new episode whenever one ends (the turn limits)
                env.reset(prompt="1+1?", interaction_kwargs={"ground_truth": "2"})
            started = time.monotonic()
            done = env.step({"content": "#### 3"}).done
            steps.append(time.monotonic() - started)
    for flood in floods:
        flood.join(timeout=30)
    assert len(steps) >= 10, steps
    slowest, median = max(steps), statistics.median(steps)
    assert slowest < 0.6, f"a step took {slowest:.2f} s (median {median:.3f} s)"


class _Loop:
    """What the protocol asks of its loop: ``call_soon``, run here one turn at a time."""

    def __init__(self) -> None:
        self.soon: list[Any] = []

    def call_soon(self, callback: Any) -> Any:
        self.soon.append(callback)
        return self

    def cancel(self) -> None:
        pass


class _Transport:
    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _FrameCounter:
    """A stand-in for uvicorn's protocol below the bounds: websockets parses what it is fed,
    each frame goes to its ``handle_*`` and the frames of every feed are counted."""

    def __init__(self) -> None:
        from websockets.protocol import Protocol, Side

        self.conn = Protocol(Side.SERVER, state=State.OPEN)
        self.read_paused = self.close_sent = False
        self.frames: list[bytes] = []
        self.transport = _Transport()
        self.loop = _Loop()
        self.per_feed: list[int] = []

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        events = self.conn.events_received()
        for event in events:
            self.handle_cont(event)  # type: ignore[attr-defined]
        self.per_feed.append(len(events))

    def handle_cont(self, event: Any) -> None:
        pass


def test_a_turn_of_the_loop_parses_a_bounded_number_of_frames() -> None:
    """A piece was 4 KiB however many frames it held; a frame costs about the same however
    small, and compressed ones are small (22 bytes for 128 of text): 120 connections sending
    them held the loop 0.58 s a turn. The next piece now holds about FEED_FRAMES frames."""
    from interactions_core.serve.connections import FEED_FRAMES, websocket_protocol

    bounded = websocket_protocol().__mro__[1]  # the bounds, mixed above uvicorn's protocol
    protocol = type("Counted", (bounded, _FrameCounter), {})()
    client = ClientProtocol(parse_uri("ws://127.0.0.1/ws"))
    client.state = State.OPEN
    client.send_text(b"x" * 64, fin=False)
    for _ in range(2_000):  # 64 bytes each: they earn their own allowance
        client.send_continuation(b"x" * 64, fin=False)
    protocol.data_received(b"".join(client.data_to_send()))
    while protocol.loop.soon:  # one turn of the loop each
        protocol.loop.soon.pop(0)()
    assert sum(protocol.per_feed) == 2_001
    assert protocol.per_feed[0] > FEED_FRAMES  # the first piece is 4 KiB of them
    assert max(protocol.per_feed[1:]) <= FEED_FRAMES + 1, protocol.per_feed[:10]


def test_a_flood_closed_while_its_reset_is_answered_leaves_no_traceback(server: Server) -> None:
    # The connection was closed (1008) while the application was still answering the
    # reset sent before the flood: its answer went to uvicorn after the close, which
    # raised "Unexpected ASGI message 'websocket.send', after sending 'websocket.close'",
    # and each such connection left three chained tracebacks in the log.
    import asyncio

    port = int(server.url.rsplit(":", 1)[1])
    reset = json.dumps({"type": "reset", "data": {"prompt": "hi"}}).encode()

    async def one() -> None:
        client = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/ws"))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client.send_request(client.connect())
        writer.write(b"".join(client.data_to_send()))
        while client.state.name == "CONNECTING":
            client.receive_data(await reader.read(65536))
        client.send_text(reset)
        writer.write(b"".join(client.data_to_send()))
        with contextlib.suppress(OSError):
            for _ in range(300):  # a frame a write: the flood arrives while the reset plays
                client.send_ping(b"")
                writer.write(b"".join(client.data_to_send()))
                await writer.drain()
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            while await asyncio.wait_for(reader.read(65536), 3):
                pass
        writer.close()

    async def all_of_them() -> None:
        for _ in range(20):
            await one()

    asyncio.run(all_of_them())
    assert server.get("/health")["status"] == "healthy"
    assert server.wait_sessions(0)["open"] == 0
    log = server.output()
    assert "Exception in ASGI application" not in log, log[-3000:]
    assert "Traceback" not in log
