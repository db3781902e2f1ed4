"""Rows served with ``--data``, without a server (no OpenEnv needed): loading, lookups,
``ServedEpisode.start(split=, index=)`` and the command line's checks of ``--data``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from interactions_core.cli import main
from interactions_core.errors import BadResetError, DatasetError
from interactions_core.serve import Hub, ServedEpisode
from interactions_core.serve.hub import Tasks, parse_data_argument

CONFIG = {"default": "gsm8k", "interaction": [{"name": "gsm8k"}, {"name": "weather"}]}

#: A verl row (kwargs under extra_info) and a plain one (top-level kwargs, default name).
ROWS: list[dict[str, Any]] = [
    {
        "prompt": [{"role": "user", "content": "9 * 2?"}],
        "extra_info": {"index": 0, "interaction_kwargs": {"name": "gsm8k", "ground_truth": "18"}},
    },
    {
        "prompt": [{"role": "user", "content": "7 + 5?"}],
        "interaction_kwargs": {"ground_truth": "12"},
    },
    {
        "prompt": [{"role": "user", "content": "weather in Oslo?"}],
        "interaction_kwargs": {"name": "weather"},
    },
]


def hub() -> Hub:
    return Hub.from_config(CONFIG)  # type: ignore[arg-type]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("data/test.jsonl", ("test", "data/test.jsonl")),
        ("train=rows.parquet", ("train", "rows.parquet")),
        ("eval.v2=a=b.jsonl", ("eval.v2", "a=b.jsonl")),
        ("dir/gsm8k_test.ndjson", ("gsm8k_test", "dir/gsm8k_test.ndjson")),
        ("-", ("stdin", "-")),
    ],
)
def test_a_data_argument_names_its_split(argument: str, expected: tuple[str, str]) -> None:
    assert parse_data_argument(argument) == expected


@pytest.mark.parametrize(
    ("argument", "problem"),
    [("=rows.jsonl", "split name before '=' is empty"), ("dir/ weird.jsonl", "NAME=FILE")],
)
def test_a_bad_data_argument_says_what_to_write(argument: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_data_argument(argument)


def test_rows_are_loaded_as_read_and_looked_up_by_split_and_index(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mixed.jsonl", ROWS)
    tasks = Tasks.load([("mixed", str(path))], hub())
    assert tasks.names() == ["mixed"]
    assert tasks.describe() == [{"name": "mixed", "type": "validation", "num_tasks": 3}]
    assert tasks.row("mixed", 1) == ROWS[1]
    assert tasks.range("mixed", 1, None) == ROWS[1:]
    assert tasks.range("mixed", -1, None) == ROWS[-1:]  # Python slice rules, as OpenEnv says


def test_parquet_rows_are_served_like_jsonl(tmp_path: Path) -> None:
    if os.environ.get("INTERACTIONS_REQUIRE_SUITES"):
        import pyarrow as pa  # the serve sessions install the extra: missing is a failure there
    else:
        pa = pytest.importorskip("pyarrow", reason="parquet needs pyarrow (the [parquet] extra)")
    import pyarrow.parquet as pq

    rows = [ROWS[0], {**ROWS[0], "extra_info": {"index": 1, **ROWS[0]["extra_info"]}}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    tasks = Tasks.load([parse_data_argument(str(tmp_path / "train.parquet"))], hub())
    assert tasks.describe() == [{"name": "train", "type": "train", "num_tasks": 2}]
    assert tasks.row("train", 0)["prompt"] == ROWS[0]["prompt"]
    assert tasks.row("train", 0)["extra_info"]["interaction_kwargs"]["ground_truth"] == "18"


def test_a_row_holding_bytes_refuses_the_file() -> None:
    """A parquet binary column was served as the text "b'\\xff...'" and could not be played."""
    row = {**ROWS[1], "prompt": [{"role": "user", "content": b"\xff\xfe bin"}]}
    with pytest.raises(DatasetError, match=r"split 'bin': row 1 holds binary data \(bytes\)"):
        Tasks({"bin": [row]})


def test_lookups_say_which_splits_and_rows_exist(tmp_path: Path) -> None:
    tasks = Tasks.load(
        [("a", str(write_jsonl(tmp_path / "a.jsonl", ROWS))), ("b", str(tmp_path / "a.jsonl"))]
    )
    with pytest.raises(BadResetError, match=r"unknown split 'c'; served splits: a \(3 rows\), b"):
        tasks.rows("c")
    with pytest.raises(BadResetError, match=r"index 3 is out of range: split 'a' has 3 rows"):
        tasks.row("a", 3)
    with pytest.raises(BadResetError, match=r"index -1 is out of range"):
        tasks.row("a", -1)
    with pytest.raises(BadResetError, match=r"index must be an integer row number \(0 to 2"):
        tasks.row("a", "1")
    with pytest.raises(BadResetError, match="serves no data"):
        Tasks({}).rows("test")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"prompt": [{"role": "user", "content": "x"}]}\nnot json\n', r"1 bad row\(s\), e\.g\."),
        ("", "has no rows"),
        (
            json.dumps({"prompt": ROWS[0]["prompt"], "interaction_kwargs": {"name": "gsm9k"}}),
            "row 1 cannot be played here: interaction 'gsm9k' is not served here",
        ),
    ],
)
def test_a_file_that_cannot_be_served_is_refused_whole(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=problem):
        Tasks.load([("rows", str(path))], hub())


def test_a_split_given_twice_is_refused(tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "rows.jsonl", ROWS))
    with pytest.raises(DatasetError, match="split 'rows' is given twice"):
        Tasks.load([("rows", path), ("rows", path)])


async def test_a_reset_with_split_and_index_plays_that_row(tmp_path: Path) -> None:
    h = hub()
    h.tasks = Tasks.load([("mixed", str(write_jsonl(tmp_path / "mixed.jsonl", ROWS)))], h)
    episode = ServedEpisode(h)
    first = await episode.start(split="mixed", index=1)
    assert (first["messages"], first["interaction"]) == (ROWS[1]["prompt"], "gsm8k")
    assert first["messages"] is not ROWS[1]["prompt"]  # the episode extends its own copy
    wrong = await episode.step("#### 13")
    assert (wrong["reward"], wrong["done"]) == (0.0, False)
    right = await episode.step("#### 12")
    assert (right["reward"], right["done"], right["final_score"]) == (1.0, True, 1.0)
    assert h.tasks.row("mixed", 1) == ROWS[1]  # the served row is unchanged

    weather = await episode.start(split="mixed", index=2)
    assert weather["interaction"] == "weather"
    await episode.end()

    with pytest.raises(BadResetError, match=r"either split and index .* or prompt"):
        await episode.start("hi", split="mixed", index=0)
    with pytest.raises(BadResetError, match="index is missing"):
        await episode.start(split="mixed")
    with pytest.raises(BadResetError, match="out of range: split 'mixed' has 3 rows"):
        await episode.start(split="mixed", index=3)
    assert h.tracker.open == 0 and h.tracker.started == h.tracker.finalized == 2


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("missing.jsonl", "data file not found"),
        ("=x.jsonl", "argument --data: '=x.jsonl': the split name before '=' is empty"),
    ],
)
def test_the_command_line_refuses_bad_data_in_one_paragraph(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    data: str,
    problem: str,
) -> None:
    import interactions_core.cli.serve as serve_cli

    monkeypatch.setattr(serve_cli, "_require_openenv", lambda: None)  # fails before serving
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text("interaction:\n  - name: gsm8k\n", encoding="utf-8")
    try:
        code = main(["serve", "config.yaml", "--data", data])
    except SystemExit as exc:  # argparse's usage error
        code = exc.code
    err = capsys.readouterr().err
    assert code != 0
    assert problem in err, err
    assert "Traceback" not in err


def test_a_range_is_at_most_one_page_of_rows() -> None:
    """A whole large split in one response would sit in memory while a slow client reads it."""
    from interactions_core.serve.hub import LIST_PREVIEW

    rows = [{"prompt": f"q{i}"} for i in range(LIST_PREVIEW + 5)]
    tasks = Tasks({"big": rows})
    assert tasks.range("big", 0, LIST_PREVIEW) == rows[:LIST_PREVIEW]
    assert tasks.range("big", LIST_PREVIEW, None) == rows[LIST_PREVIEW:]
    with pytest.raises(BadResetError, match=f"at most {LIST_PREVIEW} rows per request"):
        tasks.range("big", None, None)


def test_a_range_or_preview_holds_at_most_its_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand rows of 27 KB each made one cheap request hold 21 MB until read."""
    from interactions_core.serve import hub as hub_module

    monkeypatch.setattr(hub_module, "MAX_TASK_BYTES", 1000)
    rows = [{"prompt": "x" * 86} for _ in range(30)]  # 100 bytes of JSON each
    tasks = Tasks({"wide": rows, "huge": [{"prompt": "y" * 5000}, {"prompt": "z"}]})
    assert tasks.range("wide", 0, 10) == rows[:10]  # exactly the limit
    with pytest.raises(BadResetError, match=r"rows 5 to 16 of split 'wide' hold 1,100 bytes"):
        tasks.range("wide", 5, 16)
    with pytest.raises(BadResetError, match=r"from row 5, 10 fit\) and page on"):
        tasks.range("wide", 5, 16)
    assert tasks.preview("wide") == rows[:10]
    assert tasks.range("huge", 0, 1) == tasks.preview("huge") == [{"prompt": "y" * 5000}]
    assert tasks.range("huge", -1, None) == [{"prompt": "z"}]
    assert tasks.range("wide", 20, 3) == []


