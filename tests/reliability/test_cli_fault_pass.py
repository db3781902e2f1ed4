"""A third fault pass on everything but the server: `run`, `report` and their files.

Each test here reproduces a failure found by that pass (issue 23's "a fresh fault
pass finds nothing new at high severity") and failed before its fix.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
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
    return code, out.getvalue(), err.getvalue()


def write_data(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as file:
        for i in range(rows):
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": [f"a{i}"]}
            file.write(json.dumps(row) + "\n")


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


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
