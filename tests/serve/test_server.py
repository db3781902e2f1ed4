"""``interactions serve`` as a real process on 127.0.0.1, driven by OpenEnv's own client.

Every test talks to the server through ``openenv.core.GenericEnvClient`` (the
async client or its ``.sync()`` wrapper) or plain HTTP, and reads the server's
session counters (``GET /interactions``) and the test plugin's event log to
check that every session was finalized.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from interactions_gsm8k.interaction import CORRECT_MESSAGE, INCORRECT_MESSAGE
from openenv.core import GenericEnvClient
from server_harness import Server, start_server

CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
  - name: weather
  - name: logged
    class_name: serve_plugins.Logged
    config: {log: "{events}", slow: 1.5}
  - name: slow_release
    class_name: serve_plugins.Logged
    config: {log: "{events}", finalize_wait: 2}
"""
MAX_SESSIONS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(
        tmp_path_factory.mktemp("serve"), CONFIG, "--max-sessions", str(MAX_SESSIONS)
    )
    yield running
    assert running.stop() == 0, running.output()


@pytest.fixture(autouse=True)
def _no_session_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test that used the shared server leaves no session open."""
    yield
    if "server" in request.fixturenames:
        running: Server = request.getfixturevalue("server")
        counts = running.wait_sessions(0)
        assert counts["open"] == 0, counts
        assert counts["started"] == counts["finalized"], counts


def first_gsm8k_row(gsm8k_data: Path) -> tuple[str, str]:
    line = (gsm8k_data / "test.jsonl").read_text(encoding="utf-8").splitlines()[0]
    row = json.loads(line)
    return row["question"], row["answer"].rsplit("####", 1)[1].strip()


async def test_gsm8k_wrong_then_right(server: Server, gsm8k_data: Path) -> None:
    question, answer = first_gsm8k_row(gsm8k_data)
    prompt = [{"role": "user", "content": question}]
    before = server.sessions()
    async with GenericEnvClient(base_url=server.url) as env:
        result = await env.reset(
            prompt=prompt, interaction_kwargs={"name": "gsm8k", "ground_truth": answer}
        )
        assert result.done is False
        assert result.observation["messages"] == prompt
        assert result.observation["turn"] == 0
        assert result.observation["interaction"] == "gsm8k"
        assert server.sessions()["open"] == before["open"] + 1

        wrong = await env.step({"content": f"I think it is\n#### {int(answer) + 1}"})
        assert (wrong.reward, wrong.done) == (0.0, False)
        obs = wrong.observation
        assert obs["feedback"] == INCORRECT_MESSAGE
        assert obs["turn"] == 1
        assert obs["final_score"] is None
        assert [m["role"] for m in obs["messages"]] == ["user", "assistant", "user"]

        right = await env.step({"content": f"Let me recount.\n#### {answer}"})
        assert (right.reward, right.done) == (1.0, True)
        obs = right.observation
        assert obs["feedback"] == CORRECT_MESSAGE
        assert obs["final_score"] == 1.0
        assert obs["turn"] == 2
        assert obs["interaction"] == "gsm8k"
        assert [m["role"] for m in obs["messages"]] == ["user", "assistant", "user", "assistant"]
        # The episode is over: its session was finalized while the client is still connected.
        after = server.sessions()
        assert after["open"] == before["open"]
        assert after["finalized"] == before["finalized"] + 1


def test_routing_by_name_and_default_with_the_sync_client(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        default = env.reset(
            prompt=[{"role": "user", "content": "2+2?"}], interaction_kwargs={"ground_truth": "4"}
        )
        assert default.observation["interaction"] == "gsm8k"
        assert env.step({"content": "#### 4"}).reward == 1.0

        weather = env.reset(prompt="weather in Paris?", interaction_kwargs={"name": "weather"})
        assert weather.observation["interaction"] == "weather"
        assert weather.observation["messages"] == [{"role": "user", "content": "weather in Paris?"}]
        result = env.step({"content": "It is sunny."})
        assert result.done is True
        assert result.observation["interaction"] == "weather"
        assert result.observation["feedback"].startswith("Please use the weather tool")

        logged = env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        assert logged.observation["interaction"] == "logged"
        result = env.step({"content": "x"})
        assert (result.reward, result.done, result.observation["final_score"]) == (1.0, True, 0.25)
        sid = env.state()["episode_id"]
    assert f"start {sid}" in server.event_lines()
    assert f"finalize {sid}" in server.event_lines()


def test_a_new_reset_ends_the_episode_in_progress(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        first = env.state()["episode_id"]
        env.step({"content": "no"})
        env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        assert f"finalize {first}" in server.event_lines()
        assert env.state()["open"] is True
        assert server.sessions()["open"] == 1


def test_unknown_name_is_a_readable_error_and_the_connection_goes_on(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        with pytest.raises(RuntimeError) as info:
            env.reset(interaction_kwargs={"name": "gsm9k", "ground_truth": "1"})
        message = str(info.value)
        assert "interaction 'gsm9k' is not served here" in message
        assert "did you mean 'gsm8k'?" in message
        assert "Served: gsm8k, weather, logged" in message
        with pytest.raises(RuntimeError, match=r"unknown reset argument.*ground_truth"):
            env.reset(ground_truth="1")
        with pytest.raises(RuntimeError, match="prompt must be a list of chat messages"):
            env.reset(prompt={"role": "user"})
        # The same connection still plays an episode.
        assert env.reset(interaction_kwargs={"ground_truth": "1"}).observation["turn"] == 0
        assert env.step({"content": "#### 1"}).done is True


def test_bad_actions_are_readable_errors(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        with pytest.raises(RuntimeError, match="no episode has been started: call reset"):
            env.step({"content": "#### 1"})
        env.reset(interaction_kwargs={"ground_truth": "1"})
        with pytest.raises(RuntimeError) as info:
            env.step({"text": "#### 1"})
        assert "bad action" in str(info.value)
        assert "content: Field required" in str(info.value)
        assert '{"content": "<the assistant\'s message>"}' in str(info.value)
        with pytest.raises(RuntimeError, match="content: Input should be a valid string"):
            env.step({"content": 1})
        # The episode survived the bad actions.
        result = env.step({"content": "#### 1"})
        assert (result.reward, result.done) == (1.0, True)
        with pytest.raises(RuntimeError, match="the episode ended after turn 1: call reset"):
            env.step({"content": "#### 1"})


def test_a_plugin_that_raises_ends_its_episode_only(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        sid = env.state()["episode_id"]
        with pytest.raises(RuntimeError) as info:
            env.step({"content": "boom"})
        message = str(info.value)
        assert "interaction 'logged'" in message
        assert "generate_response raised RuntimeError: the plugin exploded" in message
        assert "The episode is over and its session finalized" in message
        assert f"finalize {sid}" in server.event_lines()
        with pytest.raises(RuntimeError, match="the episode ended with an error: call reset"):
            env.step({"content": "x"})
        # The server and the connection keep serving.
        env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        assert env.step({"content": "x"}).done is True
    assert server.get("/health")["status"] == "healthy"


async def test_concurrent_sessions_up_to_the_limit_then_a_capacity_error(server: Server) -> None:
    clients = [GenericEnvClient(base_url=server.url) for _ in range(MAX_SESSIONS + 1)]
    try:
        for env in clients:
            await env.connect()
        results = await asyncio.gather(
            *(
                env.reset(interaction_kwargs={"name": "logged", "ground_truth": str(i)})
                for i, env in enumerate(clients[:MAX_SESSIONS])
            )
        )
        assert all(r.observation["turn"] == 0 for r in results)
        assert server.sessions()["open"] == MAX_SESSIONS
        extra = clients[MAX_SESSIONS]
        with pytest.raises(RuntimeError) as info:
            await extra.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        message = str(info.value)
        assert f"the server is at capacity: {MAX_SESSIONS} of {MAX_SESSIONS} sessions" in message
        assert "--max-sessions" in message
        # The sessions in progress are unaffected, and play concurrently.
        steps = await asyncio.gather(
            *(env.step({"content": str(i)}) for i, env in enumerate(clients[:MAX_SESSIONS]))
        )
        assert [s.reward for s in steps] == [1.0] * MAX_SESSIONS
        # Their episodes ended: the refused client retries and gets a session.
        retry = await extra.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        assert retry.observation["interaction"] == "logged"
        assert (await extra.step({"content": "x"})).done is True
    finally:
        for env in clients:
            await env.close()


async def test_a_client_that_disconnects_mid_episode_gets_its_session_finalized(
    server: Server,
) -> None:
    env = GenericEnvClient(base_url=server.url)
    await env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
    await env.step({"content": "not yet"})
    sid = (await env.state())["episode_id"]
    assert server.sessions()["open"] == 1
    await env.close()
    assert server.wait_sessions(0)["open"] == 0
    assert f"finalize {sid}" in server.event_lines()


KILLED_CLIENT = textwrap.dedent(
    """
    import sys, time
    from openenv.core import GenericEnvClient

    env = GenericEnvClient(base_url=sys.argv[1]).sync()
    env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
    env.step({"content": "not yet"})
    print(env.state()["episode_id"], flush=True)
    time.sleep(600)
    """
)


def test_a_client_killed_mid_episode_gets_its_session_finalized(server: Server) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, server.url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        sid = proc.stdout.readline().strip()
        assert sid and server.sessions()["open"] == 1
    finally:
        proc.kill()  # no close message, no WebSocket close frame: the socket just goes away
        proc.wait(10)
    assert server.wait_sessions(0)["open"] == 0
    assert f"finalize {sid}" in server.event_lines()


def test_http_endpoints(server: Server) -> None:
    schema = server.get("/schema")
    assert schema["action"]["required"] == ["content"]
    fields = set(schema["observation"]["properties"])
    expected = {"messages", "feedback", "turn", "final_score", "interaction", "done", "reward"}
    assert expected <= fields
    metadata = server.get("/metadata")
    assert metadata["name"] == "interactions"
    assert "gsm8k (interactions-gsm8k:gsm8k) [default]" in metadata["description"]
    described = server.get("/interactions")
    assert [i["name"] for i in described["interactions"]] == [
        "gsm8k",
        "weather",
        "logged",
        "slow_release",
    ]
    assert described["default"] == "gsm8k"
    assert described["max_sessions"] == MAX_SESSIONS
    # Stateless HTTP: a reset plays nothing further, and its session does not stay open.
    status, body = server.post(
        "/reset", {"prompt": [{"role": "user", "content": "hi"}], "interaction_kwargs": {}}
    )
    assert status == 200
    assert body["observation"]["messages"] == [{"role": "user", "content": "hi"}]
    assert body["observation"]["interaction"] == "gsm8k"
    status, body = server.post("/reset", {"interaction_kwargs": {"name": "nope"}})
    assert status == 400
    assert "interaction 'nope' is not served here" in body["detail"]
    status, body = server.post("/step", {"action": {"content": "#### 1"}})
    assert status == 422
    assert "no episode has been started" in body["detail"]
    assert "serving 4 interactions: gsm8k (interactions-gsm8k:gsm8k) [default]" in server.output()


TOKEN = "s3cret-token"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Server]:
    running = start_server(
        tmp_path, CONFIG, "--max-turns", "2", env={"INTERACTIONS_SERVE_TOKEN": TOKEN}
    )
    yield running
    assert running.stop() == 0, running.output()


def test_shared_token_and_max_turns(guarded: Server) -> None:
    with GenericEnvClient(base_url=guarded.url).sync() as env:
        with pytest.raises(RuntimeError, match="requires its shared token and no token was given"):
            env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        with pytest.raises(RuntimeError, match="the token does not match"):
            env.reset(interaction_kwargs={"name": "logged"}, token="wrong")
        env.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"}, token=TOKEN)
        first = env.step({"content": "a"})
        assert (first.done, first.reward) == (False, 0.0)
        second = env.step({"content": "b"})  # --max-turns 2: over, though not right
        assert (second.done, second.reward, second.observation["final_score"]) == (
            True,
            0.0,
            0.25,
        )
    assert guarded.wait_sessions(0)["open"] == 0


def test_sigterm_answers_a_last_turn_whose_finalize_is_still_running(tmp_path: Path) -> None:
    """The step of a last turn is in flight until its session is finalized and its answer
    is ready: the drain counted it done once judged, so a SIGTERM during a 2 s
    ``finalize_interaction`` (releasing a sandbox) closed the connection (1012) and the
    reward and the final score were never sent."""
    import threading

    running = start_server(tmp_path, CONFIG)
    env = GenericEnvClient(base_url=running.url).sync()
    outcome: list[object] = []
    try:
        env.reset(interaction_kwargs={"name": "slow_release", "ground_truth": "x"})
        episode = env.state()["episode_id"]

        def last_step() -> None:
            try:
                outcome.append(env.step({"content": "x"}))  # right: the episode ends
            except Exception as exc:
                outcome.append(exc)

        worker = threading.Thread(target=last_step)
        worker.start()
        time.sleep(0.5)  # judged; the finalize is under way
        assert running.stop(signal.SIGTERM) == 0, running.output()
        worker.join(30)
    finally:
        try:
            env.close()
        except Exception:
            pass
    assert outcome and not isinstance(outcome[0], Exception), outcome
    result: typing.Any = outcome[0]
    assert result.done is True, result
    assert result.observation["final_score"] == 0.25, result.observation
    assert f"finalize {episode}" in running.event_lines()
    assert "finishing 1 step(s) or start(s) in flight" in running.output(), running.output()


def test_sigterm_drains_open_sessions_and_in_flight_steps(tmp_path: Path) -> None:
    running = start_server(tmp_path, CONFIG)
    idle = GenericEnvClient(base_url=running.url).sync()
    busy = GenericEnvClient(base_url=running.url).sync()
    try:
        idle.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        idle_id = idle.state()["episode_id"]
        busy.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        busy_id = busy.state()["episode_id"]
        assert running.sessions()["open"] == 2

        outcome: list[object] = []

        def slow_step() -> None:
            try:
                outcome.append(busy.step({"content": "slow"}))  # the plugin sleeps 1.5 s
            except Exception as exc:
                outcome.append(exc)

        import threading

        worker = threading.Thread(target=slow_step)
        worker.start()
        time.sleep(0.5)  # the step is in flight
        started = time.monotonic()
        assert running.stop(signal.SIGTERM) == 0, running.output()
        worker.join(30)
    finally:
        for env in (idle, busy):
            try:
                env.close()
            except Exception:
                pass
    assert time.monotonic() - started < 30
    # The in-flight step was answered before the connection closed.
    assert outcome and not isinstance(outcome[0], Exception), outcome
    events = running.event_lines()
    assert f"finalize {idle_id}" in events
    assert f"finalize {busy_id}" in events
    assert events.count(f"start {idle_id}") == events.count(f"finalize {idle_id}") == 1
    output = running.output()
    assert "finishing 1 step(s) or start(s) in flight" in output, output
    assert "2 started, 2 finalized, 0 open" in output, output
    assert "Traceback" not in output, output


def test_a_second_signal_stops_at_once_and_still_finalizes_every_session(
    tmp_path: Path,
) -> None:
    """Ctrl-C twice: no waiting for a slow step, but no session is left unfinalized."""
    running = start_server(tmp_path, CONFIG.replace("slow: 1.5", "slow: 60"))
    idle = GenericEnvClient(base_url=running.url).sync()
    busy = GenericEnvClient(base_url=running.url).sync()
    try:
        idle.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        idle_id = idle.state()["episode_id"]
        busy.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        busy_id = busy.state()["episode_id"]

        import threading

        def slow_step() -> None:
            try:
                busy.step({"content": "slow"})  # the plugin sleeps 60 s
            except Exception:
                pass  # the server went away mid-step: expected

        threading.Thread(target=slow_step, daemon=True).start()
        time.sleep(0.5)  # the step is in flight
        os.kill(running.pid, signal.SIGINT)
        time.sleep(0.5)  # the drain has started
        started = time.monotonic()
        running.stop(signal.SIGINT, timeout=25)
        took = time.monotonic() - started
    finally:
        for env in (idle, busy):
            try:
                env.close()
            except Exception:
                pass
    output = running.output()
    assert took < 15, (took, output)  # neither the 60 s step nor the 30 s drain was awaited
    assert running.proc.returncode == 0, output
    events = running.event_lines()
    assert f"finalize {idle_id}" in events, (events, output)
    assert f"finalize {busy_id}" in events, (events, output)
    assert "2 started, 2 finalized, 0 open" in output, output
    # The tasks the forced shutdown cancels end quietly: no traceback for each
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output


def _two_signals_during_a_slow_step(tmp_path: Path, config: str) -> tuple[Server, str]:
    """Serve ``config``, start a 60 s step, then send SIGINT twice, 0.5 s apart."""
    running = start_server(tmp_path, config)
    busy = GenericEnvClient(base_url=running.url).sync()
    try:
        busy.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        instance_id = running.event_lines()[-1].split()[-1]
        import threading

        def slow_step() -> None:
            with contextlib.suppress(Exception):  # the server goes away mid-step
                busy.step({"content": "slow"})

        threading.Thread(target=slow_step, daemon=True).start()
        time.sleep(0.5)
        os.kill(running.pid, signal.SIGINT)
        time.sleep(0.5)
        running.stop(signal.SIGINT, timeout=25)
    finally:
        with contextlib.suppress(Exception):
            busy.close()
    return running, instance_id


def test_a_second_signal_reports_a_finalize_that_completed_as_done(tmp_path: Path) -> None:
    """The forced stop cancels the step, whose session is then finalized (it awaits 0.05 s);
    the log counted it before that finished: "1 session(s) not finalized", "0 finalized",
    although the plugin's finalize_interaction ran to its end. And the handlers uvicorn puts
    back as it returns were taken, now and then, for a plugin's ("replaced the handler")."""
    config = CONFIG.replace("slow: 1.5", "slow: 60, finalize_wait: 0.05")
    running, instance_id = _two_signals_during_a_slow_step(tmp_path, config)
    output = running.output()
    assert running.proc.returncode == 0, output
    assert f"finalize {instance_id}" in running.event_lines(), output
    assert "not finalized" not in output, output
    assert "1 started, 1 finalized, 0 open" in output, output
    assert "replaced the handler" not in output, output


