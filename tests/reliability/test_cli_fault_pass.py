"""A third fault pass on everything but the server: `run`, `report` and their files.

Each test here reproduces a failure found by that pass (issue 23's "a fresh fault
pass finds nothing new at high severity") and failed before its fix.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main as cli_main

HERE = Path(__file__).parent


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, "" if out.closed else out.getvalue(), err.getvalue()


def write_data(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as file:
        for i in range(rows):
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": [f"a{i}"]}
            file.write(json.dumps(row) + "\n")


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def plugin_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str, cls: str
) -> Path:
    """Write ``source`` as ``module.py`` on the path and a config whose default plays ``cls``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return write_plugin(tmp_path, module, source, cls)


def child_run(
    tmp_path: Path, config: Path, data: Path, **env: str
) -> tuple[list[str], dict[str, str]]:
    """``interactions run CONFIG --data DATA`` for a child process, and its environment:
    ``tmp_path`` (where :func:`write_plugin` put the plugin) on its path, plus ``env``."""
    import os
    import sys

    command = [sys.executable, "-m", "interactions_core", "run", str(config), "--data", str(data)]
    return command, {**os.environ, "PYTHONPATH": str(tmp_path), **env}


def write_plugin(tmp_path: Path, module: str, source: str, cls: str, extra: str = "") -> Path:
    """``source`` as ``tmp_path/module.py`` and ``c.yaml``, whose default ``p`` plays ``cls``
    (``extra``: more lines of its entry); for a child process, put ``tmp_path`` on its path."""
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text(
        f"default: p\ninteraction:\n  - name: p\n    class_name: {module}.{cls}\n{extra}",
        encoding="utf-8",
    )
    return config


class PipeReader(threading.Thread):
    """Reads a named pipe to its end, as a user's `cat FIFO` would."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.data = b""

    def run(self) -> None:
        with open(self.path, "rb") as pipe:
            self.data = pipe.read()


# -- a report written onto a device or a named pipe ------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_report_onto_a_named_pipe_writes_through_it_and_keeps_the_pipe(tmp_path: Path) -> None:
    """`-o /dev/stdout` (a pipe) or a FIFO was replaced by a regular file (as root even
    /dev/stdout and /dev/full were): the page must go through the pipe, which stays."""
    data, out, fifo = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "page.fifo"
    write_data(data, 3)
    assert run_cli("run", "--data", str(data), "--output", str(out))[0] == 0
    os.mkfifo(fifo)
    for command in (
        ("report", str(out), "-o", str(fifo)),
        ("run", "--data", str(data), "--report", str(fifo)),
    ):
        reader = PipeReader(fifo)
        reader.start()
        code, _, err = run_cli(*command)
        reader.join(10)
        assert code == 0, err
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), f"{command[0]} replaced the pipe"
        assert reader.data.startswith(b"<!DOCTYPE html>"), reader.data[:80]
        assert b"</html>" in reader.data


# -- a --trace that cannot be written any more -------------------------------------------


class ClosingReader(PipeReader):
    """Reads the first bytes of a named pipe and goes away, as `| head -c 1` does."""

    def run(self) -> None:
        with open(self.path, "rb") as pipe:
            self.data = pipe.read(1)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_trace_that_cannot_be_written_stops_the_run_like_the_output(tmp_path: Path) -> None:
    """`--trace /dev/stdout | head -1`: the trace's broken pipe was raised again in every
    later episode, each an error (2,000 rows: 35 s, all errored; 20,000: over 10 minutes).
    It must stop the run with one message, as a failing --output does, and cost no episode."""
    data, out, fifo = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "trace.fifo"
    config = tmp_path / "gsm8k.yaml"
    config.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n", encoding="utf-8")
    with data.open("w", encoding="utf-8") as file:
        for i in range(3000):  # 2 KB replies: the trace passes its 1 MiB flush early on
            row = {"prompt": [{"role": "user", "content": f"q{i}"}]}
            row["interaction_kwargs"] = {"ground_truth": "5"}
            file.write(json.dumps({**row, "responses": ["x" * 2000 + " #### 5"]}) + "\n")
    os.mkfifo(fifo)
    reader = ClosingReader(fifo)
    reader.start()
    code, _, err = run_cli(
        "run", str(config), "--data", str(data), "--output", str(out), "--trace", str(fifo),
        "--no-progress",
    )  # fmt: skip
    reader.join(10)
    assert code == 1, err
    assert f"cannot write {fifo}" in err, err
    records = read_lines(out)
    assert records  # whole lines, those of the episodes that ended before the stop
    assert not [r for r in records if r["errors"]], "the trace's failure became episodes' errors"


# -- what a plugin returns: typed right, behaving badly -----------------------------------

HOSTILE = """
import os
import sys

