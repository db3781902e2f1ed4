"""What plugins hand the CLI to show (builder defaults, error text, hook failures) is shown
as text, whatever it is: the command says what it has and never fails on the plugin's
value, nor lets the plugin's text drive the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main

BUILDERS = '''
from interactions_core import hookimpl


class Unshowable:
    def __repr__(self):
        raise RuntimeError("no repr")

    __str__ = __repr__


def _row(i):
    return {"prompt": [{"role": "user", "content": f"q{i}"}]}


def build_odd_defaults(*, big: int = 10**5000, odd: object = Unshowable(), fine: int = 3):
    """Rows; options with defaults no plain repr can show."""
    yield _row(0)


def build_registered(*, n: int = 1, odd: object = None, text: str = ""):
    """Rows; registered with defaults that cannot be shown."""
    yield _row(0)


def build_mixed():
    """Rows whose field changes type, with a long text parquet quotes whole."""
    yield {**_row(0), "x": 1}
    yield {**_row(1), "x": "A" * 200_000}


def build_mappings():
    """A row that is a Mapping but no dict, and one holding such a Mapping."""
    import types

    row = {"prompt": [{"role": "user", "content": "2+2?"}],
           "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "4"}}}
    yield types.MappingProxyType(row)
    yield {**row, "meta": types.MappingProxyType({"source": "x"})}


class LyingItems(dict):
    def items(self):
        return [("prompt", [{"role": "user", "content": "x"}]), ("v", {1, 2, 3})]


def build_lying():
    """A dict subclass whose items() says other than what it holds."""
    yield LyingItems(prompt=[{"role": "user", "content": "checked"}])


def build_reused():
    """One row, edited between yields, as a careless builder does."""
    row = _row(0)
    row["extra_info"] = {"interaction_kwargs": {"ground_truth": "0"}}
    for i in range(3):
        row["extra_info"]["interaction_kwargs"]["ground_truth"] = str(i)
        row["prompt"][0]["content"] = f"question {i}"
        yield row


class LongingText(str):
    def __len__(self):
        raise RuntimeError("desc len boom")

    def __bool__(self):
        raise RuntimeError("desc bool boom")


def build_counted(*, n: int = 1, ratio: float = 0.5):
    """One row; options of a number type."""
    yield _row(0)


async def build_async():
    """A coroutine function: builders are plain functions or generators."""
    return [_row(0)]


def build_shared(*, n: int = 30):
    """One row holding a list that holds the next one twice, n deep: 2**n values."""
    x = ["a" * 10]
    for _ in range(n):
        x = [x, x]
    yield {**_row(0), "blow": x}


@hookimpl
def register_dataset_builders(register):
    register("shared", build_shared)
    register("async", build_async)
    register("bad-default", build_counted, defaults={"n": "notanint"})
    register("counted", build_counted)
    register("described-odd", build_reused, description=LongingText("reused rows"))
    register("described-bytes", build_reused, description=b"bytes desc")
    register("described-number", build_reused, description=123)
    register("mappings", build_mappings)
    register("lying", build_lying)
    register("reused", build_reused)
    register("mixed", build_mixed)
    register("odd-defaults", build_odd_defaults)
    register("registered", build_registered,
             defaults={"n": 10**5000, "odd": Unshowable(), "text": "red \\x1b[31m"})
'''

FAILING_HOOK = """
from interactions_core import hookimpl


@hookimpl
def register_dataset_builders(register):
    raise RuntimeError("cannot register \\x1b[31mred")