def test_a_second_signal_names_a_finalize_that_hangs_before_the_hard_exit(
    tmp_path: Path,
) -> None:
    """A finalize that outlasts the forced stop is told, with the wait it was given, before
    the process ends itself 5 s after the second signal."""
    config = CONFIG.replace("slow: 1.5", "slow: 60, finalize_wait: 60")
    started = time.monotonic()
    running, instance_id = _two_signals_during_a_slow_step(tmp_path, config)
    output = running.output()
    assert time.monotonic() - started < 20, output
    assert f"finalize {instance_id}" not in running.event_lines(), output
    assert (
        "1 session(s) not finalized: the second stop signal ended them (a finalize gets at "
        "most 3 s then)" in output
    ), output
    assert "1 started, 0 finalized, 1 open" in output, output


def test_one_signal_cancels_what_outlasts_the_drain_without_a_traceback(tmp_path: Path) -> None:
    """A start longer than the drain: it was not waited for ("finishing 0 step(s)"), uvicorn
    waited 30 s more, then logged "Exception in ASGI application" with a traceback."""
    config = CONFIG + "  - name: slowstart\n    class_name: serve_plugins.SlowStart\n"
    config += '    config: {log: "{events}", start: 75}\n'
    running = start_server(tmp_path, config)
    client = GenericEnvClient(base_url=running.url).sync()

    def slow_reset() -> None:
        with contextlib.suppress(Exception):  # the server ends the connection
            client.reset(interaction_kwargs={"name": "slowstart"})

    import threading

    threading.Thread(target=slow_reset, daemon=True).start()
    time.sleep(1.0)  # the start is in flight
    started = time.monotonic()
    try:
        running.stop(signal.SIGTERM, timeout=60)
    finally:
        with contextlib.suppress(Exception):
            client.close()
    took, output = time.monotonic() - started, running.output()
    assert running.proc.returncode == 0, output
    assert "finishing 1 step(s) or start(s) in flight" in output, output
    assert "still in flight after 30 s: they are cancelled" in output, output
    assert took < 30 + 12 + 6, (took, output)  # the drain, then 12 s at most: not 30 s more
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output


