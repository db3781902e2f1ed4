"""What a WebSocket client can make the server hold, on a real server on 127.0.0.1.

A client that sends pings and reads nothing: uvicorn answered each at once and
kept reading, so the server held every pong, as many bytes as the client sent.
The server must stop reading while the client takes nothing of what it writes.

``--ws-compression`` against a decompression bomb: a compressed WebSocket frame
of zeros expands about a thousandfold. uvicorn's own protocol decompressed every
frame of a read (up to 256 KiB) before it paused reading, so a few hundred
kilobytes sent in one write cost the server hundreds of megabytes at once. The
server must decompress one message ahead of the application at most, and no
message beyond what a reset may bring (the ``--max-episode-chars`` bound, as for
an HTTP body): a larger one closes the connection with 1009.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core import GenericEnvClient
from server_harness import Server, start_server, ws_connection, ws_next
from websockets.client import ClientProtocol

CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
"""
PROC_STATUS = Path("/proc/self/status")
needs_proc = pytest.mark.skipif(
    not PROC_STATUS.exists(), reason="reads the server's memory from /proc"
)


def _memory_mb(pid: int, field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of process ``pid``, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for process {pid}")


def _connection(server: Server, compress: bool = True) -> tuple[socket.socket, ClientProtocol]:
    """A WebSocket to ``/ws``, negotiating permessage-deflate as OpenEnv's client does."""
    sock, client = ws_connection(server, compress)
    assert bool(client.extensions) is compress  # the server agreed to what was offered
    return sock, client


def _close_code(sock: socket.socket, client: ClientProtocol, within: float) -> int | None:
    """The code of the close frame the server sends within ``within`` seconds, if any."""
    close = ws_next(sock, client, within, skip_text=True)
    return None if close is None else int(close.code)


@pytest.fixture
def compressed(tmp_path: Path) -> Iterator[Server]:
    # Messages of at most 8 * 100,000 + 64 KiB bytes (what a reset may bring).
    running = start_server(tmp_path, CONFIG, "--ws-compression", "--max-episode-chars", "100000")
    yield running
    assert running.stop() == 0, running.output()


@needs_proc
def test_a_read_of_compressed_zeros_is_decompressed_one_message_at_a_time(
    compressed: Server,
) -> None:
    sock, client = _connection(compressed)
    # 250 messages of 800,000 spaces: about 200 KB compressed (not NULs, which the guard
    # refuses as not JSON before the application answers them)
    for _ in range(250):
        client.send_text(b" " * 800_000)
    bomb = b"".join(client.data_to_send())
    assert len(bomb) < 256 * 1024  # one read of the server's
    before = _memory_mb(compressed.pid, "VmRSS")
    sock.sendall(bomb)
    # The application answers each message (invalid JSON) before the next is parsed.
    sock.settimeout(20)
    answers, received = 0, b""
    while answers < 250:
        part = sock.recv(65536)
        assert part, "the server closed the connection"
        client.receive_data(part)
        answers += sum(e.opcode.name == "TEXT" for e in client.events_received())
        received += part
    peak = _memory_mb(compressed.pid, "VmHWM")
    sock.close()
    # 200 MB decompressed at once before; now at most a couple of messages and a
    # few MB more, whatever the number of messages in the read.
    assert peak - before < 60, f"server memory went from {before:.0f} MB to {peak:.0f} MB"
    with GenericEnvClient(base_url=compressed.url).sync() as env:
        result = env.reset(prompt=[{"role": "user", "content": "1+1?"}])
        assert result.observation["turn"] == 0


def test_a_compressed_message_larger_than_a_reset_closes_with_1009(compressed: Server) -> None:
    sock, client = _connection(compressed)
    client.send_text(b"\0" * 2_000_000)  # 2 KB on the wire, over the 865,536-byte bound
    sock.sendall(b"".join(client.data_to_send()))
    assert _close_code(sock, client, within=10) == 1009
    sock.close()
    with GenericEnvClient(base_url=compressed.url).sync() as env:
        result = env.reset(prompt=[{"role": "user", "content": "1+1?"}])
        assert result.observation["turn"] == 0


def _flood_with_pings(server: Server, most: int) -> tuple[socket.socket, int]:
    """Send pings, reading nothing, until the server stops reading or ``most`` bytes."""
    sock, client = _connection(server, compress=False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for _ in range(2000):
        client.send_ping(b"x" * 125)
    pings = b"".join(client.data_to_send())  # 262,000 bytes
    sock.settimeout(2)
    sent, deadline = 0, time.monotonic() + 15
    # The server stopped reading, or closed the connection as a flood of pings (1008).
    with contextlib.suppress(TimeoutError, ConnectionError):
        while sent < most and time.monotonic() < deadline:
            sock.sendall(pings)
            sent += len(pings)
    return sock, sent


@needs_proc
def test_pings_from_a_client_that_reads_nothing_stop_being_read(tmp_path: Path) -> None:
    server = start_server(tmp_path, CONFIG)
    try:
        before = _memory_mb(server.pid, "VmRSS")
        sock, sent = _flood_with_pings(server, 64 << 20)
        peak = _memory_mb(server.pid, "VmHWM")
        sock.close()
        # Before, every pong was held: as many bytes as were sent (64 MB in about 4 s).
        assert peak - before < 30, (
            f"after {sent >> 20} MB of pings the server went from {before:.0f} MB to {peak:.0f} MB"
        )
        with GenericEnvClient(base_url=server.url).sync() as env:
            assert env.reset(prompt=[{"role": "user", "content": "1+1?"}]).observation["turn"] == 0
    finally:
        assert server.stop() == 0, server.output()


def test_a_client_that_reads_nothing_does_not_hold_the_shutdown(tmp_path: Path) -> None:
    """Its close could not be sent: the server waited 30 s, then printed a traceback."""
    server = start_server(tmp_path, CONFIG)
    sock, _ = _flood_with_pings(server, 16 << 20)
    try:
        started = time.monotonic()
        assert server.stop() == 0, server.output()
        took = time.monotonic() - started
    finally:
        sock.close()
    assert took < 10, f"the server took {took:.0f} s to stop"
    assert "Traceback" not in server.output()


@needs_proc
def test_connections_that_played_an_episode_leave_nothing_behind(tmp_path: Path) -> None:
    """Each connection that had an observation kept about 21 KB for ever: its idle timer
    rescheduled itself after the connection ended (3,000 connections: +64 MB)."""
    import json

    server = start_server(tmp_path, CONFIG)
    try:
        reset = json.dumps({"type": "reset", "data": {"prompt": "hi"}}).encode()

        def play(count: int) -> None:
            for _ in range(count):
                sock, client = _connection(server, compress=False)
                client.send_text(reset)
                sock.sendall(b"".join(client.data_to_send()))
                assert isinstance(ws_next(sock, client, 10), str)  # the observation
                client.send_close(1000)
                sock.sendall(b"".join(client.data_to_send()))
                sock.close()

        play(300)  # warm up: allocator pools, imports, caches
        time.sleep(1)
        before = _memory_mb(server.pid, "VmRSS")
        play(2000)
        time.sleep(2)  # the last episodes are finalized
        after = _memory_mb(server.pid, "VmRSS")
        assert after - before < 15, f"server memory went from {before:.0f} to {after:.0f} MB"
        assert server.sessions()["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