from interactions_core import BaseInteraction, InteractionResult


class Boom(Exception):
    pass


class Unprintable:
    def __str__(self):
        raise Boom("str")

    __repr__ = __bool__ = __str__


class RudeFloat(float):  # a float whose arithmetic and comparisons raise
    def _boom(self, *args):
        raise Boom("float")

    __add__ = __radd__ = __sub__ = __mul__ = __truediv__ = __lt__ = __gt__ = _boom
    __eq__ = __le__ = __ge__ = __round__ = __format__ = __repr__ = __str__ = _boom
    __hash__ = float.__hash__


class RudeStr(str):  # text whose len(), str() and repr() raise
    def _boom(self, *args):
        raise Boom("str")

    __len__ = __str__ = __repr__ = _boom


def cyclic():
    extra = {}
    extra["self"] = extra
    return extra


RESULTS = {
    "rude_str": lambda: InteractionResult(False, RudeStr("feedback"), 1.0, {}),
    "rude_str_tuple": lambda: (False, RudeStr("feedback"), 1.0, {}),
    "rude_float": lambda: InteractionResult(True, "ok", RudeFloat(0.5), {}),
    "unprintable_extra": lambda: InteractionResult(True, "ok", 1.0, {"x": Unprintable()}),
    "cyclic_extra": lambda: InteractionResult(True, "ok", 1.0, cyclic()),
    "tuple_key_extra": lambda: InteractionResult(True, "ok", 1.0, {(1, 2): 1}),
    "unprintable_flag": lambda: InteractionResult(Unprintable(), "ok", 1.0, {}),
    "close_stdout": lambda: (sys.stdout.close(), InteractionResult(True, "ok", 1.0))[1],
    "fork": lambda: InteractionResult(True, f"forked {os.fork()}", 1.0),
    "huge_int_extra": lambda: InteractionResult(True, "ok", 1.0, {"n": 10**5000}),
    "deep_extra": lambda: InteractionResult(True, "ok", 1.0, {"d": nested(990)}),
    "deeper_extra": lambda: InteractionResult(True, "ok", 1.0, {"d": nested(50_000)}),
    "usage_overflow": lambda: InteractionResult(
        True, "ok", 1.0, {"usage": [{"prompt_tokens": 10**400, "latency_s": 2**1024}]}
    ),
}


def nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