def test_a_plugins_child_process_never_holds_the_servers_port(tmp_path: Path) -> None:
    """The listening socket was inheritable: after the server exited, a plugin's child kept
    the port listening, so clients hung on a server that was gone and none could restart."""
    import socket

    config = CONFIG + "  - name: spawns\n    class_name: serve_plugins.Spawns\n"
    config += '    config: {log: "{events}", child: 31.25}\n'
    running = start_server(tmp_path, config)
    port = int(running.url.rsplit(":", 1)[1])
    try:
        with GenericEnvClient(base_url=running.url).sync() as env:
            env.reset(interaction_kwargs={"name": "spawns", "ground_truth": "x"})
            env.step({"content": "x"})
        assert running.stop() == 0, running.output()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        subprocess.run(["pkill", "-f", "sleep 31.25"], check=False)


def test_interactions_counts_a_starting_session_as_the_capacity_check_does(
    tmp_path: Path,
) -> None:
    """`/interactions` said 0 open while slow starts filled --max-sessions and resets were
    refused as at capacity."""
    config = CONFIG + "  - name: slowstart\n    class_name: serve_plugins.SlowStart\n"
    config += '    config: {log: "{events}", start: 3}\n'
    running = start_server(tmp_path, config, "--max-sessions", "1")
    client = GenericEnvClient(base_url=running.url).sync()
    try:
        import threading

        reset = threading.Thread(
            target=lambda: client.reset(interaction_kwargs={"name": "slowstart"}), daemon=True
        )
        reset.start()
        time.sleep(1.0)
        assert running.sessions() == {"open": 0, "admitted": 1, "started": 0, "finalized": 0}
        reset.join(timeout=30)
        assert running.sessions()["admitted"] == running.sessions()["open"] == 1
    finally:
        with contextlib.suppress(Exception):
            client.close()
        assert running.stop() == 0, running.output()


