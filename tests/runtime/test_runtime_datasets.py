"""Datasets: JSONL reading with bad-row reporting, parquet, whole-line writers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from interactions_core.runtime import DatasetError, LineWriter, SampleReader, write_rows
from interactions_core.runtime.datasets import check_row

GOOD = {"prompt": [{"role": "user", "content": "hi"}]}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bad_rows_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.jsonl",
        [
            json.dumps(GOOD),
            "{not json",
            "",
            json.dumps({"prompt": "text"}),
            json.dumps([1, 2]),
            json.dumps({**GOOD, "interaction_kwargs": ["x"]}),
            json.dumps({"question": "no prompt"}),
            json.dumps(GOOD),
        ],
    )
    reader = SampleReader(path)
    rows = list(reader)
    assert len(rows) == 2 and reader.rows == 2 and reader.skipped == 5
    assert [(b.line, b.reason.split(" ")[0]) for b in reader.bad_rows] == [
        (2, "invalid"),
        (4, "'prompt'"),
        (5, "a"),
        (6, "'interaction_kwargs'"),
        (7, "missing"),
    ]
    assert str(reader.bad_rows[0]).startswith(f"{path}:2: invalid JSON")


def test_strict_stops_at_the_first_bad_row(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", [json.dumps(GOOD), "{oops"])
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: invalid JSON"):
        list(SampleReader(path, strict=True))


def test_limit_count_and_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes((json.dumps(GOOD) + "\n").encode() * 3 + b'{"prompt": "\xff"}')
    reader = SampleReader(path, limit=2)
    assert len(list(reader)) == 2 and reader.count() == 4
    reader = SampleReader(path)
    list(reader)
    assert reader.bad_rows[0].line == 4 and "not UTF-8" in reader.bad_rows[0].reason


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="data file not found"):
        SampleReader(tmp_path / "none.jsonl")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        SampleReader(tmp_path / "data.csv")


def test_parquet_without_pyarrow_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes `import pyarrow` fail as if it were absent.
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(DatasetError, match=r"pip install 'pyarrow>=14'"):
        SampleReader(tmp_path / "d.parquet")


def test_parquet_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    rows = [
        {**GOOD, "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "1"}}},
        {**GOOD, "responses": ["a", "b"]},
    ]
    path = tmp_path / "d.parquet"
    assert write_rows(rows, path) == 2
    back = list(SampleReader(path))
    assert back[0]["extra_info"]["interaction_kwargs"]["name"] == "gsm8k"


def test_check_row() -> None:
    assert check_row(GOOD) is None
    assert check_row({"prompt": []}) == "'prompt' must be a non-empty list of chat messages"
    assert "string 'role'" in (check_row({"prompt": [{"content": "x"}]}) or "")
    assert check_row({**GOOD, "extra_info": 3}) == "'extra_info' must be an object"


def test_line_writer_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text("precious\n")
    with pytest.raises(DatasetError, match="already exists; refusing to overwrite"):
        LineWriter(path)
    assert path.read_text() == "precious\n"
    with LineWriter(path, overwrite=True) as writer:
        writer.write({"a": 1})
    assert path.read_text() == '{"a": 1}\n'


def test_line_writer_writes_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    writer = LineWriter(path, flush_bytes=50, flush_seconds=3600)
    for i in range(20):
        writer.write({"i": i, "pad": "x" * 7})
        # Whatever has reached the file at any moment ends with a complete line.
        data = path.read_bytes()
        assert data == b"" or data.endswith(b"\n")
    writer.close()
    writer.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["i"] for line in lines] == list(range(20))


def test_write_rows_is_atomic_and_checks_rows(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"

    def rows():
        yield GOOD
        yield {"prompt": "bad"}

    with pytest.raises(DatasetError, match="row 2 produced by the builder is invalid"):
        write_rows(rows(), path)
    assert not path.exists() and os.listdir(tmp_path) == []
    assert write_rows([GOOD, GOOD], path) == 2
    with pytest.raises(DatasetError, match="already exists"):
        write_rows([GOOD], path)


def test_a_stalled_disk_never_holds_the_caller_of_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With autoflush, the flush thread does the os.write: a write() queues and returns."""
    import threading

    release = threading.Event()
    stalled = threading.Event()
    real_write = os.write

    def slow_write(fd: int, data: bytes) -> int:
        stalled.set()
        assert release.wait(30), "the test never released the disk"
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", slow_write)
    writer = LineWriter(tmp_path / "out.jsonl", autoflush=True, flush_bytes=64)
    writer.write({"n": 0, "pad": "x" * 80})  # over flush_bytes: the thread starts writing
    assert stalled.wait(10), "the flush thread never wrote"

    def more() -> None:
        for n in range(1, 20):
            writer.write({"n": n})

    caller = threading.Thread(target=more)
    caller.start()
    caller.join(10)
    assert not caller.is_alive(), "write() waited for the stalled disk"
    release.set()
    writer.close()
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["n"] for line in lines] == list(range(20))