"""


@pytest.fixture
def builders(make_dist: Any, forget_modules: None) -> None:
    make_dist(
        "acme-odd-builders",
        entry_points={"interactions_core.plugins": {"odd": "acme_odd_builders"}},
        modules={"acme_odd_builders": BUILDERS},
    )


@pytest.mark.parametrize("name", ["odd-defaults", "registered"])
def test_builder_defaults_that_cannot_be_shown_are_named_in_data_help(
    builders: None, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`data BUILDER --help` failed with `unexpected ValueError` (10**5000's repr) or the
    default's own RuntimeError."""
    assert main(["data", name, "--help"]) == 0
    out = capsys.readouterr().out
    assert "unexpected" not in out and "\x1b" not in out
    assert "an int of 16,610 bits" in out
    assert "<Unshowable: its repr raised RuntimeError>" in out


def test_builder_defaults_that_cannot_be_shown_keep_data_json_valid(
    builders: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`data --json` failed as a whole, for every builder, on one builder's default."""
    assert main(["data", "--json"]) == 0
    listed = {b["name"]: b for b in json.loads(capsys.readouterr().out)}
    options = listed["odd-defaults"]["options"]
    assert options["fine"] == 3
    assert options["big"] == "an int of 16,610 bits"
    assert options["odd"] == "<Unshowable: its repr raised RuntimeError>"


def test_a_hook_that_fails_to_register_builders_is_told_by_data(
    make_dist: Any, forget_modules: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`interactions data` said "No dataset builders installed." and nothing of the
    hook plugin whose register_dataset_builders raised."""
    make_dist(
        "acme-failing-hook",
        entry_points={"interactions_core.plugins": {"failing": "acme_failing_hook"}},
        modules={"acme_failing_hook": FAILING_HOOK},
    )
    assert main(["data"]) == 0
    captured = capsys.readouterr()
    told = captured.out + captured.err
    assert "acme-failing-hook" in told and "cannot register" in told, told
    assert "\x1b" not in told


def test_plugin_text_in_an_error_never_drives_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config's plugin failing at import printed its message's escape sequences raw,
    through `check` and through the CLI's error line."""
    (tmp_path / "paints_import.py").write_text(
        'raise RuntimeError("bad \\x1b[31mred\\x07")\n', encoding="utf-8"
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        "interaction:\n  - name: p\n    class_name: paints_import.P\n    config: {}\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "q"}]}\n', encoding="utf-8")
    for command in (["check", str(config)], ["run", str(config), "--data", str(data)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert "\x1b" not in err and "\x07" not in err, err
        assert "bad \\x1b[31mred\\x07" in err, err


HOSTILE_ERRORS = """
from interactions_core import BaseInteraction


class Falsy(Exception):
    def __bool__(self):
        raise RuntimeError("no truth")


class LyingCause(Exception):
    @property
    def __cause__(self):
        raise RuntimeError("no cause")


class Hostile(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        if kwargs["mode"] == "bool":
            raise Falsy("f")
        raise LyingCause("c")
"""


def test_an_error_that_cannot_be_tested_for_truth_keeps_its_trace_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace lost the session_end of an episode whose plugin error's `__bool__`
    raised, and the summary counted an observer error the episode never had."""
    (tmp_path / "hostile_errors.py").write_text(HOSTILE_ERRORS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "c.yaml"
    config.write_text(
        "interaction:\n  - name: h\n    class_name: hostile_errors.Hostile\n    config: {}\n",
        encoding="utf-8",
    )
    data, trace, out = tmp_path / "d.jsonl", tmp_path / "t.jsonl", tmp_path / "o.jsonl"
    with data.open("w", encoding="utf-8") as file:
        for mode in ("bool", "cause"):
            prompt = [{"role": "user", "content": "q"}]
            kwargs = {"name": "h", "mode": mode}
            file.write(
                json.dumps({"prompt": prompt, "responses": ["a"], "interaction_kwargs": kwargs})
                + "\n"
            )
    command = ["run", str(config), "--data", str(data), "--trace", str(trace), "--output", str(out)]
    assert main(command) == 1
    captured = capsys.readouterr()
    assert "observer" not in captured.out + captured.err
    ends = [
        e for e in map(json.loads, trace.read_text().splitlines()) if e["event"] == "session_end"
    ]
    assert len(ends) == 2
    for end in ends:
        assert "hostile_errors.py:" in end["error"], end["error"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["errors"][0]["type"] for r in records) == ["Falsy", "LyingCause"]
    assert all("hostile_errors.py:" in r["errors"][0]["at"] for r in records)


def test_a_parquet_error_quoting_a_huge_value_is_cut(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyarrow's error quoted the 200,000-character field whole on the error line."""
    pytest.importorskip("pyarrow", reason="parquet needs pyarrow (the [parquet] extra)")
    assert main(["data", "mixed", "--output", str(tmp_path / "rows.parquet")]) == 1
    err = capsys.readouterr().err
    assert "builder 'mixed' failed: Arrow" in err and "more characters]" in err
    assert len(err) < 3_000, len(err)


def test_error_examples_of_resumed_records_are_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resumed records with a sample id and error fields of megabytes were told whole on
    stderr and in --json, once per example."""
    rows = tmp_path / "d.jsonl"
    with rows.open("w", encoding="utf-8") as file:
        for i in range(3):
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["a"]}
            file.write(json.dumps(row) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["run", "--data", str(rows), "--output", str(out), "--limit", "1"]) == 0
    first = json.loads(out.read_text().splitlines()[0])
    huge = "S" * 2_000_000
    first.update(
        sample_id=huge,
        end_reason="error",
        final_score=None,
        errors=[{"where": "generate_response", "message": "M" * 2_000_000, "at": "A" * 100_000}],
    )
    out.write_text(json.dumps(first) + "\n", encoding="utf-8")
    capsys.readouterr()
    command = ["run", "--data", str(rows), "--output", str(out), "--resume", "--json"]
    main(command)
    captured = capsys.readouterr()
    assert len(captured.err) < 5_000, len(captured.err)
    (example,) = json.loads(captured.out)["error_examples"]
    assert len(example["sample_id"]) < 300 and len(example["message"]) < 10_100
    assert example["sample_id"].startswith("SSS") and len(example["at"]) < 10_100


PAINTED_DOC = '''
from interactions_core import BaseInteraction


class Painted(BaseInteraction):
    """Turns the terminal \\x1b[31mred\\x07 when its doc is printed."""

    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "ok", 1.0, {}
'''


def test_show_escapes_a_plugins_docstring(
    make_dist: Any, forget_modules: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`interactions show` printed a plugin's docstring with its escape sequences."""
    make_dist(
        "acme-painted",
        entry_points={"interactions_core.interactions": {"painted": "acme_painted:Painted"}},
        modules={"acme_painted": PAINTED_DOC},
    )
    assert main(["show", "painted"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "Turns the terminal \\x1b[31mred\\x07 when its doc is printed." in out


def test_rows_that_are_mappings_are_written_as_objects(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Mapping row (and a Mapping inside a row) was written as its Python repr, a JSON
    string, with exit 0: `run` then skipped the row."""
    out = tmp_path / "rows.jsonl"
    assert main(["data", "mappings", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(type(r) is dict for r in rows), rows
    assert rows[0]["prompt"][0]["content"] == "2+2?" and rows[1]["meta"] == {"source": "x"}


def test_what_is_written_is_what_was_checked(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dict subclass was checked by dict's items and written by its own, which held a
    set: written as the text "{1, 2, 3}", exit 0."""
    out = tmp_path / "rows.jsonl"
    assert main(["data", "lying", "--output", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row == {"prompt": [{"role": "user", "content": "checked"}]}


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_a_row_edited_between_yields_is_written_as_it_was_yielded(
    builders: None, tmp_path: Path, suffix: str
) -> None:
    """Parquet kept the rows until the end and wrote the last state three times."""
    if suffix == "parquet":
        pytest.importorskip("pyarrow", reason="parquet needs pyarrow (the [parquet] extra)")
    from interactions_core.runtime.datasets import SampleReader

    out = tmp_path / f"rows.{suffix}"
    assert main(["data", "reused", "--output", str(out)]) == 0
    read = list(SampleReader(out))
    assert [s["prompt"][0]["content"] for s in read] == [f"question {i}" for i in range(3)]


def test_one_builders_odd_description_breaks_no_listing(
    builders: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A description of a str subclass whose __len__ raises failed every `data` command
    (`unexpected RuntimeError`), bytes failed the listing, a number was listed as one."""
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    assert "reused rows" in out and "the description registered is of type bytes, not text" in out
    assert main(["data", "--json"]) == 0
    listed = {b["name"]: b for b in json.loads(capsys.readouterr().out)}
    assert listed["described-odd"]["description"] == "reused rows"
    assert listed["described-number"]["description"] == (
        "<the description registered is of type int, not text>"
    )
    assert main(["data", "mixed", "--help"]) == 0


def test_a_plugins_bad_default_is_told_as_the_plugins(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registered default that is no int read "option --n: 'notanint' is not a valid
    int", an option the user never passed; and a float option took "nan"."""
    out = str(tmp_path / "rows.jsonl")
    assert main(["data", "bad-default", "--output", out]) == 1
    err = capsys.readouterr().err
    assert "the default the plugin registered for --n: 'notanint' is not a valid int" in err
    assert main(["data", "bad-default", "--n", "3", "--output", out]) == 0
    capsys.readouterr()
    for value in ("nan", "inf", "-inf"):
        assert main(["data", "counted", "--ratio", value, "--output", out, "--overwrite"]) == 1
        assert f"option --ratio: '{value}' is not a valid float" in capsys.readouterr().err


def test_a_coroutine_builder_is_refused_without_pythons_warning(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused, and then Python warned that the coroutine "was never awaited"."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["data", "async", "--output", str(tmp_path / "rows.jsonl")]) == 1
        gc.collect()
    err = capsys.readouterr().err
    assert "returned coroutine; it must return an iterable of rows" in err, err
    assert not [w for w in caught if "never awaited" in str(w.message)], caught


def test_a_row_sharing_its_parts_is_measured_as_written_and_refused_at_once(
    builders: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """31 lists each holding the next twice: copied value by value (2**30 of them), it had
    taken 2.7 GB and a minute before any check."""
    import time

    began = time.monotonic()
    assert main(["data", "shared", "--output", str(tmp_path / "rows.jsonl")]) == 1
    assert time.monotonic() - began < 10
    err = capsys.readouterr().err
    assert "is a row of over 16,777,216 values (a part it shares counted each time" in err, err
    out = tmp_path / "small.jsonl"
    assert main(["data", "shared", "--n", "3", "--output", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["blow"] == [[[["a" * 10]] * 2] * 2] * 2  # shared parts written out in full


PLAIN_SCHEMA = """
from interactions_core import InteractionResult, SessionInteraction


class Weird:
    low = 0


class X(SessionInteraction):
    config_schema = Weird

    def respond(self, state, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)
"""


def test_a_schema_that_is_no_attrs_class_is_the_plugins_problem_everywhere(
    make_dist: Any, forget_modules: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show` failed as "unexpected NotAnAttrsClassError ... please report it", and
    `list --check` said ok, while `check` refused every config naming the plugin."""
    make_dist(
        "acme-plain-schema",
        entry_points={"interactions_core.interactions": {"plain-schema": "acme_plain:X"}},
        modules={"acme_plain": PLAIN_SCHEMA},
    )
    assert main(["show", "plain-schema"]) == 1
    err = capsys.readouterr().err
    assert "is not an attrs class (@attrs.define)" in err and "unexpected" not in err, err
    assert main(["list", "--check", "plain-schema"]) == 1
    out = capsys.readouterr().out
    assert "broken" in out and "is not an attrs class" in out, out
