"""The quick paths of the records reader answer exactly as the full ones do.

``interactions report`` and ``--resume`` read files of 10^5 and more records, so
the usual line and the usual record are taken by a quick path: a line by
``json.JSONDecoder.raw_decode`` on its UTF-8 text (no encoding detection), a
record by a check of its plain types. Any other line or record goes through the
full path (``json.loads``, the field-by-field checks), which stays the rule. These
tests hold each quick path to its full path on odd input of every kind.
"""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from interactions_core.report import RecordsError, read_records
from interactions_core.runtime import record as record_module
from interactions_core.runtime import records as records_module
from interactions_core.runtime.record import record_problem
from interactions_core.runtime.records import iter_records

GOOD: dict[str, Any] = {
    "index": 3,
    "repeat": 0,
    "sample_id": "s-3",
    "interaction": "gsm8k",
    "end_reason": "terminated",
    "turns": 2,
    "user_turns": 1,
    "scores": [0.0, 1.0],
    "final_score": 1.0,
    "errors": [],
    "duration_s": 0.25,
    "messages": [{"role": "user", "content": "q"}],
}

BIG_INT = 2**1024  # beyond any float
NEAR_LIMIT = int(1.7976931348623157e308)  # the largest float, as an int: finite

#: Values tried in every field: good, wrong type, out of range, not finite, odd classes.
ODD_VALUES: list[Any] = [
    None, 0, 1, -1, 7, 2**62, 2**62 + 1, 2**63, 100_000, 100_001, BIG_INT, NEAR_LIMIT,
    -NEAR_LIMIT, 0.5, -0.5, 1e308, -1e308, float("inf"), float("-inf"), float("nan"), True,
    False, "x", "", "1", [], [1.0], [float("nan")], [True], ["1"], [BIG_INT], [NEAR_LIMIT],
    [0.5] * 100_001, {}, {"a": 1}, (1.0,),
]  # fmt: skip


def full_problem(record: dict[str, Any], max_index: int | None = None) -> str | None:
    """``record_problem`` with its quick path turned off: the field-by-field answer."""
    quick = record_module._plainly_usable
    record_module._plainly_usable = lambda record: False
    try:
        return record_problem(record, max_index)
    finally:
        record_module._plainly_usable = quick


def test_the_usual_record_takes_the_quick_check() -> None:
    assert record_module._plainly_usable(GOOD)
    assert record_module._plainly_usable({"index": 0})  # every other field may be absent


@pytest.mark.parametrize("field", [*GOOD, "missing-index"])
def test_the_quick_check_never_passes_a_record_the_full_check_refuses(field: str) -> None:
    for value in ODD_VALUES:
        record = dict(GOOD)
        if field == "missing-index":
            del record["index"]
            record["turns"] = value
        else:
            record[field] = value
        for max_index in (None, 4, 3):
            full = full_problem(record, max_index)
            assert record_problem(record, max_index) == full, (field, value, max_index)
            if record_module._plainly_usable(record):
                assert full is None or max_index is not None, (field, value)


def test_pairs_of_odd_fields_get_the_full_checks_answer() -> None:
    fields = ["index", "repeat", "turns", "final_score", "duration_s", "scores", "sample_id"]
    values = [None, 1, -1, 0.5, float("nan"), BIG_INT, True, "x", [1.0], [float("inf")]]
    for (a, b), (x, y) in itertools.product(
        itertools.combinations(fields, 2), itertools.product(values, repeat=2)
    ):
        record = {**GOOD, a: x, b: y}
        assert record_problem(record) == full_problem(record), (a, x, b, y)


def lines_read(data: bytes, monkeypatch: pytest.MonkeyPatch | None = None) -> list[Any]:
    """What ``iter_records`` yields for ``data``; with ``monkeypatch``, by ``json.loads`` only."""
    if monkeypatch is not None:

        class NoQuickPath:
            def raw_decode(self, text: str) -> tuple[Any, int]:
                raise ValueError("the quick path is off")

        monkeypatch.setattr(records_module, "_DECODER", NoQuickPath())
    out = list(iter_records(io.BytesIO(data), "f.jsonl"))
    if monkeypatch is not None:
        monkeypatch.undo()
    return out


ODD_LINES: list[bytes] = [
    b'{"index": 0}\n',
    b'{"index": 0}',  # a whole last record without its newline
    b'{"index": 0',  # torn
    b"\n",
    b"   \n",
    b"\r\n",
    b'{"index": 0}\r\n',
    b'  {"index": 0}\n',
    b'{"index": 0}  \n',
    b'{"index": 0}\x0b\n',  # not JSON whitespace
    b'{"index": 0} {"index": 1}\n',
    b'\xef\xbb\xbf{"index": 0}\n',  # a UTF-8 byte order mark
    '{"index": 0}\n'.encode("utf-16"),
    '{"index": 0}\n'.encode("utf-16-le"),
    '{"index": 0}\n'.encode("utf-32"),
    b'{"text": "\xed\xb2\x80"}\n',  # a lone surrogate as raw bytes (json.loads takes it)
    b'{"text": "\\udc80"}\n',
    b'{"text": "\xff"}\n',  # not UTF-8
    b'{"text": "\x00"}\n',
    b"[1, 2]\n",
    b"7\n",
    b'"text"\n',
    b"null\n",
    b"NaN\n",
    b'{"score": NaN, "big": 1e400}\n',
    b"[" * 5000 + b"]" * 5000 + b"\n",  # nested too deeply
    b'{"a": ' * 900 + b"1" + b"}" * 900 + b"\n",
    b"{}\n",
    b'{"index": 0, "index": 1}\n',
]


@pytest.mark.parametrize("line", ODD_LINES, ids=range(len(ODD_LINES)))
def test_the_quick_line_reader_answers_as_json_loads(
    line: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    for data in (line, b'{"index": 9}\n' + line, line + b'{"index": 9}\n'):
        assert lines_read(data) == lines_read(data, monkeypatch), data[:60]


def test_the_usual_line_takes_the_quick_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_loads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("json.loads was called for a usual line")

    monkeypatch.setattr(json, "loads", no_loads)
    data = json.dumps(GOOD).encode() + b"\n" + json.dumps({**GOOD, "index": 4}).encode() + b"\n"
    assert [n for n, _ in iter_records(io.BytesIO(data), "f.jsonl")] == [1, 2]


# -- read_records: a dataset line first, then a (sample, repeat) twice -------------------


def test_a_dataset_line_with_an_odd_index_before_repeated_records_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.jsonl"
    rows = [
        {"index": "x", "question": "q"},
        {**GOOD, "index": 0},
        {**GOOD, "index": 0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RecordsError, match=r"o\.jsonl:1 is not an episode record"):
        read_records([str(path)])


def test_repeats_of_the_same_index_are_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "o.jsonl"
    rows = [
        {**GOOD, "index": 1, "repeat": 0, "final_score": 0.0},
        {**GOOD, "index": 1, "repeat": 1, "final_score": 0.0},
        {**GOOD, "index": 2**62, "repeat": 2**62, "final_score": 0.0},
        {**GOOD, "index": 2**62, "repeat": 0, "final_score": 0.0},
        {**GOOD, "index": 1, "repeat": 1, "final_score": 1.0},  # replaces the second
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = read_records([str(path)])
    assert (run.seen, run.superseded) == (4, 1)
    assert run.stats.total.final_sum == 1.0
