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

import pytest
from blocking_plugins import BLOCK_FOR
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

CONFIG = """\
default: blocking
interaction:
  - name: blocking
    class_name: blocking_plugins.Blocking
  - name: lookup
    class_name: blocking_plugins.SlowLookup
  - name: weather
"""


def _block_in_thread(
    server: Server, outcome: dict[str, Any], how: str = "block", **reset: Any
) -> threading.Thread:
    def play() -> None:
        with GenericEnvClient(base_url=server.url).sync() as env:
            try:
                env.reset(interaction_kwargs={"name": "blocking", **reset})
                outcome["step"] = env.step({"content": how})
            except Exception as exc:
                outcome["error"] = str(exc)

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    time.sleep(0.5)  # the step is being judged
    return thread


def _bystander(server: Server, steps: list[Any]) -> threading.Thread:
    """Another client stepping four times, each step awaiting 0.8 s (``steps`` gets each
    observation, or the error that ended them); returned once its first step awaits."""

    def await_four_times() -> None:
        with GenericEnvClient(base_url=server.url).sync() as env:
            env.reset(interaction_kwargs={"name": "blocking"})
            try:
                for _ in range(4):
                    steps.append(env.step({"content": "await"}).observation)
            except Exception as exc:
                steps.append(str(exc))

    bystander = threading.Thread(target=await_four_times, daemon=True)
    bystander.start()
    time.sleep(0.3)  # its first step awaits
    return bystander


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


@pytest.mark.parametrize(
    ("how", "where"),
    [
        ("slow result", "SlowResult.__iter__"),
        ("slow message", "SlowMessage.__str__"),
        ("slow del", "SlowDel.__del__"),
        ("slow lookup", "SlowLookup.__getattribute__"),
        ("class lookup", None),  # no longer read: the error is told, nothing blocks
        ("local del", "SlowDel.__del__"),
        ("slow format", None),  # the message is kept as plain text: never formatted by it
        ("dict prop", None),  # kept where a __dict__ property cannot hide it: read once
        ("stash del", "SlowDel.__del__"),
        ("final del", "SlowDel.__del__"),
        ("error del", "DelError.__del__"),
        ("args del", "SlowDel.__del__"),
        ("short result", "SlowFloat.__del__"),
        ("start error del", "DelError.__del__"),
        ("start error del over http", "DelError.__del__"),
    ],
)
def test_a_block_in_what_a_step_returned_fails_that_step_alone(
    tmp_path: Path, how: str, where: str | None
) -> None:
    """The runtime looked a step's method up before the plugin's call began, and unpacks
    its result, reads its error message, and dropped what a reset's
    ``start_interaction`` returned after the call ended: a block there
    was broken at --timeout but charged to no call, so the step awaiting beside it timed
    out ("generate_response timed out after 1 s") as if the time had been its own; the
    blocking client's connection was closed with no word. An error message that is a
    ``str`` subclass was formatted after the call, and what the runtime drops after a
    call (the plugin's copy of the conversation, what ``finalize_interaction``
    returned) waited in a reference cycle of the runtime's for the collector, which
    ran inside another client's call."""
    server = start_server(tmp_path, CONFIG, "--timeout", "1")
    try:
        steps: list[Any] = []
        bystander = _bystander(server, steps)
        outcome: dict[str, Any] = {}
        if how == "slow del":  # the reset's own call held the loop its whole --timeout: it
            # may time out itself (the reset is then refused); the bystander must not
            _block_in_thread(server, outcome, "await", slow_del=True).join(BLOCK_FOR)
        elif how == "slow lookup":  # looking the method up, before the call, holds the loop
            _block_in_thread(server, outcome, "x", name="lookup", arm=True).join(BLOCK_FOR)
            assert "blocked the event loop" in outcome.get("error", ""), outcome
        elif how in ("stash del", "final del"):  # dropped after the call: the block is
            # charged to the step, not to the bystander. The step is answered, or, when the
            # block took the call past its --timeout (the watchdog breaks it at about 1 s
            # of the block, which began with the call or a little before it), the step's
            # own call timed out: the episode is over with an error, as `run` records it.
            _block_in_thread(server, outcome, how).join(BLOCK_FOR)
            method = "generate_response" if how == "stash del" else "finalize_interaction"
            told = outcome.get("error", "")
            assert "step" in outcome or f"{method} timed out after 1 s" in told, outcome
        elif how == "start error del":  # the reset's error is answered; what it held is
            # dropped within the reset, not later in OpenEnv's handler
            _block_in_thread(server, outcome, "x", error_del=True).join(BLOCK_FOR)
            assert "raised DelError: no start" in outcome.get("error", ""), outcome
        elif how == "start error del over http":
            status, body = server.post(
                "/reset", {"interaction_kwargs": {"name": "blocking", "error_del": True}}
            )
            assert status >= 400 and "raised DelError: no start" in str(body), (status, body)
        elif how in ("error del", "args del", "short result"):  # the plugin's error (and
            # what its traceback holds) was dropped after the answer, outside the step
            _block_in_thread(server, outcome, how).join(BLOCK_FOR)
            assert "raised" in outcome.get("error", ""), outcome
        elif how in ("local del", "class lookup", "slow format", "dict prop"):  # told
            _block_in_thread(server, outcome, how).join(BLOCK_FOR)
            assert "raised" in outcome.get("error", ""), outcome
        else:
            _block_in_thread(server, outcome, how).join(BLOCK_FOR)
            assert "blocked the event loop" in outcome.get("error", ""), outcome
        bystander.join(BLOCK_FOR)
        assert len(steps) == 4 and all(isinstance(s, dict) for s in steps), steps
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    if where is not None:
        assert f"blocking_plugins.{where} blocked the event loop" in server.output()
    else:
        assert "blocked the event loop" not in server.output()


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


