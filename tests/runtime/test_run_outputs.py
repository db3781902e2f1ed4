"""Where a run's records go (cli/_run_setup.py): the sink, the per-record handler, the files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli._run_setup import RecordHandler, RecordSink, _open_files
from interactions_core.errors import DatasetError


class Record:
    def __init__(self, sample_id: str, errors: list[str], index: int = 0) -> None:
        self.sample_id = sample_id
        self.errors = errors
        self.index = index

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "repeat": 0,
            "sample_id": self.sample_id,
            "errors": self.errors,
        }


class Collected:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.items.append(record)

    add = write


class Bar:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def update(self, done: int, errors: int) -> None:
        self.calls.append((done, errors))


def test_each_record_is_stamped_written_reported_counted_and_shown() -> None:
    output, report, bar = Collected(), Collected(), Bar()
    handler = RecordHandler(RecordSink(output, report, {"config_hash": "c"}, track=True), bar)  # type: ignore[arg-type]
    for record in (Record("a", [], 0), Record("b", ["boom"], 1), Record("c", [], 2)):
        handler(record)
    assert [r["sample_id"] for r in output.items] == ["a", "b", "c"]
    assert all(r["config_hash"] == "c" for r in output.items)
    assert report.items == output.items
    assert (handler.done, handler.errors) == (3, 1)
    assert bar.calls == [(1, 0), (2, 1), (3, 1)]
    assert handler.sink is not None and handler.sink.played == {(0, 0), (1, 0), (2, 0)}


def test_without_sink_or_bar_records_are_only_counted() -> None:
    handler = RecordHandler(None, None)
    handler(Record("a", ["x"]))
    assert (handler.done, handler.errors) == (1, 1)


def test_an_unstamped_sink_leaves_records_as_they_are() -> None:
    output = Collected()
    RecordSink(output, None, {}, track=False).write({"index": 3, "sample_id": "a"})
    assert output.items == [{"index": 3, "sample_id": "a"}]


def _args(tmp_path: Path, **kw: Any) -> argparse.Namespace:
    values = {"output": None, "trace": None, "overwrite": False, "resume": False, **kw}
    return argparse.Namespace(**values)


def test_output_and_trace_are_opened_together(tmp_path: Path) -> None:
    out, trace = tmp_path / "records.jsonl", tmp_path / "trace.jsonl"
    output, tracer = _open_files(_args(tmp_path, output=str(out), trace=str(trace)))
    try:
        output.write({"n": 1})
    finally:
        output.close()
        tracer.close()
    assert json.loads(out.read_text()) == {"n": 1}
    assert trace.exists()


def test_when_the_trace_cannot_be_opened_the_new_output_is_removed(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    bad_trace = tmp_path / "no" / "such" / "dir" / "trace.jsonl"
    with pytest.raises(DatasetError, match=r"cannot write .*trace\.jsonl"):
        _open_files(_args(tmp_path, output=str(out), trace=str(bad_trace)))
    assert not out.exists()


def test_an_output_that_existed_is_kept_when_the_trace_fails(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    out.write_text('{"earlier": true}\n')
    bad_trace = tmp_path / "no" / "such" / "dir" / "trace.jsonl"
    with pytest.raises(DatasetError):
        _open_files(_args(tmp_path, output=str(out), trace=str(bad_trace), resume=True))
    assert out.read_text() == '{"earlier": true}\n'
