"""A plugin step that blocks the server's event loop: reported by name, broken at
``--timeout``, and no obstacle to a second stop signal."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from blocking_plugins import BLOCK_FOR
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

CONFIG = """\
default: blocking
interaction:
  - name: blocking
    class_name: blocking_plugins.Blocking
  - name: weather
"""


def _block_in_thread(
    server: Server, outcome: dict[str, Any], how: str = "block"
) -> threading.Thread:
    def play() -> None:
        with GenericEnvClient(base_url=server.url).sync() as env:
            env.reset(interaction_kwargs={"name": "blocking"})
            try:
                outcome["step"] = env.step({"content": how})
            except Exception as exc:
                outcome["error"] = str(exc)

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    time.sleep(0.5)  # the step is being judged
    return thread


def test_timeout_breaks_a_blocking_step_and_the_others_go_on(tmp_path: Path) -> None:
    server = start_server(tmp_path, CONFIG, "--timeout", "1")
    try:
        outcome: dict[str, Any] = {}
        started = time.monotonic()
        thread = _block_in_thread(server, outcome)
        with urllib.request.urlopen(server.url + "/health", timeout=BLOCK_FOR) as response:
            assert response.status == 200
        with GenericEnvClient(base_url=server.url).sync() as env:
            env.reset(interaction_kwargs={"name": "weather"})
        thread.join(BLOCK_FOR)
        assert time.monotonic() - started < BLOCK_FOR / 2  # the sleep did not run out
        assert "blocked the event loop" in outcome.get("error", ""), outcome
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    assert "blocking_plugins.Blocking.generate_response blocked the event loop" in server.output()


def test_a_second_signal_stops_at_once_while_a_plugin_blocks(tmp_path: Path) -> None:
    server = start_server(tmp_path, CONFIG)  # no --timeout: the block is only reported
    outcome: dict[str, Any] = {}
    _block_in_thread(server, outcome)
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(BLOCK_FOR / 2)
    except subprocess.TimeoutExpired:
        server.stop(signal.SIGKILL)
        raise AssertionError(
            f"a second signal did not stop the server:\n{server.output()}"
        ) from None
    assert time.monotonic() - started < BLOCK_FOR / 2
    assert "blocking_plugins.Blocking.generate_response" in server.output()


def test_a_plugin_that_swallows_the_break_is_told_and_a_second_signal_ends_the_server(
    tmp_path: Path,
) -> None:
    """A step that catches every exception was broken every --timeout, silently, and
    SIGTERM three times could not stop the server: only SIGKILL did."""
    server = start_server(tmp_path, CONFIG, "--timeout", "1")
    _block_in_thread(server, {}, "swallow")
    time.sleep(4)  # broken at 1 s, swallowed, seen holding the loop again
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(20)
    except subprocess.TimeoutExpired:
        server.stop(signal.SIGKILL)
        raise AssertionError(f"two signals did not stop the server:\n{server.output()}") from None
    assert time.monotonic() - started < 15
    output = server.output()
    assert "Blocking.generate_response caught the exception that broke its block" in output
    assert "still running 5 s after the second stop signal" in output
