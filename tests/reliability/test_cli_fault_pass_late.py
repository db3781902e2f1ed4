"""A later fault pass on the command line: what `--retry-errors` counts, record lines the
readers refuse, inputs `data` would overwrite, odd lock timeouts, and plugins that stop
the process from their constructor or take its stop signals.

Each test reproduces a failure that pass found and failed before its fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_fault_pass import child_run, plugin_config, read_lines, run_cli, write_plugin

FAILS_ON_SOME = '''
from interactions_core import BaseInteraction, InteractionResult


class FailsOnSome(BaseInteraction):
    """Raises for the prompts q1 and q6; answers the others and ends the episode."""

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] in ("q1", "q6"):
            raise RuntimeError("this sample always fails")
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


def write_rows(path: Path, rows: int) -> None:
    """``rows`` one-turn samples played by the config's interaction ``p``."""
    with path.open("w", encoding="utf-8") as file:
        for i in range(rows):
            prompt = [{"role": "user", "content": f"q{i}"}]
            row = {"prompt": prompt, "responses": [f"a{i}"], "interaction_kwargs": {"name": "p"}}
            file.write(json.dumps(row) + "\n")


def test_retry_errors_counts_the_errors_it_does_not_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--limit 4 --retry-errors` replays sample 1 only: sample 6's errored record was
    dropped from the summary (9 episodes, 1 error) and the report, though the file keeps it."""
    config = plugin_config(tmp_path, monkeypatch, "fails_some", FAILS_ON_SOME, "FailsOnSome")
    data, out, page = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "r.html"
    write_rows(data, 10)
    run = ["run", str(config), "--data", str(data), "--output", str(out), "--json"]
    code, stdout, _ = run_cli(*run)
    assert code == 1 and (json.loads(stdout)["episodes"], json.loads(stdout)["errors"]) == (10, 2)
    code, stdout, err = run_cli(*run, "--limit", "4", "--retry-errors", "--report", str(page))
    summary = json.loads(stdout)
    assert (summary["episodes"], summary["errors"]) == (10, 2), err
    assert "9 episode(s) from earlier runs, 1 played now" in err
    last = {(r["index"], r["repeat"]): r for r in read_lines(out)}
    assert len(last) == 10 and sorted(k[0] for k, r in last.items() if r["errors"]) == [1, 6]
    page_text = page.read_text(encoding="utf-8")
    assert '<td>episodes</td><td class="num">10</td>' in page_text
    assert '<td>errored</td><td class="num">2</td>' in page_text or "errored" in page_text


BIG_FEEDBACK = '''
from interactions_core import BaseInteraction, InteractionResult


class BigFeedback(BaseInteraction):
    """Feedback of ``size`` characters every turn; the episode never ends by itself."""

    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(False, "f" * int(self.config.get("size", 40_000)), 0.5)

    async def calculate_score(self, instance_id, **kwargs):
        return 0.5
'''


def three_turn_rows(tmp_path: Path) -> tuple[Path, Path]:
    """Three samples of three replayed replies, for the config's default interaction; the
    data file and where the records go."""
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    with data.open("w", encoding="utf-8") as file:
        for i in range(3):
            prompt = [{"role": "user", "content": f"q{i}"}]
            row = {"prompt": prompt, "responses": ["a", "b", "c"], "interaction_kwargs": {}}
            file.write(json.dumps(row) + "\n")
    return data, out


def test_every_record_line_the_run_writes_is_one_its_readers_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 MB of feedback a turn made 126 MB record lines: the run said ok, then
    `--resume` refused the file and `report` found every line unreadable."""
    from interactions_core import _files

    monkeypatch.setattr(_files, "MAX_LINE", 64 << 10)  # the same, at 1/1024 of the size
    config = plugin_config(tmp_path, monkeypatch, "big_feedback", BIG_FEEDBACK, "BigFeedback")
    data, out = three_turn_rows(tmp_path)
    run = ["run", str(config), "--data", str(data), "--output", str(out), "--json"]
    code, stdout, err = run_cli(*run)
    assert code == 0 and json.loads(stdout)["episodes"] == 3, err
    lines = out.read_bytes().splitlines(keepends=True)
    assert all(len(line) <= 64 << 10 for line in lines)
    records = [json.loads(line) for line in lines]
    assert [r["turns"] for r in records] == [3, 3, 3]  # the counters are whole
    assert [r["scores"] for r in records] == [[0.5, 0.5, 0.5]] * 3
    feedback = records[0]["messages"][2]["content"]
    assert feedback.startswith("f" * 256) and "characters left out" in feedback
    code, _, err = run_cli("report", str(out), "-o", str(tmp_path / "r.html"))
    assert code == 0 and "unreadable" not in err and "3 episodes" in err, err
    out.write_bytes(b"".join(lines[:2]))  # as if stopped after two records
    code, stdout, err = run_cli(*run, "--resume")
    assert code == 0 and json.loads(stdout)["episodes"] == 3, err


def test_a_record_of_a_great_many_messages_keeps_a_note_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interactions_core import _files

    monkeypatch.setattr(_files, "MAX_LINE", 64 << 10)
    config = plugin_config(tmp_path, monkeypatch, "big_feedback", BIG_FEEDBACK, "BigFeedback")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    prompt = [{"role": "user", "content": "x"}] * 1500  # 45 KB: a row the reader takes
    row = {"prompt": prompt, "responses": ["a"], "interaction_kwargs": {"size": 30_000}}
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    code, _, err = run_cli("run", str(config), "--data", str(data), "--output", str(out))
    assert code == 0, err
    [line] = out.read_bytes().splitlines()
    assert len(line) <= 64 << 10
    [note] = json.loads(line)["messages"]
    assert note["content"] == "[1,502 messages left out: the record would not fit a line]"


@pytest.mark.parametrize("text", ["nan", "NaN", "-5", "0", "soon", ""])
def test_a_lock_timeout_that_is_no_positive_number_waits_the_default(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`INTERACTIONS_LOCK_TIMEOUT=nan` made the deadline NaN: the wait never ended, silently."""
    from interactions_core import _files, _index

    asked: list[float] = []
    monkeypatch.setattr(_files, "lock_fd", lambda fd, timeout: asked.append(timeout) or True)
    monkeypatch.setenv("INTERACTIONS_LOCK_TIMEOUT", text)
    assert _index.BuildLock._wait(-1) is True
    monkeypatch.setenv("INTERACTIONS_IMPORT_TIMEOUT", text)
    from interactions_core.registry import default_import_timeout

    assert asked == [_index.LOCK_TIMEOUT] and default_import_timeout() == 60.0


def test_data_never_writes_over_its_own_input(tmp_path: Path) -> None:
    """`data gsm8k --input f.jsonl -o f.jsonl --overwrite` replaced the raw rows by the
    converted ones, so the builder could not read them again."""
    raw = tmp_path / "raw.jsonl"
    raw.write_text(json.dumps({"question": "1 + 1?", "answer": "so #### 2"}) + "\n")
    before = raw.read_bytes()
    linked = tmp_path / "linked.jsonl"
    linked.hardlink_to(raw)
    for output in (raw, linked, tmp_path / "." / "raw.jsonl"):
        args = ["data", "gsm8k", "--input", str(raw), "-o", str(output), "--overwrite"]
        code, _, err = run_cli(*args)
        assert code == 1 and "is the --input file: writing it would destroy the input" in err
        assert raw.read_bytes() == before
    code, _, err = run_cli("data", "gsm8k", "--input", str(raw), "-o", str(tmp_path / "o.jsonl"))
    assert code == 0 and "wrote 1 row to" in err, err


#: An interaction that plays every episode, for the plugins below to subclass.
PLAYS = """
from interactions_core import BaseInteraction, InteractionResult


class Plays(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
"""

STOPS_IN_INIT = (
    PLAYS
    + """
import sys



class ExitsInInit(Plays):
    def __init__(self, config):
        sys.exit(4)


class InterruptsInInit(Plays):
    def __init__(self, config):
        raise KeyboardInterrupt


class Lies(Exception):
    @property
    def __class__(self):
        raise GeneratorExit("from Lies.__class__")


class LiesInInit(Plays):
    def __init__(self, config):
        raise Lies("no")


class Unsayable(Exception):
    def __str__(self):
        raise GeneratorExit("from __str__")


class UnsayableInInit(Plays):
    def __init__(self, config):
        raise Unsayable()
"""
)


@pytest.mark.parametrize(
    ("cls", "raised"),
    [
        ("ExitsInInit", "SystemExit: 4"),
        ("InterruptsInInit", "KeyboardInterrupt"),
        ("LiesInInit", "Lies: no"),  # its class, asked for, raised: a traceback
        ("UnsayableInInit", "Unsayable: <no message: its __str__ raised GeneratorExit>"),
    ],
)
def test_a_constructor_that_stops_the_process_is_a_located_plugin_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cls: str, raised: str
) -> None:
    """`sys.exit(4)` in `__init__` ended the run with code 4 and no word; a
    `KeyboardInterrupt` there read as the user's Ctrl-C (`interrupted`, 130)."""
    config = plugin_config(tmp_path, monkeypatch, "stops_in_init", STOPS_IN_INIT, cls)
    data = tmp_path / "d.jsonl"
    write_rows(data, 2)
    code, _, err = run_cli("run", str(config), "--data", str(data))
    assert code == 1, err
    assert f"interaction 'p' (stops_in_init.{cls}) failed to initialise: {raised}" in err, err
    assert "interrupted" not in err and "Traceback" not in err


TAKES_SIGNALS = '''
import asyncio
import signal

from interactions_core import BaseInteraction, InteractionResult

FLAG = []


class TakesSignals(BaseInteraction):
    """Installs its own handlers at its first episode, as some libraries do when first
    used, then plays episodes of 0.1 s."""

    async def start_interaction(self, instance_id=None, **kwargs):
        if not FLAG:  # once, as a library sets itself up
            FLAG.append("installed")
            how = self.config.get("how")
            if how == "mask":  # no handler replaced: the main thread stops taking them
                signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM])
            else:
                handler = {"ignore": signal.SIG_IGN, "flag": lambda *a: FLAG.append(a)}[how]
                signal.signal(signal.SIGINT, handler)
                signal.signal(signal.SIGTERM, handler)
        return await super().start_interaction(instance_id, **kwargs)

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.1)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


@pytest.mark.parametrize("how", ["ignore", "flag", "mask"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_plugins_own_signal_handler_does_not_take_the_stop_signals(
    tmp_path: Path, how: str, sig: str
) -> None:
    """A plugin that installed SIG_IGN (or a handler that only sets a flag) made Ctrl-C
    and SIGTERM do nothing: the run played all 150 episodes and exited 0. One that blocked
    them in the main thread's mask left a run no signal but SIGKILL could end."""
    import signal
    import subprocess
    import time

    extra = f"    config:\n      how: {how}\n"
    config = write_plugin(tmp_path, "takes_signals", TAKES_SIGNALS, "TakesSignals", extra)
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 150)
    command, env = child_run(tmp_path, config, data)
    proc = subprocess.Popen(
        [*command, "--output", str(out), "--no-progress", "--concurrency", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.05)  # the first records: the plugin has taken the handlers by now
    time.sleep(1.0)
    proc.send_signal(getattr(signal, sig))
    try:
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()  # a run that no stop signal ends must not outlive the test
    err = stderr.decode()
    assert proc.returncode == 128 + getattr(signal, sig), err
    told = "blocked SIGINT and SIGTERM" if how == "mask" else "replaced the handler of SIGINT"
    assert told in err, err
    assert len(read_lines(out)) < 150 and b"interrupted" in stdout + stderr


SWALLOWS = '''
import time

from interactions_core import BaseInteraction, InteractionResult


class Swallows(BaseInteraction):
    """Blocks the loop in a retry loop whose bare `except:` swallows whatever is raised."""

    async def generate_response(self, instance_id, messages, **kwargs):
        while True:
            try:
                time.sleep(0.2)
            except:  # noqa: E722 - the point of this plugin
                pass
        return InteractionResult(True, "never", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 0.0
'''


def test_a_plugin_that_swallows_every_exception_is_told_and_a_second_signal_ends_it(
    tmp_path: Path,
) -> None:
    """Its block was broken every --timeout and the exception swallowed each time, with
    nothing said; Ctrl-C twice (or SIGTERM) could not end the process, only SIGKILL."""
    import signal
    import subprocess
    import time

    config = write_plugin(tmp_path, "swallows", SWALLOWS, "Swallows")
    data = tmp_path / "d.jsonl"
    write_rows(data, 2)
    command, env = child_run(tmp_path, config, data)
    proc = subprocess.Popen(
        [*command, "--timeout", "1", "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(4)  # broken at 1 s, swallowed, seen holding the loop again
    proc.send_signal(signal.SIGINT)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, stderr = proc.communicate(timeout=60)
    err = stderr.decode()
    assert time.monotonic() - started < 30, err
    assert proc.returncode == 130, err
    assert "swallows.Swallows.generate_response caught the exception that broke its" in err
    assert "still running 5 s after the second stop signal" in err


ODD_SCHEMAS = (
    PLAYS
    + """
import dataclasses


@dataclasses.dataclass
class Settings:
    method: str = "x"



class DataclassSchema(Plays):
    config_schema = Settings


class Meta(type):
    def __getattribute__(cls, name):
        if name == "config_schema":
            raise RuntimeError("no schema for you")
        return super().__getattribute__(name)


class RaisingSchema(Plays, metaclass=type("M", (Meta, type(Plays)), {})):
    pass
"""
)


@pytest.mark.parametrize(
    ("cls", "problem"),
    [
        ("DataclassSchema", "is not an attrs class (@attrs.define)"),
        ("RaisingSchema", "reading config_schema raised RuntimeError('no schema for you')"),
    ],
)
def test_a_config_schema_that_is_no_attrs_class_is_a_located_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cls: str, problem: str
) -> None:
    """A dataclass as `config_schema` ended `check` and `run` with "unexpected
    NotAnAttrsClassError ... please report it", without file, line or plugin."""
    config = plugin_config(tmp_path, monkeypatch, "odd_schemas", ODD_SCHEMAS, cls)
    text = config.read_text() + "    config:\n      method: y\n"
    config.write_text(text, encoding="utf-8")
    code, _, err = run_cli("check", str(config))
    assert code == 1 and f"{config}:" in err and problem in err, err  # file:line, the why
    assert "unexpected" not in err


TAKES_USR2 = '''
import os
import signal
import time

from interactions_core import BaseInteraction, InteractionResult

if os.environ.get("TAKES_USR2") == "own":  # a library's own handler, there before any run
    signal.signal(signal.SIGUSR2, lambda *args: None)


class TakesUsr2(BaseInteraction):
    """Resets SIGUSR2 at every start (when asked) and blocks the loop 2.5 s on q5."""

    async def start_interaction(self, instance_id=None, **kwargs):
        if os.environ.get("TAKES_USR2") == "default":
            signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        return await super().start_interaction(instance_id, **kwargs)

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q5":
            time.sleep(2.5)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here")
@pytest.mark.parametrize("how", ["default", "own"])
def test_a_plugin_holding_the_breaking_signal_costs_one_timed_out_episode(
    tmp_path: Path, how: str
) -> None:
    """A plugin that reset SIGUSR2 to its default had the watchdog's break kill the whole
    run at 1 s (5 of 10 records, no summary); one with its own handler had its 2.5 s block
    recorded as a good episode past --timeout 1, with nothing said."""
    import subprocess

    config = write_plugin(tmp_path, "takes_usr2", TAKES_USR2, "TakesUsr2")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 10)
    command, env = child_run(tmp_path, config, data, TAKES_USR2=how)
    done = subprocess.run(
        [*command, "--output", str(out), "--timeout", "1", "--concurrency", "4", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (10, 1), done.stderr
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [r["index"] for r in errored] == [5]
    text = json.dumps(errored[0]["errors"])
    assert "timed out after 1 s" in text or "blocked the event loop" in text, text
    if how == "own":
        assert "cannot be broken: SIGUSR2" in done.stderr and "timed out after 1 s" in text


PAINTS = '''
from interactions_core import BaseInteraction


class Paints(BaseInteraction):
    """Fails with a message that would turn the terminal red and ring its bell."""

    async def generate_response(self, instance_id, messages, **kwargs):
        raise RuntimeError("bad \\x1b[31mred\\x07")
'''


def test_an_errors_message_never_drives_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's error lines on stderr printed a plugin's escape sequences as they were."""
    config = plugin_config(tmp_path, monkeypatch, "paints", PAINTS, "Paints")
    data = tmp_path / "d.jsonl"
    write_rows(data, 1)
    code, _, err = run_cli("run", str(config), "--data", str(data))
    assert code == 1 and "1 of 1 episode(s) errored" in err
    assert "\x1b" not in err and "\x07" not in err and "bad \\x1b[31mred\\x07" in err


MUTE = '''
from interactions_core import BaseInteraction


class Unsayable(Exception):
    def __str__(self):
        raise RuntimeError("boom")


class Mute(BaseInteraction):
    """Fails with an exception that cannot say what it is."""

    async def generate_response(self, instance_id, messages, **kwargs):
        raise Unsayable()
'''


def test_an_exception_whose_str_raises_is_named_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record said `generate_response raised RuntimeError: boom`: the __str__'s error,
    not the plugin's."""
    config = plugin_config(tmp_path, monkeypatch, "mute", MUTE, "Mute")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 1)
    code, _, err = run_cli("run", str(config), "--data", str(data), "--output", str(out))
    assert code == 1, err
    message = read_lines(out)[0]["errors"][0]["message"]
    assert "raised Unsayable: <no message: its __str__ raised RuntimeError>" in message, message


WRITES_FD1 = '''
import os

from interactions_core import BaseInteraction, InteractionResult

os.write(1, b"AT-IMPORT\\n")


class WritesFd1(BaseInteraction):
    """Writes to the process's standard output below Python, as a child process does."""

    async def generate_response(self, instance_id, messages, **kwargs):
        os.write(1, b"FROM-FD-1\\n")
        os.system("echo FROM-A-CHILD")
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


def test_json_output_stays_json_when_plugins_write_below_python(tmp_path: Path) -> None:
    """os.write(1, ...) and a child process's output landed before the `{` (exit 0)."""
    import subprocess

    config = write_plugin(tmp_path, "writes_fd1", WRITES_FD1, "WritesFd1")
    data = tmp_path / "d.jsonl"
    write_rows(data, 2)
    command, env = child_run(tmp_path, config, data)
    done = subprocess.run(
        [*command, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["episodes"] == 2, done.stdout[:200]
    for text in ("AT-IMPORT", "FROM-FD-1", "FROM-A-CHILD"):
        assert text in done.stderr, done.stderr


SELF_CANCEL = '''
import asyncio

from interactions_core import InteractionResult, SessionInteraction


class SelfCancel(SessionInteraction):
    """On q4, a home-made deadline that cancels its own task, uncaught."""

    def new_session(self, **kwargs):
        return {}

    async def respond(self, state, messages, **kwargs):
        if messages[0]["content"] == "q4":
            asyncio.get_running_loop().call_later(0.01, asyncio.current_task().cancel)
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)

    async def score(self, state, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(
    not hasattr(__import__("asyncio").Task, "cancelling"), reason="Python 3.10 cannot tell"
)
def test_a_plugin_cancelling_its_own_task_costs_its_episode_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stopped as "interrupted" (exit 130, no signal sent) at 4 of 10 records, and
    every --resume stopped at the same sample again."""
    config = plugin_config(tmp_path, monkeypatch, "self_cancel", SELF_CANCEL, "SelfCancel")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 10)
    rows = [{**json.loads(line), "id": f"s{i}"} for i, line in enumerate(data.open())]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    command = ["run", str(config), "--data", str(data), "--output", str(out), "--json"]
    code, stdout, err = run_cli(*command, "--concurrency", "1")
    summary = json.loads(stdout)
    assert code == 1 and not summary.get("interrupted"), err
    assert (summary["episodes"], summary["errors"]) == (10, 1), err
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [r["index"] for r in errored] == [4]
    assert "cancelled by code inside the run" in errored[0]["errors"][0]["message"]
    # The episode's own record, as far as it got: it was a stand-in with the index for its
    # sample id, no interaction (counted under "(none)"), no turns and a start of 0.
    (record,) = errored
    others = [r for r in read_lines(out) if not r["errors"]]
    assert record["sample_id"] == "s4" and record["interaction"] == others[0]["interaction"]
    assert record["instance_id"] and record["messages"][0]["content"] == "q4"
    assert abs(record["started_at"] - others[0]["started_at"]) < 60
    assert list(summary["by_interaction"]) == [others[0]["interaction"]], summary


FORKS = '''
import multiprocessing
import time

from interactions_core import BaseInteraction, InteractionResult


class Forks(BaseInteraction):
    """Starts a forked helper process and terminates it, as a process pool does."""

    async def generate_response(self, instance_id, messages, **kwargs):
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
        child.start()
        time.sleep(0.3)
        child.terminate()
        child.join(5)
        return InteractionResult(False, f"exitcode {child.exitcode}", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_a_forked_child_of_a_plugin_stops_at_terminate(tmp_path: Path) -> None:
    """The child inherited the run's stop-signal handlers: terminate() ended nothing (the
    child was still alive 5 s later) and it printed that the run was interrupted."""
    import subprocess

    config = write_plugin(tmp_path, "forks", FORKS, "Forks")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 1)
    command, env = child_run(tmp_path, config, data)
    done = subprocess.run(
        [*command, "--output", str(out)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    feedback = [m["content"] for m in read_lines(out)[0]["messages"] if m["role"] == "user"]
    assert feedback[-1] == "exitcode -15", feedback


SLOW_TURNS = """
import asyncio

from interactions_core import BaseInteraction, InteractionResult


class SlowTurns(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.3)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_twice_in_a_moment_keeps_the_summary_and_every_record(
    tmp_path: Path, sig: str
) -> None:
    """GNU timeout delivers one signal twice within a millisecond: the second fell after the
    run's handlers were gone, so SIGTERM killed the process before its last records were
    flushed (24 of 28) and SIGINT printed only "error: interrupted", no summary."""
    import signal
    import subprocess
    import time

    config = write_plugin(tmp_path, "slow_turns", SLOW_TURNS, "SlowTurns")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 60)
    command, env = child_run(tmp_path, config, data)
    proc = subprocess.Popen(
        [*command, "--output", str(out), "--concurrency", "8", "--json", "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    number = getattr(signal, sig)
    proc.send_signal(number)
    time.sleep(0.001)
    proc.send_signal(number)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    # The summary and every record are out; a copy arriving as the process exits may still
    # end it by the signal's own action (docs/reliability.md, "still not guaranteed").
    assert proc.returncode in (128 + number, -number), stderr
    summary = json.loads(stdout)
    assert summary["interrupted"] and summary["episodes"] == len(read_lines(out)), stderr


def test_a_report_that_fails_is_told_after_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault of the report's own (a NaN in a sample id, a score near the float limit) ended
    `run --report` with "unexpected ...Error" and no summary."""
    import interactions_core.report

    def broken(*args: object, **kwargs: object) -> None:
        raise OverflowError("cannot convert float infinity to integer")

    config = plugin_config(tmp_path, monkeypatch, "plays", PLAYS, "Plays")
    data, out, page = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "r.html"
    write_rows(data, 2)
    monkeypatch.setattr(interactions_core.report, "write_report", broken)
    command = ["run", str(config), "--data", str(data), "--output", str(out)]
    code, stdout, err = run_cli(*command, "--report", str(page), "--json")
    assert code == 1 and json.loads(stdout)["episodes"] == 2, err
    assert "the report could not be made: OverflowError" in err and "unexpected" not in err


def _sixteen_under_timeout_1(
    tmp_path: Path, module: str, source: str, cls: str
) -> tuple[Any, Path]:
    """Play 16 one-turn rows (``q0`` to ``q15``) of ``cls`` at once in a child process under
    ``--timeout 1`` with ``--json``: the finished process and its records file."""
    import subprocess

    config = write_plugin(tmp_path, module, source, cls)
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 16)
    command, env = child_run(tmp_path, config, data)
    done = subprocess.run(
        [*command, "--output", str(out), "--timeout", "1", "--concurrency", "16", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, out


BLOCKS_ONE = '''
import asyncio
import time

from interactions_core import BaseInteraction, InteractionResult


class BlocksOne(BaseInteraction):
    """Every call awaits 0.05 s, but q8's blocks the event loop for 5 s."""

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q8":
            time.sleep(5)
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here")
@pytest.mark.skipif(__import__("sys").version_info < (3, 11), reason="3.10 counts the time")
def test_a_plugin_blocking_the_loop_times_out_its_own_call_only(tmp_path: Path) -> None:
    """One call blocking the loop under --timeout 1: the 8 episodes awaiting 0.05 s beside it
    were recorded as "timed out after 1 s" too (their timers fired as the loop came back)."""
    done, out = _sixteen_under_timeout_1(tmp_path, "blocks_one", BLOCKS_ONE, "BlocksOne")
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [r["index"] for r in errored] == [8], errored
    assert "blocked the event loop" in json.dumps(errored[0]["errors"])


def test_the_same_command_with_resume_replaces_the_report(tmp_path: Path) -> None:
    """A stopped run with --report said "continue with the same command and --resume", which
    then refused the report ("already exists"), and --overwrite was refused with --resume."""
    data, out, page = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "r.html"
    write_rows(data, 6)
    base = ["run", "--data", str(data), "--output", str(out), "--report", str(page)]
    code, _, err = run_cli(*base, "--limit", "2")
    assert code == 0, err
    first = page.read_text(encoding="utf-8")
    code, _, err = run_cli(*base, "--resume")
    assert code == 0, err
    assert len(read_lines(out)) == 6
    assert page.read_text(encoding="utf-8") != first  # drawn again, from all 6 records
    code, _, err = run_cli(*base, "--retry-errors")
    assert code == 0, err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_standard_output_on_a_full_disk_is_told_as_such(tmp_path: Path, unbuffered: str) -> None:
    """`> /dev/full` read as a bug ("unexpected OSError ... please report it"); `run`'s text
    summary was blamed on plugin code closing standard output, with exit 0."""
    import os
    import subprocess
    import sys

    data = tmp_path / "d.jsonl"
    write_rows(data, 3)
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    run = ["run", "--data", str(data)]
    # argparse keeps quiet when --help and --version cannot be printed: they exited 0
    for args in (["list"], ["list", "--json"], run, [*run, "--json"], ["--help"], ["--version"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "interactions_core", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                timeout=120,
            )
        assert done.returncode == 1, (args, done.stderr)
        assert "cannot write standard output: No space left on device" in done.stderr, args
        assert "unexpected" not in done.stderr and "Exception ignored" not in done.stderr
        if args[0] == "run":
            assert "the summary, which standard output refused" in done.stderr
            assert "closed during the run" not in done.stderr


SETS_UMASK = """
import os

from interactions_core import BaseInteraction, InteractionResult


class SetsUmask(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        os.umask(0o777)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
"""


def test_a_plugins_umask_does_not_decide_the_reports_permissions(tmp_path: Path) -> None:
    """The page is written at the end of the run: a plugin that set the umask to 0o777 left
    it mode 000 (`----------`), unreadable to its owner."""
    import os
    import stat
    import subprocess

    config = write_plugin(tmp_path, "sets_umask", SETS_UMASK, "SetsUmask")
    data, out, page = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "r.html"
    write_rows(data, 2)
    command, env = child_run(tmp_path, config, data)
    old = os.umask(0o022)
    try:
        done = subprocess.run(
            [*command, "--output", str(out), "--report", str(page)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(page.stat().st_mode) == 0o644


@pytest.mark.parametrize("flag", ["--trace", "--report"])
def test_every_output_refuses_to_replace_a_symbolic_link(tmp_path: Path, flag: str) -> None:
    """--output refused a symbolic link with --overwrite; --trace and --report replaced the
    link itself with a file."""
    data, out, link = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "l.out"
    write_rows(data, 2)
    link.symlink_to(tmp_path / "missing")
    code, _, err = run_cli(
        "run", "--data", str(data), "--output", str(out), flag, str(link), "--overwrite"
    )
    assert code == 1 and "is a symbolic link" in err, err
    assert link.is_symlink() and not out.exists()


BLOCKS_IN_A_TASK = """
import asyncio
import time

from interactions_core import BaseInteraction, InteractionResult


async def chunks():
    for _ in range(50):
        time.sleep(0.2)
        await asyncio.sleep(0)


class BlocksInATask(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.gather(chunks())  # its own blocks, in a task of its own: 10 s
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
"""


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here")
def test_a_call_blocking_in_tasks_of_its_own_still_times_out(
    tmp_path: Path,
) -> None:
    """Its blocks ran in another task, so they counted as another call's and pushed its
    deadline back for ever: under --timeout 1 it ran its 10 s and was recorded as good."""
    import subprocess
    import time

    config = write_plugin(tmp_path, "blocks_in_a_task", BLOCKS_IN_A_TASK, "BlocksInATask")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 1)
    command, env = child_run(tmp_path, config, data)
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--output", str(out), "--timeout", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 6, done.stderr  # not the plugin's 10 s
    (record,) = read_lines(out)
    assert "timed out after 1 s" in json.dumps(record["errors"])


BLOCKS_BRIEFLY = '''
import asyncio
import time

from interactions_core import BaseInteraction, InteractionResult


class BlocksBriefly(BaseInteraction):
    """Every call awaits 0.05 s; q8 to q11 first block the loop 0.6 s each, under --timeout."""

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] in ("q8", "q9", "q10", "q11"):
            time.sleep(0.6)
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(__import__("sys").version_info < (3, 11), reason="3.10 counts the time")
def test_blocks_shorter_than_the_timeout_time_out_no_one(tmp_path: Path) -> None:
    """Four calls blocking 0.6 s each under --timeout 1, none past its timeout: once the
    time forgiven was capped at the timeout, the calls waiting beside them timed out."""
    done, _out = _sixteen_under_timeout_1(
        tmp_path, "blocks_briefly", BLOCKS_BRIEFLY, "BlocksBriefly"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["errors"] == 0, done.stderr


HELPERS_IN_A_SESSION = '''
import asyncio
import time

from interactions_core import InteractionResult, SessionInteraction


def helper(x):  # a new frame at every call
    return sum(i * x for i in range(200))


class HelpersInASession(SessionInteraction):
    """q8 computes for 5 s through many helper calls; the others await 0.05 s."""

    def new_session(self, **kwargs):
        return {}

    async def respond(self, state, messages, **kwargs):
        if messages[0]["content"] == "q8":
            end = time.monotonic() + 5
            while time.monotonic() < end:
                helper(1)
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)

    def score(self, state, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here")
@pytest.mark.skipif(__import__("sys").version_info < (3, 11), reason="3.10 counts the time")
def test_a_session_interaction_blocking_through_helpers_is_broken_and_alone(
    tmp_path: Path,
) -> None:
    """The watchdog timed each helper call as a block of its own (a new frame each time, and
    a SessionInteraction's respond was not a method it knew): 5 s held, nothing named or
    broken, and the episodes beside it failed as timed out."""
    import time

    started = time.monotonic()
    done, out = _sixteen_under_timeout_1(
        tmp_path, "helpers_session", HELPERS_IN_A_SESSION, "HelpersInASession"
    )
    assert time.monotonic() - started < 4.5, done.stderr  # not the plugin's 5 s
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [r["index"] for r in errored] == [8]
    assert "blocked the event loop" in json.dumps(errored[0]["errors"])


HELPER_NAMED_SCORE = """
import asyncio
import time

from interactions_core import BaseInteraction, InteractionResult


def score(x):  # a helper that happens to bear a lifecycle method's name
    return sum(i * x for i in range(200))


class HelperNamedScore(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q8":
            end = time.monotonic() + 5
            while time.monotonic() < end:
                score(1)
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
"""


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here")
@pytest.mark.skipif(__import__("sys").version_info < (3, 11), reason="3.10 counts the time")
def test_a_helper_named_like_a_lifecycle_method_does_not_hide_a_block(tmp_path: Path) -> None:
    """A helper called `score` was taken for a SessionInteraction's method: each call a
    new frame, the 5 s block was never named nor broken and 8 episodes beside it timed out."""
    done, _out = _sixteen_under_timeout_1(
        tmp_path, "helper_score", HELPER_NAMED_SCORE, "HelperNamedScore"
    )
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    assert "HelperNamedScore.generate_response blocked the event loop" in done.stderr


YAML_CALLBACKS = '''
import asyncio
import time

import yaml

from interactions_core import BaseInteraction, InteractionResult


class Loader(yaml.SafeLoader):
    pass


Loader.add_constructor("!x", lambda loader, node: sum(range(100_000)))


class YamlCallbacks(BaseInteraction):
    """q8 spends 5 s in its own YAML constructor, which yaml calls back, again and again."""

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q8":
            end = time.monotonic() + 5
            while time.monotonic() < end:
                yaml.load("[!x 1, !x 2, !x 3]", Loader=Loader)
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here")
@pytest.mark.skipif(__import__("sys").version_info < (3, 11), reason="3.10 counts the time")
def test_a_block_in_callbacks_a_library_makes_is_named_and_broken(tmp_path: Path) -> None:
    """The search for the method holding the loop stopped at the first yaml (or attrs) frame,
    which the runtime also uses: the plugin's constructor, a new frame at every call, was
    timed piece by piece, so 5 s passed unnamed and unbroken and 8 episodes timed out."""
    done, _out = _sixteen_under_timeout_1(
        tmp_path, "yaml_callbacks", YAML_CALLBACKS, "YamlCallbacks"
    )
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    assert "YamlCallbacks.generate_response blocked the event loop" in done.stderr


# -- an exception class whose name is hostile ------------------------------------------

ODD_CLASS_NAMES = '''
from interactions_core import BaseInteraction


class LoudName(str):
    """A class name whose own methods would run wherever it is formatted."""

    def __format__(self, spec):
        raise RuntimeError("a class name's __format__ ran")

    def __len__(self):
        raise RuntimeError("a class name's __len__ ran")


# a name of megabytes that would drive the terminal (red text, a cleared screen)
Huge = type("\\x1b[31m\\x1b[2J" + "H" * 2_000_000, (RuntimeError,), {})
Loud = type(LoudName("LoudError"), (RuntimeError,), {})


class OddNames(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q0":
            raise Huge("a huge class name")
        raise Loud("a loud class name")

    async def calculate_score(self, instance_id, **kwargs):
        return 0.0
'''


def test_an_exception_class_name_is_plain_cut_and_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the 2 MB name went whole into every record and the --json summary, the text
    # summary sent its escape sequences to the terminal, and a name that is a str subclass
    # ran its own __format__ wherever an error was told.
    config = plugin_config(tmp_path, monkeypatch, "odd_names", ODD_CLASS_NAMES, "OddNames")
    data = tmp_path / "d.jsonl"
    write_rows(data, 2)
    records = tmp_path / "records.jsonl"
    code, out, err = run_cli(
        "run", str(config), "--data", str(data), "--no-progress", "--output", str(records)
    )
    assert code == 1, err
    assert "\x1b" not in out + err, (out + err)[:400]
    assert "\\x1b[31m" in out, out[:2000]
    assert len(out) < 5000 and len(err) < 5000, (len(out), len(err))
    types = sorted((error["type"] for r in read_lines(records) for error in r["errors"]), key=len)
    assert types[0] == "LoudError" and type(types[0]) is str, types
    assert types[1].startswith("\x1b[31m\x1b[2JHHH") and len(types[1]) < 300, len(types[1])
    assert "more characters]" in types[1]
    code, out, err = run_cli("run", str(config), "--data", str(data), "--no-progress", "--json")
    summary = json.loads(out)
    assert code == 1 and len(out) < 5000, len(out)
    kinds = sorted(summary["errors_by_kind"], key=len)
    assert kinds == ["generate_response: LoudError", f"generate_response: {types[1]}"], kinds


# -- an exception whose own __class__ raises, with INTERACTIONS_DEBUG ----------------------

CLASS_RAISES = '''
from interactions_core import InteractionResult, SessionInteraction


class ClassRaises(Exception):
    @property
    def __class__(self):
        raise RuntimeError("no class")


class ClassInterrupts(Exception):
    @property
    def __class__(self):
        raise KeyboardInterrupt("no class")


class Raises(SessionInteraction):
    """Raises an exception whose __class__ raises, or a plain one, by the sample's kind."""

    def new_session(self, **kwargs):
        return dict(kwargs)

    async def respond(self, state, messages, **kwargs):
        if state["kind"] == "class raises":
            raise ClassRaises()
        if state["kind"] == "class interrupts":
            raise ClassInterrupts()
        raise ValueError("plain")

    async def score(self, state, **kwargs):
        return 1.0
'''


@pytest.mark.parametrize("debug", ["1", "0"])
def test_an_exception_whose_class_raises_is_recorded_whole_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: str
) -> None:
    # Before: with INTERACTIONS_DEBUG=1 the traceback's formatting raised outside every
    # handler and killed the worker without a word (--concurrency 1: no episode, exit 0);
    # without it, the record was a stand-in (no sample id, no interaction, 0 turns), and a
    # __class__ raising KeyboardInterrupt ended the run.
    monkeypatch.setenv("INTERACTIONS_DEBUG", debug)
    config = plugin_config(tmp_path, monkeypatch, "class_raises", CLASS_RAISES, "Raises")
    data = tmp_path / "d.jsonl"
    kinds = ["class raises", "class interrupts", "plain", "plain"]
    with data.open("w", encoding="utf-8") as file:
        for i, kind in enumerate(kinds):
            row = {"id": f"s{i}", "prompt": [{"role": "user", "content": "q"}]}
            row.update(responses=["a"], interaction_kwargs={"kind": kind})
            file.write(json.dumps(row) + "\n")
    records = tmp_path / "records.jsonl"
    code, out, err = run_cli(
        "run", str(config), "--data", str(data), "--no-progress", "--concurrency", "1",
        "--output", str(records),
    )  # fmt: skip
    assert code == 1, out + err
    assert "4 of 4 episode(s) errored" in err, err
    assert "unexpected" not in err and ("Traceback" not in err or debug == "1"), err
    lines = read_lines(records)
    assert [r["sample_id"] for r in lines] == ["s0", "s1", "s2", "s3"], lines
    kinds = ["ClassRaises", "ClassInterrupts", "ValueError", "ValueError"]
    for line, kind in zip(lines, kinds, strict=True):
        [error] = line["errors"]
        assert (error["where"], error["type"], line["turns"]) == ("generate_response", kind, 1)
        assert "class_raises.py:" in error["at"], error
        if debug == "1":
            assert "class_raises.py" in error["traceback"], error["traceback"]


# -- a resource a plugin keeps in a nested kwarg ---------------------------------------------

KEEPS_IN_KWARGS = '''
import asyncio
import time

from interactions_core import BaseInteraction


class SlowDel:
    def __del__(self):
        time.sleep(3)


class Awaiting(BaseInteraction):
    """A judge that awaits 0.3 s a turn: the innocent episode beside the other."""

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.3)
        return False, "again", 0.0, {}


class Keeps(BaseInteraction):
    """Keeps a resource in the nested kwarg it is given, as a client cache may."""

    async def start_interaction(self, instance_id=None, box=None, **kwargs):
        box["held"] = SlowDel()
        return await super().start_interaction(instance_id, **kwargs)

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}
'''


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the break
def test_what_a_plugin_keeps_in_its_kwargs_costs_its_own_episode_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's copy of the kwargs outlived the finalize and was dropped with the
    # episode's locals, outside its bounds: the slow __del__ was charged to no call, and
    # the episode awaiting beside it timed out ("generate_response timed out after 1 s").
    extra = "  - name: k\n    class_name: keeps.Keeps\n"
    config = plugin_config(tmp_path, monkeypatch, "keeps", KEEPS_IN_KWARGS, "Awaiting")
    config.write_text(config.read_text() + extra, encoding="utf-8")
    data = tmp_path / "d.jsonl"
    prompt = [{"role": "user", "content": "q"}]
    rows = [
        {"prompt": prompt, "responses": ["a"] * 12, "interaction_kwargs": {"name": "p"}},
        {"prompt": prompt, "responses": ["a"], "interaction_kwargs": {"name": "k", "box": {}}},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    records = tmp_path / "records.jsonl"
    code, out, err = run_cli(
        "run", str(config), "--data", str(data), "--no-progress", "--timeout", "1",
        "--concurrency", "2", "--output", str(records),
    )  # fmt: skip
    assert code == 0, out + err
    awaiting = next(r for r in read_lines(records) if r["interaction"] == "p")
    assert awaiting["errors"] == [] and awaiting["turns"] == 12, awaiting["errors"]


METERED_FEEDBACK = '''
from interactions_core import BaseInteraction, InteractionResult


class MeteredFeedback(BaseInteraction):
    """Long feedback every turn, and one model request of its own in each turn's extra."""

    async def generate_response(self, instance_id, messages, **kwargs):
        call = {"prompt_tokens": 10, "completion_tokens": 5, "latency_s": 0.5}
        return InteractionResult(False, "f" * 40_000, 0.5, {"usage": [call]})

    async def calculate_score(self, instance_id, **kwargs):
        return 0.5
'''


def test_a_record_cut_to_fit_its_line_keeps_what_the_summary_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record cut to fit its line dropped its extras (and a long usage): the summary of
    a resumed run with nothing left to play then left their interaction usage out."""
    from interactions_core import _files

    monkeypatch.setattr(_files, "MAX_LINE", 64 << 10)
    config = plugin_config(tmp_path, monkeypatch, "metered", METERED_FEEDBACK, "MeteredFeedback")
    data, out = three_turn_rows(tmp_path)
    run = ["run", str(config), "--data", str(data), "--output", str(out), "--json"]
    code, stdout, err = run_cli(*run)
    assert code == 0, err
    fresh = json.loads(stdout)
    assert all(len(line) <= 64 << 10 for line in out.read_bytes().splitlines())
    code, stdout, err = run_cli(*run, "--resume")
    assert code == 0, err
    resumed = json.loads(stdout)
    assert fresh["interaction_usage"]["requests"] == 9
    assert resumed["interaction_usage"] == fresh["interaction_usage"], resumed


SILENCER = '''
import io
import sys

from interactions_core import BaseInteraction, InteractionResult

sys.stdout = {replacement}  # silences a chatty library, and never puts it back


class Quiet(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
'''


@pytest.mark.parametrize("replacement", ["io.StringIO()", "None"])
@pytest.mark.parametrize("json_mode", [False, True])
def test_a_plugin_replacing_sys_stdout_keeps_no_output_from_the_user(
    tmp_path: Path, replacement: str, json_mode: bool
) -> None:
    """A plugin setting `sys.stdout = io.StringIO()` at import swallowed the text summary
    (exit 0, nothing printed); `None` ended the run as "unexpected AttributeError ...
    please report it"."""
    import subprocess

    source = SILENCER.replace("{replacement}", replacement)
    config = write_plugin(tmp_path, "silencer", source, "Quiet")
    data = tmp_path / "d.jsonl"
    write_rows(data, 3)
    command, env = child_run(tmp_path, config, data)
    if json_mode:
        command.append("--json")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    if json_mode:
        assert json.loads(done.stdout)["episodes"] == 3
    else:
        assert "episodes          3" in done.stdout, done.stdout
        assert "plugin code replaced sys.stdout" in done.stderr, done.stderr