class HostileInteraction(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return RESULTS.get(kwargs.get("mode"), lambda: InteractionResult(True, "ok", 1.0))()
"""


def run_hostile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, *extra: str
) -> tuple[int, str, str]:
    """Run 3 samples through the hostile plugin, the second in ``mode``; --output o.jsonl."""
    config = plugin_config(tmp_path, monkeypatch, "hostile_plugin", HOSTILE, "HostileInteraction")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    with data.open("w", encoding="utf-8") as file:
        for i in range(3):
            kwargs = {"mode": mode if i == 1 else "ok"}
            row = {"prompt": [{"role": "user", "content": "q"}], "interaction_kwargs": kwargs}
            file.write(json.dumps({**row, "responses": ["a", "b"]}) + "\n")
    return run_cli(
        "run", str(config), "--data", str(data), "--output", str(out), "--concurrency", "1",
        *extra,
    )  # fmt: skip


@pytest.mark.parametrize(
    "mode",
    [
        "rude_str",
        "rude_str_tuple",
        "rude_float",
        "unprintable_extra",
        "cyclic_extra",
        "tuple_key_extra",
        "unprintable_flag",
        "huge_int_extra",
        "deep_extra",
        "deeper_extra",
        "usage_overflow",
    ],
)
def test_a_hostile_value_a_plugin_returns_costs_at_most_its_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Each of these stopped the whole run ("unexpected Boom", no summary, the records of
    later episodes lost): a str subclass's len() in the report, a float subclass's
    arithmetic in the summary, an extra's str(), a cycle or a tuple key in the writer."""
    out, trace, report = (tmp_path / n for n in ("o.jsonl", "t.jsonl", "r.html"))
    code, stdout, err = run_hostile(
        tmp_path, monkeypatch, mode, "--trace", str(trace), "--report", str(report), "--json"
    )
    assert "unexpected" not in err, err
    summary = json.loads(stdout)
    assert summary["episodes"] == 3
    records = read_lines(out)
    assert [r["index"] for r in records] == [0, 1, 2]
    read_lines(trace)  # every event written, as JSON
    assert report.read_bytes().rstrip().endswith(b"</html>")
    if mode == "unprintable_flag":  # not a bool: the plugin's error, in its episode only
        assert code == 1 and summary["errors"] == 1
        assert "should_terminate must be a bool" in records[1]["errors"][0]["message"]
    else:  # the value is written as JSON can hold it; the episode counts as played
        assert code == 0, err
        assert summary["errors"] == 0
    if mode == "huge_int_extra":  # str() refuses over 4,300 digits: its size instead
        assert records[1]["extras"] == [{"n": "<integer of 16,610 bits>"}], records[1]["extras"]
    if mode.endswith("deep_extra"):  # cut at the nesting bound every reader can read
        text = json.dumps(records[1]["extras"])
        assert "<nested too deeply>" in text and text.count("[") < 100
        code, _, err = run_cli("report", str(out), "-o", str(tmp_path / "again.html"))
        assert code == 0 and "skipped" not in err, err


# -- --resume and records of repeats the run does not play --------------------------------


@pytest.mark.parametrize("how", ["a hand-edited repeat", "an older file of --repeat 2"])
def test_resume_refuses_records_of_repeats_the_run_does_not_play(tmp_path: Path, how: str) -> None:
    """A record with `repeat` 10**18 in a --repeat 1 file (its fingerprints intact), or
    an older unfingerprinted --repeat 2 file resumed with --repeat 1, was counted: 12
    episodes for 11 samples, and the sample it stood for was played again."""
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_data(data, 11)
    assert run_cli("run", "--data", str(data), "--output", str(out))[0] == 0
    records = read_lines(out)
    if how == "a hand-edited repeat":
        records[1]["repeat"] = 10**18
    else:
        for record in records:
            del record["config_hash"], record["data_hash"]
        records += [{**r, "repeat": 1} for r in records]
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    before = out.read_bytes()
    code, stdout, err = run_cli("run", "--data", str(data), "--output", str(out), "--resume")
    assert code == 1, stdout
    assert "but this run plays --repeat 1" in err, err
    assert out.read_bytes() == before  # nothing played, nothing appended


# -- environment variables with odd values ----------------------------------------------


@pytest.mark.parametrize("value", ["1e308", "inf"])
def test_an_import_timeout_beyond_what_a_thread_can_wait_is_a_long_wait(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """`INTERACTIONS_IMPORT_TIMEOUT=1e308 interactions list --check` stopped with
    "unexpected OverflowError: timestamp out of range for platform time_t"."""
    monkeypatch.setenv("INTERACTIONS_IMPORT_TIMEOUT", value)
    _, stdout, err = run_cli("list", "--check", "--json")
    assert "unexpected" not in err, err
    entries = json.loads(stdout)
    assert any(e["name"] == "gsm8k" and e["status"] == "ok" for e in entries), entries


# -- a named pipe as --output ------------------------------------------------------------


class LateReader(PipeReader):
    """Opens the named pipe two seconds late, then reads it to its end."""

    def run(self) -> None:
        import time

        time.sleep(2)
        super().run()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_an_output_pipe_without_a_reader_is_told_not_silently_waited_for(tmp_path: Path) -> None:
    """`--output FIFO` with no reader waited without a word (it looked hung); it still
    waits, as a pipe should, and says what it waits for."""
    data, fifo = tmp_path / "d.jsonl", tmp_path / "records.fifo"
    write_data(data, 3)
    # a first run builds the index cache, so the second opens its output within the 2 s
    assert run_cli("run", "--data", str(data), "--output", str(tmp_path / "o.jsonl"))[0] == 0
    os.mkfifo(fifo)
    reader = LateReader(fifo)
    reader.start()
    code, _, err = run_cli("run", "--data", str(data), "--output", str(fifo), "--no-progress")
    reader.join(10)
    assert code == 0, err
    assert f"waiting for a process to read the named pipe {fifo} (--output)" in err, err
    assert len(reader.data.splitlines()) == 3


# -- data files in another encoding -------------------------------------------------------


def test_a_utf16_data_file_is_not_half_read(tmp_path: Path) -> None:
    """`json.loads` guesses each line's encoding from its bytes, so of a UTF-16 file one
    row in two was played and the others were "invalid JSON": each line is UTF-8 or a bad
    row, and the first says what the file looks like."""
    data = tmp_path / "d.jsonl"
    rows = "".join(
        json.dumps({"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["a"]}) + "\n"
        for i in range(4)
    )
    data.write_bytes(rows.encode("utf-16"))
    code, stdout, err = run_cli("run", "--data", str(data), "--json")
    summary = json.loads(stdout)
    assert summary["episodes"] == 0, summary
    assert code == 1  # nothing was played: not a success (it was 0)
    assert f"no episode was played: every row of {data} was bad" in err
    assert "looks like UTF-16 or UTF-32: save it as UTF-8" in err, err
    data.write_bytes(b"\xef\xbb\xbf" + rows.encode())  # a UTF-8 byte-order mark is fine
    code, stdout, err = run_cli("run", "--data", str(data), "--json")
    assert (code, json.loads(stdout)["episodes"]) == (0, 4), err


def test_a_report_that_cannot_be_written_still_leaves_the_summary(tmp_path: Path) -> None:
    """`--report /dev/full` (or into a folder that is gone) stopped the run's end before
    its summary was printed; the summary comes first now, the report's error after it."""
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_data(data, 3)
    report = tmp_path / "gone" / "r.html"
    code, stdout, err = run_cli(
        "run", "--data", str(data), "--output", str(out), "--report", str(report), "--json"
    )
    assert code == 1
    assert json.loads(stdout)["episodes"] == 3
    assert f"cannot write the report {report}" in err, err
    assert len(read_lines(out)) == 3


def test_a_plugin_that_closes_stdout_does_not_cost_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin calling `sys.stdout.close()` (or `os.close(1)`) ended the run with
    "unexpected ValueError: I/O operation on closed file" and no summary."""
    code, _, err = run_hostile(tmp_path, monkeypatch, "close_stdout")
    assert code == 0, err
    assert "standard output was closed during the run" in err
    assert "episodes          3  (3 ok, 0 errored)" in err
    assert len(read_lines(tmp_path / "o.jsonl")) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX")
def test_a_plugin_that_forks_does_not_play_the_run_twice(tmp_path: Path) -> None:
    """A plugin calling `os.fork()` and returning in both processes made the copy play the
    rest of the run too: 6 records for 3 samples and two summaries. (A real process: a
    fork of the test runner would run the tests twice.)"""
    import subprocess

    (tmp_path / "hostile_plugin.py").write_text(HOSTILE, encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text(
        "default: hostile\ninteraction:\n  - name: hostile\n"
        "    class_name: hostile_plugin.HostileInteraction\n",
        encoding="utf-8",
    )
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    with data.open("w", encoding="utf-8") as file:
        for i in range(3):
            row = {"prompt": [{"role": "user", "content": "q"}], "responses": ["a"]}
            row["interaction_kwargs"] = {"mode": "fork" if i == 1 else "ok"}
            file.write(json.dumps(row) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "interactions_core", "run", str(config), "--data", str(data),
         "--output", str(out), "--json", "--concurrency", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["episodes"] == 3  # one summary, not two
    assert [r["index"] for r in read_lines(out)] == [0, 1, 2]
    assert "plugin code forked the run" in done.stderr


def test_a_row_nested_past_the_bound_is_a_bad_row_not_a_recursion_error(tmp_path: Path) -> None:
    """A prompt message nested about 500 levels made its episode fail with Python's
    "maximum recursion depth exceeded" (the record's deep copy recurses): such a row is
    now a bad row named by its line, as `interactions serve` refuses it at reset."""
    deep: Any = "x"
    for _ in range(600):
        deep = [deep]
    rows = [
        {"prompt": [{"role": "user", "content": "q0"}], "responses": ["a0"]},
        {"prompt": [{"role": "user", "content": deep}], "responses": ["a1"]},
        {"prompt": [{"role": "user", "content": "q2"}], "responses": ["a2"]},
        {"prompt": [{"role": "user", "content": "q3"}], "interaction_kwargs": {"k": deep}},
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, stdout, err = run_cli("run", "--data", str(data), "--json")
    summary = json.loads(stdout)
    assert code == 0 and summary["episodes"] == 2 and summary["errors"] == 0, (code, summary)
    assert f"{data}:2: prompt[0] nests lists and objects more than 100 levels deep" in err, err
    assert f"{data}:4: 'interaction_kwargs' nests lists and objects more than 100" in err, err
    assert "recursion" not in err


# -- a summary whose reader went away ---------------------------------------------------


def _run_with_stdout_gone(*args: str) -> tuple[int, str]:
    """`interactions run ... | head -c 0`: standard output's reader is gone from the start."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-m", "interactions_core", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8", "replace")
    return proc.wait(60), err


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="needs /dev/stdout")
def test_errored_episodes_are_told_when_the_summary_finds_no_reader(tmp_path: Path) -> None:
    """`run ... | head`: the summary's broken pipe ended the command with 0 and said nothing
    of the errored episodes (or of a report that could not be written); stderr still has
    its reader, and the exit code does not depend on anyone reading the summary."""
    data = tmp_path / "d.jsonl"
    config = tmp_path / "gsm8k.yaml"
    config.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n", encoding="utf-8")
    with data.open("w", encoding="utf-8") as file:
        for i in range(4):  # the second row names an interaction the config does not have
            kwargs = {"ground_truth": "5", **({"name": "nope"} if i == 1 else {})}
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["#### 5"]}
            file.write(json.dumps({**row, "interaction_kwargs": kwargs}) + "\n")
    code, err = _run_with_stdout_gone("run", str(config), "--data", str(data), "--no-progress")
    assert code == 1, err
    assert "1 of 4 episode(s) errored" in err, err
    assert "Traceback" not in err and "unexpected" not in err, err
    # The report onto the same pipe (`--report /dev/stdout | head`) cannot be written:
    # told, and the exit code says so.
    data.write_text(data.read_text().splitlines()[0] + "\n", encoding="utf-8")
    code, err = _run_with_stdout_gone(
        "run", str(config), "--data", str(data), "--no-progress", "--report", "/dev/stdout"
    )
    assert code == 1 and "cannot write the report /dev/stdout" in err, err


# -- a thread a plugin leaves running ---------------------------------------------------

THREADED = """
import asyncio
import multiprocessing
import os
import threading
import time

from interactions_core import BaseInteraction, InteractionResult

STARTED = []


class Threaded(BaseInteraction):
    async def start_interaction(self, instance_id=None, **kwargs):
        if not STARTED:
            STARTED.append(True)
            how = os.environ["LEAVE"]
            if how == "thread":
                threading.Thread(target=time.sleep, args=(120,), name="plugin-sleeper").start()
            elif how == "executor":  # submitted to the run's loop, never awaited
                asyncio.get_running_loop().run_in_executor(None, time.sleep, 120)
            elif how == "process":
                multiprocessing.Process(target=time.sleep, args=(120,)).start()
        return await super().start_interaction(instance_id, **kwargs)

    async def generate_response(self, instance_id, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


@pytest.mark.parametrize("leave", ["thread", "executor", "process"])
def test_a_thread_a_plugin_leaves_running_does_not_hold_the_finished_command(
    tmp_path: Path, leave: str
) -> None:
    """A non-daemon thread a plugin started, a job it put in the loop's executor and never
    awaited, or a child process kept `interactions run` alive after its records for as
    long as they ran (15 s, 60 s: for ever in a CI job), with Ctrl-C ignored. The command
    waits a moment, names them, and exits with the run's exit code."""
    import subprocess
    import time

    config = write_plugin(tmp_path, "threaded_plugin", THREADED, "Threaded")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    with data.open("w", encoding="utf-8") as file:
        for i in range(3):
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["a"]}
            file.write(json.dumps({**row, "interaction_kwargs": {"i": i}}) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env["LEAVE"] = leave
    started = time.monotonic()
    # Files, not pipes: a child process left running would hold a pipe open after the exit.
    with (tmp_path / "out.txt").open("w") as stdout, (tmp_path / "err.txt").open("w") as stderr:
        code = subprocess.call(
            [sys.executable, "-m", "interactions_core", "run", str(config), "--data", str(data),
             "--output", str(out), "--no-progress"],
            stdout=stdout, stderr=stderr, env=env, timeout=60,
        )  # fmt: skip
    took = time.monotonic() - started
    err = (tmp_path / "err.txt").read_text()
    pids = [int(pid) for pid in re.findall(r"process (\d+)", err)]
    for pid in pids:  # a child process goes on after the command: the test ends it
        os.kill(pid, signal.SIGKILL)
    assert code == 0, err
    assert took < 60 and "still running" in err, err
    named = {"thread": "'plugin-sleeper'", "executor": "'run-executor", "process": "process "}
    assert named[leave] in err, err
    assert len(pids) == (leave == "process")
    assert "episodes" in (tmp_path / "out.txt").read_text()  # the summary, printed before
    assert [r["index"] for r in read_lines(out)] == [0, 1, 2]


# -- plugin code that stops the run's event loop ----------------------------------------

LOOP_BREAKER = """
import asyncio
import os

from interactions_core import BaseInteraction, InteractionResult


def leave(exc):
    raise exc


async def leave_later(exc):
    raise exc


class ArgsExit(SystemExit):  # a stop whose arguments cannot be asked for
    @property
    def args(self):
        raise ValueError("args says no")


class LoopBreaker(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        loop, act, once = asyncio.get_running_loop(), kwargs.get("act"), kwargs.get("once")
        if once and os.path.exists(once):  # the run resumed: played like any other row
            act = None
        elif once:
            open(once, "w").close()
        if act == "stop":
            loop.stop()
        elif act == "stop_later":
            loop.call_later(0.02, loop.stop)
        elif act == "cancel_all":
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
        elif act == "callback_exit":
            loop.call_soon(leave, SystemExit(0))
        elif act == "callback_kbint":
            loop.call_soon(leave, KeyboardInterrupt())
        elif act == "task_exit":
            loop.create_task(leave_later(SystemExit(3)))
        elif act == "task_odd_exit":  # its message ended the command with no summary
            loop.create_task(leave_later(ArgsExit(3)))
        elif act == "task_factory":  # every task the loop creates from now on fails
            loop.set_task_factory(lambda loop, coro, **kw: leave(RuntimeError("no tasks")))
        await asyncio.sleep(0.05)
        return InteractionResult(True, "ok", 1.0)
"""

BREAKS = [
    "stop",
    "stop_later",
    "cancel_all",
    "callback_exit",
    "callback_kbint",
    "task_exit",
    "task_odd_exit",
    "task_factory",
]


@pytest.mark.parametrize("act", BREAKS)
def test_plugin_code_that_stops_the_event_loop_ends_the_run_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, act: str
) -> None:
    """`loop.stop()` in a plugin ended the command with "unexpected RuntimeError: Event loop
    stopped before Future completed.", cancelling the run's tasks with a bare traceback;
    neither printed the summary or wrote the report."""
    config = plugin_config(tmp_path, monkeypatch, "loop_breaker", LOOP_BREAKER, "LoopBreaker")
    data, out, report = tmp_path / "d.jsonl", tmp_path / "o.jsonl", tmp_path / "r.html"
    with data.open("w", encoding="utf-8") as file:
        for i in range(20):
            kwargs = {"act": act, "once": str(tmp_path / "acted")} if i == 10 else {}
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["a"]}
            file.write(json.dumps({**row, "interaction_kwargs": kwargs}) + "\n")
    command = ["run", str(config), "--data", str(data), "--output", str(out), "--no-progress"]
    code, stdout, err = run_cli(*command, "--report", str(report), "--concurrency", "4")
    assert code == 1, err
    assert "the run's event loop was" in err and "--resume" in err, err
    assert "unexpected" not in err and "Traceback" not in err, err
    assert "episodes" in stdout  # the summary of what finished
    records = read_lines(out)
    indexes = [r["index"] for r in records]  # whole lines, each episode once
    assert len(indexes) == len(set(indexes)) and len(indexes) <= 20, indexes
    # Episodes cut off by the loop's end are not recorded as errors: --resume plays them.
    assert not [r for r in records if r["errors"]], [r["errors"] for r in records]
    assert report.read_bytes().rstrip().endswith(b"</html>")
    code, _, err = run_cli(*command, "--resume")
    assert code == 0, err
    assert sorted(r["index"] for r in read_lines(out)) == list(range(20))


# -- interaction kwargs a plugin edits in place --------------------------------------------

KWARGS_EDITOR = """
import json

from interactions_core import BaseInteraction, InteractionResult


class KwargsEditor(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        seen = json.loads(json.dumps([kwargs["tags"], kwargs["nested"]]))
        kwargs["tags"].append("edited")
        kwargs["nested"]["x"] = "edited"
        return InteractionResult(True, "ok", 1.0, {"seen": seen})
"""


def test_a_plugin_editing_nested_kwargs_does_not_change_the_next_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the top level of interaction_kwargs was copied per episode: a plugin that
    appended to a kwarg's list made repeat 1 start with ["a", "edited"] and repeat 2 with
    ["a", "edited", "edited"], so the repeats of --repeat were not independent."""
    config = plugin_config(tmp_path, monkeypatch, "kwargs_editor", KWARGS_EDITOR, "KwargsEditor")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    row = {"prompt": [{"role": "user", "content": "q"}], "responses": [["a"], ["b"], ["c"]]}
    kwargs = {"tags": ["a"], "nested": {"x": "orig"}}
    data.write_text(json.dumps({**row, "interaction_kwargs": kwargs}) + "\n", encoding="utf-8")
    code, _, err = run_cli(
        "run", str(config), "--data", str(data), "--output", str(out), "--repeat", "3",
        "--concurrency", "1",
    )  # fmt: skip
    assert code == 0, err
    seen = [r["extras"][0]["seen"] for r in read_lines(out)]
    assert seen == [[["a"], {"x": "orig"}]] * 3, seen


CHDIR = """
import os

from interactions_core import BaseInteraction, InteractionResult


class Wanderer(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        os.makedirs("elsewhere", exist_ok=True)
        os.chdir("elsewhere")
        return InteractionResult(True, "ok", 1.0)
"""


def test_a_relative_report_path_is_where_the_command_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin calling os.chdir sent a relative --report into its own folder, silently:
    the report's path was resolved only when the page was written, after the run."""
    plugin_config(tmp_path, monkeypatch, "wanderer", CHDIR, "Wanderer")
    monkeypatch.chdir(tmp_path)
    row = {"prompt": [{"role": "user", "content": "q"}], "responses": ["a"]}
    Path("d.jsonl").write_text(json.dumps({**row, "interaction_kwargs": {}}) + "\n")
    code, _, err = run_cli(
        "run", "c.yaml", "--data", "d.jsonl", "--output", "o.jsonl", "--report", "r.html"
    )
    assert code == 0, err
    assert (tmp_path / "r.html").read_bytes().rstrip().endswith(b"</html>")
    assert not (tmp_path / "elsewhere" / "r.html").exists()