def test_a_bad_config_or_a_busy_port_fails_before_serving(server: Server, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("interaction:\n  - name: gsm9k\n")
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", "serve", str(bad), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "gsm9k" in proc.stderr and "did you mean 'gsm8k'" in proc.stderr.lower()
    assert "listening" not in proc.stderr and "Traceback" not in proc.stderr
    port = server.url.rsplit(":", 1)[1]
    good = tmp_path / "good.yaml"
    good.write_text("interaction:\n  - name: gsm8k\n")
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", "serve", str(good), "--port", port],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Choose another --port" in proc.stderr and "Traceback" not in proc.stderr


def test_the_trl_adapter_waits_for_a_free_session(tmp_path: Path) -> None:
    import threading

    from interactions_core.integrations.trl import environment_factory

    running = start_server(tmp_path, CONFIG, "--max-sessions", "1")
    try:
        factory = environment_factory(url=running.url)
        first, second = factory(), factory()
        first.reset(interaction_kwargs={"name": "logged", "ground_truth": "x"})
        started = threading.Event()

        def reset_second() -> None:
            second.reset(interaction_kwargs={"name": "logged", "ground_truth": "y"})
            started.set()

        waiter = threading.Thread(target=reset_second)
        waiter.start()
        assert not started.wait(1.0)  # the server is full: the reset waits
        assert first.answer("x") == "right"  # the first episode ends, freeing its session
        waiter.join(30)
        assert started.is_set()
        assert second.answer("y") == "right" and second.get_reward() == 0.25
        assert running.wait_sessions(0)["open"] == 0
    finally:
        assert running.stop() == 0, running.output()