@pytest.mark.parametrize(
    ("how", "told"),
    [
        ("exit task", "raised SystemExit(3)"),
        ("interrupt callback", "raised KeyboardInterrupt('from a timer')"),
        ("exit odd", "raised SystemExit(<BadRepr>)"),  # its repr raised: the server died
        ("exit args", "raised ArgsExit(3)"),  # its class's args property raised: the same
        ("loop stop", "stopped the event loop"),
        ("storm", "raised KeyboardInterrupt('storm')"),  # 300,000 lines in 5 s
    ],
)
def test_a_stop_raised_by_a_plugins_own_task_leaves_the_server_serving(
    tmp_path: Path, how: str, told: str
) -> None:
    """asyncio lets SystemExit and KeyboardInterrupt raised in a task or a timer leave the
    loop: the server ended (exit 3, or 130 as if the user had pressed Ctrl-C) with every
    client's episode and a page of tracebacks. It is told in one line and the loop runs
    on: the bystander's episode and new clients are served, and the server exits 0."""
    server = start_server(tmp_path, CONFIG, "--timeout", "5")
    try:
        steps: list[Any] = []
        bystander = _bystander(server, steps)
        outcome: dict[str, Any] = {}
        _block_in_thread(server, outcome, how).join(BLOCK_FOR)
        assert "step" in outcome, outcome
        bystander.join(BLOCK_FOR)
        assert len(steps) == 4 and all(isinstance(s, dict) for s in steps), steps
        with GenericEnvClient(base_url=server.url).sync() as env:  # still serving
            env.reset(interaction_kwargs={"name": "weather"})
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    output = server.output()
    assert f"plugin code {told}" in output, output
    if how != "loop stop":  # (loop.stop() leaves no trace of its caller)
        assert "blocking_plugins.py:" in output, output  # where it was raised
    assert "Traceback" not in output, output
    assert output.count("plugin code ") <= 3, output.count("plugin code ")  # one per 5 s


def test_sigterm_ends_the_server_though_a_plugin_left_a_thread_blocking(tmp_path: Path) -> None:
    """A blocking client run in ``asyncio.to_thread`` (as the docs advise) with no timeout
    of its own: the step timed out, but after a SIGTERM the server logged its end and the
    process waited for the thread (an hour, for an hour's block; a second SIGTERM
    killed it, 143). The thread is named and the process exits."""
    server = start_server(tmp_path, CONFIG, "--timeout", "1")
    outcome: dict[str, Any] = {}
    _block_in_thread(server, outcome, "thread").join(BLOCK_FOR)
    assert "timed out" in outcome.get("error", ""), outcome
    started = time.monotonic()
    assert server.stop(signal.SIGTERM) == 0, server.output()
    assert time.monotonic() - started < 15
    assert "still running" in server.output() and "serve-executor" in server.output()


