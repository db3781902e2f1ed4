"""The ``gsm8k`` dataset builder: verl's multi-turn rows from GSM8K's raw JSONL.

Tests on the real test split read the shared data (fixture ``gsm8k_data``) and
skip when it is absent; the others write small files of their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from interactions_gsm8k.dataset import (
    INSTRUCTION,
    SOLUTION_KEYS,
    SYSTEM_PROMPT,
    build_gsm8k,
    final_answer,
    make_row,
)

from interactions_core.runtime.datasets import SampleReader, check_row, get_builder, run_builder

ROWS = 1319
CONFIG = "interaction:\n  - name: gsm8k\n    config: {method: flexible}\n"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def problem(question: str = "What is 1,000 + 234?", truth: str = "1,234") -> dict[str, str]:
    return {"question": question, "answer": f"Add them: 1000 + 234 = 1234.\n#### {truth}"}


def solutions_for(question: str, tag: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {"question": question, "ground_truth": "...\nA: 1234"}
    for key in SOLUTION_KEYS:
        row[key] = {"is_correct": False, "solution": f"{key}{tag}: A: 1"}
    return row


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "interactions_core", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


# -- the real test split -----------------------------------------------------------


def test_test_split_rows(gsm8k_data: Path) -> None:
    raw = read_jsonl(gsm8k_data / "test.jsonl")
    rows = list(build_gsm8k(input=str(gsm8k_data / "test.jsonl")))
    assert len(rows) == len(raw) == ROWS
    for index, (source, row) in enumerate(zip(raw, rows, strict=True)):
        truth = source["answer"].rsplit("#### ", 1)[1].strip().replace(",", "")
        assert check_row(row) is None
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][0]["content"] == SYSTEM_PROMPT
        query = f"{source['question']} {INSTRUCTION}"
        assert row["prompt"][1]["content"] == query
        assert row["data_source"] == "openai/gsm8k"
        assert row["ability"] == "math"
        assert row["reward_model"] == {"style": "rule", "ground_truth": truth}
        assert row["extra_info"] == {
            "split": "test",
            "index": index,
            "answer": source["answer"],
            "question": source["question"],
            "interaction_kwargs": {"name": "gsm8k", "query": query, "ground_truth": truth},
        }
        assert "responses" not in row


def test_rows_written_are_read_back_by_the_runtime(gsm8k_data: Path, tmp_path: Path) -> None:
    from interactions_core.runtime import write_rows

    out = tmp_path / "gsm8k.jsonl"
    count = write_rows(build_gsm8k(input=str(gsm8k_data / "test.jsonl")), out)
    reader = SampleReader(out, strict=True)
    assert count == sum(1 for _ in reader) == ROWS
    assert reader.skipped == 0


def test_solutions_attach_the_four_recorded_replies_in_order(gsm8k_data: Path) -> None:
    recorded = read_jsonl(gsm8k_data / "example_model_solutions.jsonl")
    rows = list(
        build_gsm8k(
            input=str(gsm8k_data / "test.jsonl"),
            solutions=str(gsm8k_data / "example_model_solutions.jsonl"),
            split="eval",
            interaction="gsm8k_flexible",
        )
    )
    assert len(rows) == ROWS
    for row, solved in zip(rows, recorded, strict=True):
        assert row["responses"] == [solved[key]["solution"] for key in SOLUTION_KEYS]
        assert row["extra_info"]["split"] == "eval"
        assert row["extra_info"]["interaction_kwargs"]["name"] == "gsm8k_flexible"
        assert check_row(row) is None


def test_self_correction_replay_through_the_command_line(gsm8k_data: Path, tmp_path: Path) -> None:
    """``interactions data gsm8k`` then ``interactions run --policy replay``: the worked example."""
    data = tmp_path / "x.jsonl"
    built = cli(
        "data",
        "gsm8k",
        "--input",
        str(gsm8k_data / "test.jsonl"),
        "--solutions",
        str(gsm8k_data / "example_model_solutions.jsonl"),
        "--output",
        str(data),
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr
    assert f"wrote {ROWS} rows" in built.stderr
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    ran = cli("run", str(config), "--data", str(data), "--policy", "replay", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert summary["episodes"] == ROWS
    assert summary["terminated"] == 887
    assert summary["turns"] == {"1": 286, "2": 293, "3": 119, "4": 621}
    assert summary["final_score_mean"] == pytest.approx(887 / ROWS)
    assert summary["errors"] == 0
    assert summary["skipped_rows"] == 0
    assert summary["end_reasons"] == {"terminated": 887, "exhausted": 432}


# -- pure functions and options ----------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("so 72\n#### 72", "72"),
        ("#### 1,234,567", "1234567"),
        ("#### -3.5 ", "-3.5"),
        ("first #### 1\nthen #### 2", "2"),
        ("no marker here", None),
        ("####5", None),
        ("ends with #### ", None),
    ],
)
def test_final_answer(answer: str, expected: str | None) -> None:
    assert final_answer(answer) == expected


def test_make_row_is_json_and_a_valid_sample() -> None:
    row = make_row("Q?", "A\n#### 1", "1", index=3, responses=["#### 1"])
    assert check_row(row) is None
    assert json.loads(json.dumps(row)) == row
    assert row["responses"] == ["#### 1"]
    assert row["extra_info"]["index"] == 3


def test_max_rows_and_blank_lines(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps(problem("Q1?")) + "\n\n" + json.dumps(problem("Q2?")) + "\n"
        "not json, but past the limit\n",
        encoding="utf-8",
    )
    rows = list(build_gsm8k(input=str(source), max_rows=2))
    assert [r["extra_info"]["question"] for r in rows] == ["Q1?", "Q2?"]
    assert [r["extra_info"]["index"] for r in rows] == [0, 1]
    assert rows[0]["reward_model"]["ground_truth"] == "1234"
    one = list(build_gsm8k(input=str(source), max_rows=1))
    assert len(one) == 1


def test_registered_builder_converts_command_line_strings(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [problem("Q1?"), problem("Q2?")])
    info = get_builder("gsm8k")
    assert info.distribution == "interactions-gsm8k"
    assert info.builder is build_gsm8k
    rows = list(run_builder(info, {"input": str(source), "max_rows": "1"}))
    assert len(rows) == 1


# -- bad input ----------------------------------------------------------------------


def test_missing_input_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ValueError, match=r"input file not found: .*nope\.jsonl"):
        build_gsm8k(input=str(missing))


def test_a_directory_is_not_an_input_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        build_gsm8k(input=str(tmp_path))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_device_is_not_an_input_file() -> None:
    """It was told "input file not found: /dev/zero"."""
    with pytest.raises(ValueError, match="is not a regular file"):
        build_gsm8k(input="/dev/zero")


def test_missing_solutions_file(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [problem()])
    with pytest.raises(ValueError, match=r"solutions file not found: .*sol\.jsonl"):
        build_gsm8k(input=str(source), solutions=str(tmp_path / "sol.jsonl"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_rows": -1}, "max_rows must be 0"),
        ({"split": ""}, "--split needs"),
        ({"interaction": ""}, "--interaction needs"),
        ({"solutions": True}, "--solutions needs a file path"),
        ({"solutions": ["a", "b"]}, "--solutions was given more than once"),
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [problem()])
    with pytest.raises(ValueError, match=message):
        build_gsm8k(input=str(source), **options)


@pytest.mark.parametrize(
    ("third_line", "message"),
    [
        ("{not json", r"in\.jsonl:3: invalid JSON"),
        ("[1, 2]", r"in\.jsonl:3: expected a JSON object, got list"),
        (json.dumps({"answer": "#### 1"}), r"in\.jsonl:3: 'question' is missing"),
        (json.dumps({"question": "Q", "answer": 1}), r"in\.jsonl:3: 'answer' is not a string"),
        (json.dumps({"question": "Q", "answer": "it is 5"}), r"in\.jsonl:3: .*no final answer"),
    ],
)
def test_bad_input_line_is_named(tmp_path: Path, third_line: str, message: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps(problem("Q1?")) + "\n" + json.dumps(problem("Q2?")) + "\n" + third_line + "\n",
        encoding="utf-8",
    )
    rows = build_gsm8k(input=str(source))
    with pytest.raises(ValueError, match=message):
        list(rows)


def test_not_utf8_line_is_named(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(json.dumps(problem()).encode() + b'\n{"question": "\xff"}\n')
    with pytest.raises(ValueError, match=r"in\.jsonl:2: not UTF-8"):
        list(build_gsm8k(input=str(source)))


def test_solutions_question_mismatch_names_the_line(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [problem("Q1?"), problem("Q2?")])
    sol = write_jsonl(tmp_path / "sol.jsonl", [solutions_for("Q1?"), solutions_for("Other?")])
    rows = build_gsm8k(input=str(source), solutions=str(sol))
    with pytest.raises(ValueError, match=r"sol\.jsonl:2: question does not match .*in\.jsonl:2"):
        list(rows)


def test_solutions_too_short_or_too_long(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [problem("Q1?"), problem("Q2?")])
    short = write_jsonl(tmp_path / "short.jsonl", [solutions_for("Q1?")])
    with pytest.raises(ValueError, match=r"short\.jsonl: ends before the problem on .*in\.jsonl:2"):
        list(build_gsm8k(input=str(source), solutions=str(short)))
    long = write_jsonl(
        tmp_path / "long.jsonl", [solutions_for("Q1?"), solutions_for("Q2?"), solutions_for("Q3?")]
    )
    with pytest.raises(ValueError, match=r"long\.jsonl:3: more problems than"):
        list(build_gsm8k(input=str(source), solutions=str(long)))
    # With max_rows the files are compared only as far as the rows go.
    assert len(list(build_gsm8k(input=str(source), solutions=str(long), max_rows=2))) == 2


def test_solutions_missing_a_key_names_the_line(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [problem("Q1?")])
    broken = solutions_for("Q1?")
    del broken["175b_finetuning"]["solution"]
    sol = write_jsonl(tmp_path / "sol.jsonl", [broken])
    with pytest.raises(ValueError, match=r"sol\.jsonl:1: '175b_finetuning' must be an object"):
        list(build_gsm8k(input=str(source), solutions=str(sol)))


def test_command_line_reports_a_bad_line_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(problem()) + "\n{oops\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli("data", "gsm8k", "--input", str(source), "--output", str(out), cwd=tmp_path)
    assert result.returncode == 1
    assert "builder 'gsm8k' failed" in result.stderr
    assert "in.jsonl:2: invalid JSON" in result.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [source]
