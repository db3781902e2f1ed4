"""Odd text and hostile records: every writer and the one reader stay on their feet.

Each test here failed before the rule it checks was put in place (issue 23).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main as cli_main
from interactions_core.runtime.records import LineWriter, read_records

LONE = "\udc80"  # valid JSON ("\\udc80"), but no UTF-8 form


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


def write_data(path: Path, rows: int, odd: dict[int, str] | None = None) -> None:
    odd = odd or {}
    with path.open("w", encoding="utf-8") as file:
        for i in range(rows):
            text = odd.get(i, f"question {i}")
            row = {"prompt": [{"role": "user", "content": text}], "responses": [f"answer {i}"]}
            file.write(json.dumps(row) + "\n")  # ensure_ascii: a lone surrogate is escaped


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


# -- #2: a lone surrogate is escaped by every writer and read back by the reader --------


def test_a_lone_surrogate_in_row_500_of_1000_is_escaped_everywhere(tmp_path: Path) -> None:
    data, out, trace, report = (tmp_path / n for n in ("d.jsonl", "o.jsonl", "t.jsonl", "r.html"))
    write_data(data, 1000, {499: f"odd {LONE} text"})
    code, _, err = run_cli(
        "run", "--data", str(data), "--output", str(out), "--trace", str(trace),
        "--report", str(report), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    records = read_lines(out)
    assert len(records) == 1000
    assert records[499]["messages"][0]["content"] == f"odd {LONE} text"
    assert b"\\udc80" in report.read_bytes()
    read_lines(trace)  # every trace line is JSON

    # --resume from the first 300 records: the rest is played, the odd row included.
    out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:300]))
    report.unlink()
    code, _, err = run_cli(
        "run", "--data", str(data), "--output", str(out), "--resume",
        "--report", str(report), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert sorted(r["index"] for r in read_lines(out)) == list(range(1000))
    code, _, err = run_cli("report", str(out), "-o", str(tmp_path / "again.html"))
    assert code == 0, err
    assert "1,000 episodes" in err


def test_a_plugins_feedback_with_a_lone_surrogate_is_written(tmp_path: Path) -> None:
    path = tmp_path / "o.jsonl"
    feedback = {"role": "user", "content": f"feedback {LONE}", "score": float("nan")}
    with LineWriter(path) as writer:
        writer.write({"index": 0, "end_reason": "done", "messages": [feedback]})
        writer.write({"index": 1, "end_reason": "done", "messages": [{"content": "é"}]})
    lines = path.read_bytes().splitlines()
    first = json.loads(lines[0])
    assert first["messages"][0] == {"role": "user", "content": f"feedback {LONE}", "score": None}
    assert "é".encode() in lines[1]  # other lines keep their UTF-8 text unescaped
    state = read_records(str(path), "c", "d")
    assert sorted(state.records) == [(0, 0), (1, 0)]


def play(tmp_path: Path, rows: int = 4, *extra: str) -> tuple[Path, Path]:
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    if not data.exists():
        write_data(data, rows)
    code, _, err = run_cli("run", "--data", str(data), "--output", str(out), *extra)
    assert code == 0, err
    return data, out


# -- #12: --repeat is part of what --resume checks ----------------------------------------


def test_resume_with_another_repeat_is_refused(tmp_path: Path) -> None:
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_data(data, 3)
    run_cli("run", "--data", str(data), "--output", str(out), "--repeat", "4")
    assert len(read_lines(out)) == 12
    code, _, err = run_cli(
        "run", "--data", str(data), "--output", str(out), "--resume", "--repeat", "2"
    )
    assert code != 0 and "--repeat" in err and f"{out}:1" in err
    code, _, err = run_cli(
        "run", "--data", str(data), "--output", str(out), "--resume", "--repeat", "4"
    )
    assert "12 episode(s) from earlier runs, 0 played now" in err


# -- #17: --resume cannot read back a named pipe ------------------------------------------


def test_resume_into_a_named_pipe_is_refused(tmp_path: Path) -> None:
    import os

    data = tmp_path / "d.jsonl"
    write_data(data, 2)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    code, _, err = run_cli("run", "--data", str(data), "--output", str(pipe), "--resume")
    assert code != 0 and "regular file" in err and "pipe" in err


# -- #8 and #13: a record with one wrong field is reported with its line ------------------

BAD_FIELDS: list[tuple[str, Any]] = [
    ("turns", "x"),
    ("turns", 10_000_000),
    ("turns", 10**9),
    ("final_score", "<img>"),
    ("final_score", 10**400),
    ("errors", "boom"),
    ("end_reason", {}),
    ("duration_s", float("nan")),
    ("sample_id", float("nan")),
    ("index", -7),
    ("index", 5000),
    ("index", float("inf")),
    ("scores", ["a"]),
]


def _spoil(out: Path, field: str, value: Any) -> bytes:
    """Replace ``field`` of the second record with ``value``, written as JSON would be."""
    lines = out.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[1])
    record[field] = value
    text = json.dumps(record).replace("Infinity", "1e400")
    lines[1] = text.encode() + b"\n"
    out.write_bytes(b"".join(lines))
    return text.encode()


def test_resume_refuses_a_record_with_one_wrong_field_naming_its_line(tmp_path: Path) -> None:
    data, out = play(tmp_path, 4)
    good = out.read_bytes()
    for field, value in BAD_FIELDS:
        out.write_bytes(good)
        _spoil(out, field, value)
        code, _, err = run_cli("run", "--data", str(data), "--output", str(out), "--resume")
        assert code != 0, (field, value)
        assert f"{out}:2: not a record" in err and f"'{field}'" in err, err
        assert "unexpected" not in err


def test_report_skips_a_record_with_one_wrong_field_naming_its_line(tmp_path: Path) -> None:
    _, out = play(tmp_path, 4)
    good = out.read_bytes()
    for field, value in BAD_FIELDS:
        if value == 5000:  # the report has no dataset to hold an index against
            continue
        out.write_bytes(good)
        _spoil(out, field, value)
        html = tmp_path / "r.html"
        code, _, err = run_cli("report", str(out), "-o", str(html), "--overwrite")
        assert code == 0, (field, value, err)
        assert "3 episodes" in err and "1 unreadable line(s) skipped" in err, (field, err)
        assert f"o.jsonl:2: &#x27;{field}&#x27;" in html.read_text() or f"'{field}'" in (
            html.read_text()
        )


def test_report_of_a_device_or_an_endless_line_ends_with_a_message(tmp_path: Path) -> None:
    from interactions_core import _files

    code, _, err = run_cli("report", "/dev/zero", "-o", str(tmp_path / "z.html"))
    assert code != 0 and "/dev/zero is a device" in err
    long = tmp_path / "long.jsonl"
    _, out = play(tmp_path, 2)
    long.write_bytes(b"x" * (_files.MAX_LINE + 10) + b"\n" + out.read_bytes())
    code, _, err = run_cli("report", str(long), "-o", str(tmp_path / "l.html"))
    assert code == 0 and "2 episodes" in err and "1 unreadable line(s)" in err, err


DEEP = b'{"a":' * 100_000 + b"1" + b"}" * 100_000  # json.loads raises RecursionError


def test_report_skips_a_line_nested_too_deeply_naming_its_line(tmp_path: Path) -> None:
    _, out = play(tmp_path, 3)
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + DEEP + b"\n" + b"".join(lines[1:]))
    html = tmp_path / "r.html"
    code, _, err = run_cli("report", str(out), "-o", str(html))
    assert code == 0 and "3 episodes" in err and "1 unreadable line(s) skipped" in err, err
    assert "o.jsonl:2: JSON nested too deeply to read" in html.read_text()


def test_resume_refuses_a_line_nested_too_deeply_naming_its_line(tmp_path: Path) -> None:
    data, out = play(tmp_path, 3)
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + DEEP + b"\n" + b"".join(lines[1:]))
    code, _, err = run_cli("run", "--data", str(data), "--output", str(out), "--resume")
    assert code != 0 and f"{out}:2: not a record" in err and "nested too deeply" in err, err
    assert "unexpected" not in err


def test_resume_tells_errors_recorded_without_where(tmp_path: Path) -> None:
    """A record's error needs only a message (or is plain text): the run's summary says it."""
    data, out = play(tmp_path, 3)
    good = out.read_bytes()
    for errors in ([{"message": "boom"}], ["boom"]):
        lines = good.splitlines(keepends=True)
        record = json.loads(lines[1])
        lines[1] = json.dumps({**record, "errors": errors}).encode() + b"\n"
        out.write_bytes(b"".join(lines))
        code, _, err = run_cli("run", "--data", str(data), "--output", str(out), "--resume")
        assert code == 1 and "unexpected" not in err, err  # 1: an episode errored
        assert "1 of 3 episode(s) errored" in err and "sample 1: boom" in err, err


def test_report_shows_errors_recorded_as_plain_values(tmp_path: Path) -> None:
    """``interactions report`` reads an error of plain text (or a number) as ``--resume`` does."""
    _, out = play(tmp_path, 3)
    good = out.read_bytes()
    for n, errors in enumerate((["boom"], [5], [None], [{"message": "boom"}, "again"])):
        lines = good.splitlines(keepends=True)
        record = json.loads(lines[1])
        lines[1] = json.dumps({**record, "errors": errors}).encode() + b"\n"
        out.write_bytes(b"".join(lines))
        page = tmp_path / f"r{n}.html"
        code, _, err = run_cli("report", str(out), "-o", str(page))
        assert code == 0 and "unexpected" not in err, (errors, err)
        html = page.read_text(encoding="utf-8")
        assert "?: Error" in html, errors  # counted under an error of unknown origin
        assert str(errors[-1] if errors[-1] != "again" else "boom") in html, errors


# -- #9: the last record of a (sample, repeat) is the one that counts ----------------------


def test_report_counts_the_last_record_of_each_sample_and_repeat(tmp_path: Path) -> None:
    _, out = play(tmp_path, 4)
    records = read_lines(out)
    errored = {**records[1], "errors": [{"where": "x", "type": "E", "message": "boom"}]}
    with out.open("wb") as file:  # an errored record, replaced later by --retry-errors
        for record in [records[0], errored, records[2], records[3], records[1]]:
            file.write(json.dumps(record).encode() + b"\n")
    code, _, err = run_cli("report", str(out), "-o", str(tmp_path / "r.html"))
    assert code == 0 and "4 episodes" in err and "1 record(s) replaced" in err, err
    from interactions_core.report import read_records as report_records

    (run,) = report_records([str(out)])
    assert run.stats.total.episodes == 4 and run.stats.total.errors == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_report_from_a_pipe_counts_the_last_record_of_each_sample_and_repeat(
    tmp_path: Path,
) -> None:
    """`cat records | interactions report /dev/stdin` counted the records --retry-errors had
    replaced (90 episodes, 30 errored where the file itself gives 60 and none)."""
    import threading

    _, out = play(tmp_path, 4)
    records = read_lines(out)
    errored = {**records[1], "errors": [{"where": "x", "type": "E", "message": "boom"}]}
    lines = [records[0], errored, records[2], records[3], records[1]]
    payload = b"".join(json.dumps(record).encode() + b"\n" for record in lines)
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as pipe:
            pipe.write(payload)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    code, _, err = run_cli("report", str(fifo), "-o", str(tmp_path / "r.html"))
    writer.join(10)
    assert code == 0 and "4 episodes" in err and "1 record(s) replaced" in err, err
    assert '<td>episodes</td><td class="num">4</td>' in (tmp_path / "r.html").read_text()


def test_resume_report_counts_the_earlier_records_as_the_summary_does(tmp_path: Path) -> None:
    data, out = play(tmp_path, 11)
    out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:7]))
    html = tmp_path / "r.html"
    code, _, err = run_cli(
        "run", "--data", str(data), "--output", str(out), "--resume", "--report", str(html)
    )
    assert code == 0 and "7 episode(s) from earlier runs, 4 played now" in err, err
    from interactions_core.report import read_records as report_records

    (whole,) = report_records([str(out)])
    assert whole.stats.total.episodes == 11
    assert '<td>episodes</td><td class="num">11</td>' in html.read_text()


def test_report_warns_about_the_records_of_several_runs_in_one_file(tmp_path: Path) -> None:
    """Two runs' records joined with cat were counted as one run, one run's records
    silently replacing the other's as if they were retries."""
    _, out = play(tmp_path, 3)
    records = read_lines(out)
    other = [{**r, "config_hash": "another"} for r in records]
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records + other))
    code, _, err = run_cli("report", str(joined), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    assert "holds the records of 2 different runs" in err, err
    code, _, err = run_cli("report", str(out), "-o", str(tmp_path / "one.html"))
    assert code == 0 and "different runs" not in err, err


@pytest.mark.parametrize("score", [5e307, 1.5e308, 1.7e308])
def test_report_draws_turn_scores_near_the_float_limit(tmp_path: Path, score: float) -> None:
    """Finite per-turn scores whose mean overflows (5e307 x 11) or whose axis end passes the
    largest float (1.5e308) ended `interactions report`, and `run --report` before printing
    its summary, with "unexpected OverflowError"."""
    _, out = play(tmp_path, 11)
    records = [{**r, "scores": [score] * len(r["scores"] or [0])} for r in read_lines(out)]
    out.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    page = tmp_path / "r.html"
    code, _, err = run_cli("report", str(out), "-o", str(page))
    assert code == 0 and "unexpected" not in err, err
    assert page.read_bytes().rstrip().endswith(b"</html>")


def test_end_reasons_the_runtime_never_writes_are_counted_in_a_bounded_line(
    tmp_path: Path,
) -> None:
    """A resumed record with a made-up end_reason was counted as an episode but in no
    bucket of `end_reasons`: the buckets added up to fewer episodes than the run had."""
    data, out = play(tmp_path, 12)
    lines = out.read_bytes().splitlines(keepends=True)
    made_up = {1: "made-up-1", 2: "made-up-1", 3: "a" * 1000, 4: "a" * 1000}
    for i in range(8):  # six made-up reasons, one of them 1,000 characters long
        record = json.loads(lines[i])
        reason = made_up.get(i, f"made-up-{i}")
        lines[i] = json.dumps({**record, "end_reason": reason}).encode() + b"\n"
    out.write_bytes(b"".join(lines))
    command = ["run", "--data", str(data), "--output", str(out), "--resume"]
    code, text, err = run_cli(*command)
    assert code == 0, err
    (ended,) = [line for line in text.splitlines() if line.startswith("ended by")]
    assert "other 2" in ended and "made-up-1 2" in ended and len(ended) < 200, ended
    assert ended.endswith(
        f"single_turn 4, {'a' * 37}... 2, made-up-1 2, made-up-0 1, made-up-5 1, other 2"
    )
    code, text, err = run_cli(*command, "--json")
    reasons = json.loads(text)["end_reasons"]
    assert sum(reasons.values()) == 12 and reasons["single_turn"] == 4, reasons
    assert len(reasons) == 6 and all(len(r) <= 40 for r in reasons)
