"""The one records reader: blank, torn and bad lines, and what resume and report make of them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from interactions_core.errors import DatasetError
from interactions_core.report import read_records as report_records
from interactions_core.runtime.records import BadLine, LineWriter, iter_records, read_records

RECORD = {"index": 0, "end_reason": "terminated", "turns": 1, "final_score": 1.0}


def lines(data: bytes) -> list[tuple[int, object]]:
    return list(iter_records(io.BytesIO(data), "r.jsonl"))


def test_records_blank_lines_and_a_bad_line_in_the_middle() -> None:
    found = lines(b'{"a": 1}\n\n[1]\nnot json\n{"b": 2}\n')
    assert found[0] == (1, {"a": 1})
    assert found[1] == (3, BadLine("r.jsonl", 3, "not a JSON object"))
    number, bad = found[2]
    assert number == 4 and isinstance(bad, BadLine) and not bad.torn
    assert str(bad).startswith("r.jsonl:4: not JSON")
    assert found[3] == (5, {"b": 2})


def test_a_torn_last_line_is_noted_and_a_whole_one_without_newline_is_a_record() -> None:
    (_, torn) = lines(b'{"a": 1}\n{"b": ')[1]
    assert isinstance(torn, BadLine) and torn.torn
    assert "torn last line" in str(torn)
    assert lines(b'{"a": 1}\n{"b": 2}')[1] == (2, {"b": 2})


def test_resume_and_report_read_a_torn_file_alike(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps({**RECORD, "index": 1})[:20])
    state = read_records(str(path), "c", None)
    assert set(state.records) == {(0, 0)}
    (run,) = report_records([str(path)])
    assert run.seen == 1 and run.bad_lines == 0 and run.torn_line


def test_resume_refuses_a_bad_line_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(RECORD) + "\nnot json\n" + json.dumps(RECORD) + "\n")
    with pytest.raises(DatasetError, match=r"r.jsonl:2: not a record"):
        read_records(str(path), "c", None)


def test_continuing_a_file_ends_a_whole_last_record_and_cuts_a_torn_one(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    whole.write_text(json.dumps(RECORD))
    with LineWriter(whole, append=True) as writer:
        writer.write({**RECORD, "index": 1})
    assert [json.loads(x)["index"] for x in whole.read_text().splitlines()] == [0, 1]
    torn = tmp_path / "torn.jsonl"
    torn.write_text(json.dumps(RECORD) + "\n" + '{"index": 1, "end')
    with LineWriter(torn, append=True) as writer:
        writer.write({**RECORD, "index": 2})
    assert [json.loads(x)["index"] for x in torn.read_text().splitlines()] == [0, 2]


def test_resumed_records_keep_their_counters_and_alike_ones_share_them(tmp_path: Path) -> None:
    """A resumed file may hold millions of records: equal counters are one object."""
    alike = {
        "interaction": "gsm8k",
        "end_reason": "terminated",
        "turns": 2,
        "user_turns": 1,
        "scores": [0.0, 1.0],
        "final_score": 1.0,
        "messages": [{"role": "user", "content": "q"}],
        "instance_id": "not kept",
    }
    failed = {
        "index": 2,
        "repeat": 1,
        "sample_id": "s-2",
        "end_reason": "error",
        "errors": [{"where": "policy", "type": "X", "message": "boom"}],
    }
    path = tmp_path / "r.jsonl"
    rows = [{**alike, "index": 0, "sample_id": "s-0"}, {**alike, "index": 1, "sample_id": "s-1"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, failed]))
    state = read_records(str(path), "c", None, samples=3)
    assert state.records[(0, 0)] is state.records[(1, 0)]
    assert state.done() == {(0, 0), (1, 0), (2, 1)}
    assert state.done(retry_errors=True) == {(0, 0), (1, 0)}
    first, _, third = state.episodes(state.done())
    assert (first.index, first.repeat, first.interaction, first.end_reason) == (
        0,
        0,
        "gsm8k",
        "terminated",
    )
    assert (first.turns, first.user_turns, first.scores, first.final_score) == (
        2,
        1,
        [0.0, 1.0],
        1.0,
    )
    assert first.messages == [] and first.instance_id is None
    # A failed record keeps what the summary's error examples show: its sample and errors.
    assert (third.index, third.repeat, third.sample_id) == (2, 1, "s-2")
    assert third.errors == [{"where": "policy", "type": "X", "message": "boom"}]
    assert [r.index for r in state.episodes({(1, 0)})] == [1]


#: A line nested 100,000 levels deep: valid-looking JSON that ``json.loads`` cannot read.
DEEP = b'{"a":' * 100_000 + b"1" + b"}" * 100_000


def test_a_line_nested_too_deeply_is_a_bad_line_and_a_torn_one_at_the_end() -> None:
    found = lines(b'{"a": 1}\n' + DEEP + b'\n{"b": 2}\n' + DEEP)
    assert found[1] == (2, BadLine("r.jsonl", 2, "JSON nested too deeply to read"))
    assert found[2] == (3, {"b": 2})
    (number, torn) = found[3]  # the last line, without its newline: a torn write
    assert number == 4 and isinstance(torn, BadLine) and torn.torn


def test_resume_refuses_a_line_nested_too_deeply_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(json.dumps(RECORD).encode() + b"\n" + DEEP + b"\n")
    with pytest.raises(DatasetError, match=r"r.jsonl:2: not a record .*nested too deeply"):
        read_records(str(path), "c", None)


def test_continuing_a_file_cuts_a_torn_last_line_nested_too_deeply(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(json.dumps(RECORD).encode() + b"\n" + DEEP)
    with LineWriter(path, append=True) as writer:
        writer.write({**RECORD, "index": 1})
    assert [json.loads(x)["index"] for x in path.read_text().splitlines()] == [0, 1]
