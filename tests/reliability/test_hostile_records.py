"""Odd text and hostile records: every writer and the one reader stay on their feet.

Each test here failed before the rule it checks was put in place (issue 23).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

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
    code, stdout, err = run_cli(
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