def _finalize_fails_slowly(server: Server, how: str, **kwargs: Any) -> None:
    """An episode whose finalize raises an error with a slow ``__del__`` (or, with other
    ``kwargs``, whatever they ask of the plugin), ended ``how``."""
    kwargs = {"name": "blocking", **(kwargs or {"finalize_error_del": True})}
    if how == "http reset":  # a stateless reset: its session is finalized at once
        status, body = server.post("/reset", {"interaction_kwargs": kwargs})
        assert status == 200, body
        return
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(interaction_kwargs=kwargs)
        if how == "reset again":
            env.reset(interaction_kwargs={"name": "blocking"})
        elif how == "done":  # the last turn: the finalize is charged the block, and times
            # out when the block took it past --timeout (broken at about 1 s: it may not)
            try:
                env.step({"content": "final del"})
            except Exception as exc:
                assert "finalize_interaction timed out after 1 s" in str(exc), exc
        elif how == "too long":
            with pytest.raises(Exception, match="over this server's limit"):
                env.step({"content": "x" * 20_000})
        # "disconnect": the connection closes here, with the episode open


@pytest.mark.parametrize("how", ["reset again", "too long", "disconnect", "http reset"])
def test_a_finalize_error_is_dropped_within_its_close_wherever_it_ends(
    tmp_path: Path, how: str
) -> None:
    # The error a finalize returned (with what it holds) was dropped after the close, on
    # four paths outside every tracked frame: a slow __del__ there was charged to no call,
    # and the step awaiting beside it timed out ("generate_response timed out after 1 s").
    server = start_server(tmp_path, CONFIG, "--timeout", "1", "--max-episode-chars", "10000")
    try:
        steps: list[Any] = []
        bystander = _bystander(server, steps)
        _finalize_fails_slowly(server, how)
        bystander.join(BLOCK_FOR)
        assert len(steps) == 4 and all(isinstance(s, dict) for s in steps), steps
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    assert "blocking_plugins.DelError.__del__ blocked the event loop" in server.output()
    assert "DelError: cleanup failed" in server.output()
    # the watchdog names the broken __del__ in a line; Python printed its traceback too
    assert "Exception ignored in" not in server.output(), server.output()


def test_a_finalize_that_fails_on_the_last_turn_is_the_episodes_error(tmp_path: Path) -> None:
    # The client got the last turn's reward and `done` as if all went well, the error in
    # the server's log only; `interactions run` records the same episode as an error.
    server = start_server(tmp_path, CONFIG)
    try:
        with GenericEnvClient(base_url=server.url).sync() as env:
            env.reset(interaction_kwargs={"name": "blocking", "finalize_raises": True})
            with pytest.raises(Exception) as caught:
                env.step({"content": "final del"})
            text = str(caught.value)
            assert "finalize_interaction raised RuntimeError: cleanup failed plainly" in text
            assert "with no reward" in text, text
            with pytest.raises(Exception, match="the episode ended with an error"):
                env.step({"content": "again"})
            env.reset(interaction_kwargs={"name": "blocking"})  # the connection serves on
            assert env.step({"content": "final del"}).done  # a clean last turn as before
        counts = server.wait_sessions(0)
        assert counts["open"] == 0 and counts["started"] == counts["finalized"] == 2, counts
    finally:
        assert server.stop() == 0, server.output()


def test_a_plugins_own_call_error_is_told_as_any_plugin_error(tmp_path: Path) -> None:
    # Session is public API: a plugin delegating to another interaction raises its
    # InteractionCallError, which was passed on untouched: 5 MB sent to the client and the
    # log, naming another interaction; one whose __str__ raised KeyboardInterrupt closed
    # the connection with no word and an "Exception in ASGI application" traceback.
    server = start_server(tmp_path, CONFIG)
    try:
        for content, told in [
            ("call error big", "raised InteractionCallError: interaction 'other'"),
            ("call error stop", "raised StopTellingCallError: <no message"),
        ]:
            with GenericEnvClient(base_url=server.url).sync() as env:
                env.reset(interaction_kwargs={"name": "blocking"})
                with pytest.raises(Exception) as caught:
                    env.step({"content": content})
                text = str(caught.value)
                assert "interaction 'blocking'" in text and told in text, text[:500]
                assert len(text) < 20_000, len(text)
                assert "The episode is over" in text, text[:500]
                env.reset(interaction_kwargs={"name": "blocking"})  # the connection serves on
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    assert "Exception in ASGI application" not in server.output()
    assert len(server.output()) < 100_000, len(server.output())


