"""Shutting down while a plugin's ``finalize_interaction`` hangs: a warning that says so, and
counters that do not claim the session was finalized."""

from __future__ import annotations

import time
from pathlib import Path

from openenv.core import GenericEnvClient
from server_harness import start_server

CONFIG = """\
default: hung
interaction:
  - name: hung
    class_name: odd_plugins.HungFinalize
"""


def test_a_hung_finalize_at_shutdown_is_reported_truthfully(tmp_path: Path) -> None:
    server = start_server(tmp_path, CONFIG)
    client = GenericEnvClient(base_url=server.url).sync()
    client.connect()
    client.reset(prompt=[{"role": "user", "content": "hi"}])
    assert server.sessions()["open"] == 1
    assert server.stop(timeout=60) == 0, server.output()
    client.close()
    output = server.output()
    assert "Exception in ASGI application" not in output, output
    assert "1 session(s) not finalized: finalize_interaction did not return" in output, output
    assert "shut down: 0 sessions finalized at shutdown; 1 started, 0 finalized, 1 open" in output


def test_hung_finalizes_hold_the_shutdown_10_s_in_all(tmp_path: Path) -> None:
    """Two sessions whose finalize hangs: each closing connection waits 10 s for its own,
    and the shutdown's count, which waits for finalizes under way, counts from the moment
    the connections began to close (counting afresh made it 20 s)."""
    server = start_server(tmp_path, CONFIG)
    clients = [GenericEnvClient(base_url=server.url).sync() for _ in range(2)]
    for client in clients:
        client.connect()
        client.reset(prompt=[{"role": "user", "content": "hi"}])
    assert server.sessions()["open"] == 2
    started = time.monotonic()
    assert server.stop(timeout=60) == 0, server.output()
    took = time.monotonic() - started
    for client in clients:
        client.close()
    output = server.output()
    assert took < 16, (took, output)
    told = "2 session(s) not finalized: finalize_interaction did not return within 10 s of the"
    assert f"{told} shutdown" in output, output
    assert "2 started, 0 finalized, 2 open" in output, output


SLOW_FINALIZE = """\
default: logged
interaction:
  - name: logged
    class_name: serve_plugins.Logged
    config: {log: "{events}", finalize_wait: 8}
"""


def test_a_second_signal_during_finalizes_counts_them_as_not_finalized(tmp_path: Path) -> None:
    """Three sessions finalizing (8 s each) at a second SIGTERM: the forced stop cancelled
    the closing connections' finalizes, and the log said "3 sessions finalized at shutdown;
    3 started, 3 finalized, 0 open", though no finalize_interaction returned."""
    import os
    import signal

    server = start_server(tmp_path, SLOW_FINALIZE)
    clients = [GenericEnvClient(base_url=server.url).sync() for _ in range(3)]
    for client in clients:
        client.connect()
        client.reset(prompt=[{"role": "user", "content": "hi"}])
    os.kill(server.pid, signal.SIGTERM)
    time.sleep(2)  # the connections are closing: their finalizes await
    server.stop(signal.SIGTERM, timeout=30)
    for client in clients:
        client.close()
    output = server.output()
    assert not [line for line in server.event_lines() if line.startswith("finalize")]
    assert "3 session(s) not finalized: the second stop signal ended them" in output, output
    assert "3 started, 0 finalized, 3 open" in output, output


BLOCKING = """\
default: blocking
interaction:
  - name: blocking
    class_name: blocking_plugins.Blocking
"""


def test_an_http_reset_the_shutdown_stops_is_answered_503(tmp_path: Path) -> None:
    """An HTTP reset still starting when the shutdown cancelled it got a bare 500 and the
    log "ASGI callable returned without starting response"."""
    import os
    import signal
    import threading

    server = start_server(tmp_path, BLOCKING)
    answers: list[tuple[int, object]] = []
    reset = {"interaction_kwargs": {"name": "blocking", "start_sleep": 60}}
    asking = threading.Thread(target=lambda: answers.append(server.post("/reset", reset)))
    asking.start()
    time.sleep(1.5)  # the start awaits
    os.kill(server.pid, signal.SIGTERM)
    time.sleep(1)
    assert server.stop(signal.SIGTERM, timeout=30) == 0, server.output()
    asking.join(30)
    ((status, body),) = answers
    assert status == 503, (status, body)
    assert "the server is shutting down and stopped this request" in str(body), body
    assert "without starting response" not in server.output(), server.output()
