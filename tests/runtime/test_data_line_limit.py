"""``--data`` reads a line within bounded memory, and names what is not a data file.

A data line over the limit the records reader has (:data:`interactions_core._files.MAX_LINE`)
is a bad row: skipped and reported with its line number like invalid JSON, or refused
with ``--strict``, without ever being held whole. The tests lower the limit so that a
line "over 64 MiB" takes a few kilobytes.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from interactions_core import _files
from interactions_core.cli import main
from interactions_core.runtime import DatasetError, SampleReader

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "examples" / "config.yaml")
LIMIT = 1000


def row(text: str) -> bytes:
    sample = {"prompt": [{"role": "user", "content": text}], "responses": ["#### 2"]}
    return json.dumps(sample).encode() + b"\n"


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(_files, "MAX_LINE", LIMIT)
    return LIMIT


class Endless(io.RawIOBase):
    """``head``, then one line of ``x`` that never ends; reading past ``budget`` fails."""

    def __init__(self, head: bytes, budget: int) -> None:
        self.head = head
        self.budget = budget
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        if self.given > self.budget:
            raise AssertionError(f"read {self.given:,} bytes of one endless line")
        n = len(buffer)
        done = self.head[self.given : self.given + n]
        data = done + b"x" * (n - len(done))
        buffer[:n] = data
        self.given += n
        return n


def stdin_of(raw: io.RawIOBase) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedReader(raw, buffer_size=4096))


def test_a_line_just_over_the_limit_is_a_bad_row_with_its_line(tmp_path: Path, limit: int) -> None:
    path = tmp_path / "d.jsonl"
    just_fits = row("y" * (limit - len(row(""))))
    assert len(just_fits) == limit
    over = row("z" * (limit + 1 - len(row(""))))
    path.write_bytes(row("first") + over + just_fits + row("last"))
    reader = SampleReader(path)
    contents = [r["prompt"][0]["content"] for r in reader]
    assert contents == ["first", "y" * (limit - len(row(""))), "last"]
    assert reader.skipped == 1
    (bad,) = reader.bad_rows
    assert bad.line == 2
    assert str(bad).startswith(f"{path}:2: a line longer than 1,000 bytes")
    assert "one sample per line" in bad.reason
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: a line longer than 1,000 bytes"):
        list(SampleReader(path, strict=True))


def test_a_long_line_is_read_past_in_bounded_memory(tmp_path: Path, limit: int) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(row("first") + b"x" * (16 << 20) + b"\n" + row("last"))
    tracemalloc.start()
    try:
        reader = SampleReader(path)
        contents = [r["prompt"][0]["content"] for r in reader]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert contents == ["first", "last"] and reader.bad_rows[0].line == 2
    assert peak < 4 << 20, f"{peak:,} bytes to read past a 16 MiB line"


def test_an_endless_line_on_stdin_is_refused_at_the_limit_with_strict(
    monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    monkeypatch.setattr(sys, "stdin", stdin_of(Endless(row("first"), budget=1 << 20)))
    reader = SampleReader("-", strict=True)
    taken = []
    with pytest.raises(DatasetError, match=r"^-:2: a line longer than 1,000 bytes"):
        for sample in reader:
            taken.append(sample)
    assert len(taken) == 1


def test_run_reports_an_over_long_stdin_line_and_plays_the_rest(
    monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    data = row("what is 1 + 1?") + b"q" * 50_000 + b"\n" + row("what is 2 + 2?")
    monkeypatch.setattr(sys, "stdin", stdin_of(io.BytesIO(data)))  # type: ignore[arg-type]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", CONFIG, "--data", "-", "--no-progress", "--json"])
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["episodes"] == 2
    assert "skipped 1 bad row" in err.getvalue()
    assert "-:2: a line longer than 1,000 bytes" in err.getvalue()


# -- a path that exists but is no file -------------------------------------------------


def test_a_device_is_not_a_data_file_and_the_message_says_what_to_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(DatasetError) as refused:
        SampleReader("/dev/zero", format="jsonl")
    message = str(refused.value)
    assert "not found" not in message
    assert "/dev/zero is not a regular file (a character device)" in message
    assert "--data - < /dev/zero" in message
    assert main(["run", CONFIG, "--data", "/dev/zero", "--format", "jsonl"]) == 1
    err = capsys.readouterr().err
    assert "is not a regular file" in err and "not found" not in err
    assert main(["run", CONFIG, "--data", "/dev/zero"]) == 1
    assert "is not a regular file" in capsys.readouterr().err


def test_a_missing_file_and_a_directory_keep_their_messages(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="data file not found"):
        SampleReader(tmp_path / "none.jsonl", format="jsonl")
    with pytest.raises(DatasetError, match="is a directory, not a data file"):
        SampleReader(tmp_path, format="jsonl")
