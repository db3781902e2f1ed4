"""Bad dataset rows are reported with their line number and skipped; the run goes on.

Only ``--strict`` turns the first bad row into an error that stops the run.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interactions_core.cli import main as cli_main
from interactions_core.runtime import DatasetError, SampleReader

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

GOOD = json.dumps({"prompt": [{"role": "user", "content": "2+2?"}], "responses": ["4"]})
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
rows = st.one_of(
    st.just(GOOD),
    st.text(max_size=40).filter(lambda t: "\n" not in t and "\r" not in t),
    json_values.map(json.dumps),
    st.fixed_dictionaries(
        {
            "prompt": json_values
            | st.lists(st.dictionaries(st.sampled_from(["role", "content"]), json_values))
        },
        optional={"extra_info": json_values, "interaction_kwargs": json_values},
    ).map(json.dumps),
)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


@FUZZ
@given(lines=st.lists(rows, max_size=12))
def test_any_rows_are_read_or_reported_with_their_line(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    reader = SampleReader(path, max_examples=100)
    good = list(reader)
    assert reader.rows == len(good)
    nonblank = [i + 1 for i, line in enumerate(lines) if line.encode().strip()]
    assert len(good) + reader.skipped == len(nonblank)
    for bad in reader.bad_rows:
        assert bad.line in nonblank and str(bad).startswith(f"{path}:{bad.line}: ")
    if reader.skipped:
        with pytest.raises(DatasetError, match="bad row; run without --strict"):
            list(SampleReader(path, strict=True))


@FUZZ
@given(data=st.binary(max_size=300))
def test_binary_rows(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    reader = SampleReader(path)
    list(reader)


def test_enormous_rows(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    big = "x" * (16 * 1024 * 1024)
    path.write_text(
        "\n".join(
            [
                GOOD,
                json.dumps({"prompt": [{"role": "user", "content": big}], "responses": ["4"]}),
                '{"prompt": "' + big,  # an enormous truncated row
                GOOD,
            ]
        )
        + "\n"
    )
    code, stdout, stderr = run_cli("run", "--data", str(path), "--no-progress", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["episodes"] == 3
    assert f"{path}:3: invalid JSON" in stderr and "Traceback" not in stderr


def test_a_deeply_nested_row_is_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n" + GOOD + "\n")
    code, _, stderr = run_cli("run", "--data", str(path), "--no-progress")
    assert code == 0, stderr
    assert f"{path}:1:" in stderr