def _gate_call(gate: Any, path: str, **headers: str) -> list[dict[str, Any]]:
    import asyncio

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "path": path,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(gate(scope, None, send))
    return sent


def test_the_task_api_gate_checks_the_routed_path_and_the_token() -> None:
    from interactions_core.serve.openenv_app import TaskApiGate

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    h = Hub.from_config(CONFIG, token="s3cret")  # type: ignore[arg-type]
    gate = TaskApiGate(app, check_token=h.check_token, limit=8)
    for path in ("/interactions/task", "/INTERACTIONS/tasks", "/list_environments"):
        sent = _gate_call(gate, path, Host="127.0.0.1#")
        assert sent[0]["status"] == 401 and b"Bearer" in sent[1]["body"]
        # it asks for the token; it had said "retry in 1 s", which cannot help
        headers = dict(sent[0]["headers"])
        assert headers.get(b"www-authenticate") == b"Bearer" and b"retry-after" not in headers
        assert (
            sent[0]["status"] == _gate_call(gate, path, Authorization="Bearer wrong")[0]["status"]
        )
        assert _gate_call(gate, path, Authorization="Bearer s3cret") == []
    assert _gate_call(gate, "/health") == []
    assert reached == ["/interactions/task", "/INTERACTIONS/tasks", "/list_environments", "/health"]