def test_a_lone_surrogate_in_a_plugins_error_is_sent_escaped(tmp_path: Path) -> None:
    # A client's "\ud800" a plugin echoed in its error: HTTP /reset answered 500 with a
    # traceback in the log; over /ws the message was lost ("Error serializing to JSON")
    # and the connection closed.
    server = start_server(tmp_path, CONFIG)
    try:
        kwargs = {"name": "blocking", "ground_truth": "\ud800"}
        status, body = server.post("/reset", {"interaction_kwargs": kwargs})
        assert status == 400 and "got \\ud800;" in body["detail"], (status, body)
        with GenericEnvClient(base_url=server.url).sync() as env:
            with pytest.raises(Exception, match=r"got \\ud800"):
                env.reset(interaction_kwargs=kwargs)
            env.reset(interaction_kwargs={"name": "blocking"})
            with pytest.raises(Exception, match=r"cannot parse answer \\ud800"):
                env.step({"content": "\ud800"})
            env.reset(interaction_kwargs={"name": "blocking"})  # the connection serves on
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    assert "Exception in ASGI application" not in server.output()


@pytest.mark.parametrize("how", ["done", "reset again", "disconnect", "http reset"])
def test_what_a_plugin_keeps_in_its_kwargs_is_dropped_within_its_finalize(
    tmp_path: Path, how: str
) -> None:
    # A plugin keeping a resource in a nested kwarg (box["held"] = ...) left it in the
    # session's copy of the kwargs, which lived on after the finalize and was dropped with
    # the session, outside every tracked frame: a slow __del__ there timed out the step
    # another client was awaiting.
    server = start_server(tmp_path, CONFIG, "--timeout", "1")
    try:
        steps: list[Any] = []
        bystander = _bystander(server, steps)
        _finalize_fails_slowly(server, how, box={})
        bystander.join(BLOCK_FOR)
        assert len(steps) == 4 and all(isinstance(s, dict) for s in steps), steps
        assert server.wait_sessions(0)["open"] == 0
    finally:
        assert server.stop() == 0, server.output()
    assert "blocking_plugins.SlowDel.__del__ blocked the event loop" in server.output()


@pytest.mark.parametrize("over", ["ws", "http"])
def test_what_a_failed_start_kept_in_its_kwargs_is_dropped_within_the_reset(
    tmp_path: Path, over: str
) -> None:
    # A start_interaction that kept a resource in a nested kwarg and then failed: the
    # refusal's traceback carried the reset's frame, and the kwargs with it, out to the
    # web server's handler (HTTP: another client's step timed out) or into a reference
    # cycle left to the collector (/ws: it ran at exit, 30 s later).
    server = start_server(tmp_path, CONFIG, "--timeout", "1")
    try:
        steps: list[Any] = []
        bystander = _bystander(server, steps)
        kwargs = {"name": "blocking", "box": {}, "ground_truth": "x"}
        if over == "http":
            status, body = server.post("/reset", {"interaction_kwargs": kwargs})
            assert status == 400 and "must be digits" in body["detail"], (status, body)
        else:
            with GenericEnvClient(base_url=server.url).sync() as env:
                with pytest.raises(Exception, match="must be digits"):
                    env.reset(interaction_kwargs=kwargs)
                time.sleep(1.5)  # dropped within the reset: named while the server serves
                assert "SlowDel.__del__ blocked the event loop" in server.output()
        bystander.join(BLOCK_FOR)
        assert len(steps) == 4 and all(isinstance(s, dict) for s in steps), steps
    finally:
        assert server.stop() == 0, server.output()
    assert "blocking_plugins.SlowDel.__del__ blocked the event loop" in server.output()


def test_a_plugins_error_quoting_the_client_is_one_escaped_log_line(tmp_path: Path) -> None:
    # A plugin's error quoting the client's text ("ground_truth must be digits, got ...")
    # was logged raw: the client forged whole lines of the operator's log, and terminal
    # escapes.
    server = start_server(tmp_path, CONFIG)
    try:
        forged = "1\nWARNING:  forged: server compromised\r\x1b[2Kfake"
        with (
            GenericEnvClient(base_url=server.url).sync() as env,
            pytest.raises(Exception, match="ground_truth must be digits"),
        ):
            env.reset(interaction_kwargs={"name": "blocking", "ground_truth": forged})
    finally:
        assert server.stop() == 0, server.output()
    log = server.output()
    assert "ground_truth must be digits, got 1\\nWARNING:  forged" in log, log
    assert not any(line.startswith("WARNING:  forged") for line in log.splitlines())
    assert "\x1b" not in log and "\r" not in log