def test_the_task_api_holds_a_bounded_number_of_responses() -> None:
    """Clients that ask and never read cannot pile responses up: the next one waits its turn."""
    import asyncio

    from interactions_core.serve.openenv_app import TaskApiGate

    async def scenario() -> list[int]:
        release = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await release.wait()  # a response its client has not read yet
            await send({"type": "http.response.start", "status": 200, "headers": []})

        gate = TaskApiGate(app, check_token=None, limit=3)
        statuses: list[int] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "path": "/interactions/task_range", "headers": []}
        held = [asyncio.create_task(gate(scope, None, send)) for _ in range(3)]
        await asyncio.sleep(0)
        await gate(scope, None, send)  # the fourth is refused at once
        release.set()
        await asyncio.gather(*held)
        await gate(scope, None, send)  # and once they are read, the next is answered
        return statuses

    assert asyncio.run(scenario()) == [503, 200, 200, 200, 200]


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ('"junk": "\\ud800"', "holds a lone surrogate"),
        ('"reward_model": {"x": NaN}', "holds NaN or Infinity"),
        ('"reward_model": ' + "[" * 300 + "1" + "]" * 300, "nests lists and objects more than"),
    ],
)
def test_a_row_the_task_api_could_not_send_refuses_the_file(
    tmp_path: Path, extra: str, problem: str
) -> None:
    """Such rows were served at start-up, then every Task API request covering them was a
    500 with a traceback in the log (and the preview of the whole split with them)."""
    good = json.dumps(ROWS[1])
    path = tmp_path / "t.jsonl"
    path.write_text(good + "\n" + good[:-1] + ", " + extra + "}\n", encoding="utf-8")
    with pytest.raises(DatasetError) as refused:
        Tasks.load([("t", str(path))], hub())
    assert f"{path}: row 2 {problem}" in str(refused.value)
    assert "so the Task API could not send it; fix or remove the row" in str(refused.value)


def test_a_task_api_token_beyond_latin1_is_taken() -> None:
    """The header was decoded as Latin-1, so no bytes a client sent could match a token
    such as 'sécret✓' (which `reset` accepted): the Task API refused its holder."""
    from interactions_core.serve.openenv_app import TaskApiGate

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    h = Hub.from_config(CONFIG, token="sécret✓")  # type: ignore[arg-type]
    gate = TaskApiGate(app, check_token=h.check_token, limit=8)
    scope = {"type": "http", "path": "/interactions/task", "headers": []}
    scope["headers"] = [(b"authorization", "Bearer sécret✓".encode())]
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    import asyncio

    asyncio.run(gate(scope, None, send))
    assert sent == []  # reached the route
    scope["headers"] = [(b"authorization", b"Bearer s\xe9cret")]  # not UTF-8: refused, no crash
    asyncio.run(gate(scope, None, send))
    assert sent[0]["status"] == 401


def test_a_reset_whose_kwargs_hold_a_name_the_runtime_passes_is_refused() -> None:
    """It had started a session and failed the plugin's start (or its first step) with
    "got multiple values for argument 'instance_id'", logged as the plugin's fault."""
    for key in ("instance_id", "messages", "self"):
        with pytest.raises(BadResetError, match=f"interaction_kwargs hold '{key}'"):
            hub().route({"name": "gsm8k", key: "serve-1"})


def test_a_rows_routing_warning_is_given_once_at_start(tmp_path: Path) -> None:
    """Checking that a row can be played read its kwargs a second time, and a row whose
    two interaction_kwargs disagree warned twice."""
    import functools
    import warnings

    from interactions_core.serve.episode import playable

    row = {
        "prompt": [{"role": "user", "content": "7 + 5?"}],
        "interaction_kwargs": {"name": "weather"},
        "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "12"}},
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    h = hub()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Tasks.load([("t", str(path))], h, check=functools.partial(playable, h))
    told = [w for w in caught if "interaction_kwargs" in str(w.message)]
    assert len(told) == 1, [str(w.message) for w in caught]
