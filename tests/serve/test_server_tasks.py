"""``interactions serve --data``: GSM8K's test rows through OpenEnv's Task API and ``reset``.

The server is a real process on 127.0.0.1 serving the 1319 rows that
``interactions data gsm8k`` builds from the shared GSM8K test set, plus a small
split of plain rows, with a shared token. Episodes are played with OpenEnv's own
``GenericEnvClient`` (``reset(split=, index=)``, then steps).

OpenEnv 0.10's released clients have no Task API methods (only its Harbor
client has some, fixed to the ``/harbor_env`` paths), so the Task API is
exercised through its HTTP routes with a plain HTTP client. ``openenv-core`` 0.3
has no Task API at all: with it, the tests that need the routes are replaced by
one checking that the server says so, and ``reset(split=, index=)`` is tested
on both.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interactions_gsm8k.interaction import CORRECT_MESSAGE, INCORRECT_MESSAGE
from openenv.core import GenericEnvClient
from openenv.core.env_server import interfaces
from server_harness import Server, start_server

from interactions_core.cli import main
from interactions_core.runtime.datasets import get_builder, run_builder, write_rows

#: Whether the installed OpenEnv has the Task API (``openenv`` 0.10 does, ``openenv-core`` 0.3 not).
TASK_API = hasattr(interfaces, "TaskProvider")
GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"
TOKEN = "tasks-token"
CONFIG = """\
default: gsm8k
interaction:
  - name: gsm8k
  - name: logged
    class_name: serve_plugins.Logged
    config: {log: "{events}"}
"""
#: A split of plain rows: top-level interaction_kwargs, naming another interaction.
PLAIN = [
    {"prompt": [{"role": "user", "content": f"say {word}"}], "interaction_kwargs": kwargs}
    for word, kwargs in [
        ("a", {"name": "logged", "ground_truth": "a"}),
        ("b", {"name": "logged", "ground_truth": "b"}),
    ]
]


def gsm8k_rows_file(folder: Path) -> Path:
    """The rows ``interactions data gsm8k --input test.jsonl`` writes from the shared data."""
    if not (GSM8K / "test.jsonl").is_file():
        if os.environ.get("INTERACTIONS_REQUIRE_SHARED_DATA"):
            pytest.fail(f"shared GSM8K data not found at {GSM8K}; CI requires it")
        pytest.skip(f"shared GSM8K data not found at {GSM8K} (it lives beside the checkout)")
    path = folder / "gsm8k_test.jsonl"
    write_rows(run_builder(get_builder("gsm8k"), {"input": str(GSM8K / "test.jsonl")}), path)
    return path


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The files served and their rows as a client should get them back."""
    folder = tmp_path_factory.mktemp("data")
    gsm8k = gsm8k_rows_file(folder)
    plain = folder / "plain.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in PLAIN), encoding="utf-8")
    lines = gsm8k.read_text(encoding="utf-8").splitlines()
    return {
        "gsm8k": gsm8k,
        "plain": plain,
        "test": [json.loads(line) for line in lines],
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, rows: dict[str, Any]) -> Iterator[Server]:
    running = start_server(
        tmp_path_factory.mktemp("serve-tasks"),
        CONFIG,
        "--data",
        f"test={rows['gsm8k']}",
        "--data",
        str(rows["plain"]),
        env={"INTERACTIONS_SERVE_TOKEN": TOKEN},
    )
    yield running
    assert running.stop() == 0, running.output()


@pytest.fixture(autouse=True)
def _no_session_left(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "server" in request.fixturenames:
        counts = request.getfixturevalue("server").wait_sessions(0)
        assert counts["open"] == 0 and counts["started"] == counts["finalized"], counts


def call(server: Server, path: str, body: dict[str, Any] | None = None, token: str | None = TOKEN):
    """``(status, json)`` of a Task API request (a GET without ``body``), bearing ``token``."""
    request = urllib.request.Request(
        server.url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# -- played with OpenEnv's client, on every OpenEnv --------------------------------------


async def test_reset_with_split_and_index_plays_the_gsm8k_row(
    server: Server, rows: dict[str, Any]
) -> None:
    index = 1318  # the last row: indexes are the file's row numbers
    row = rows["test"][index]
    truth = row["extra_info"]["interaction_kwargs"]["ground_truth"]
    async with GenericEnvClient(base_url=server.url) as env:
        first = await env.reset(split="test", index=index, token=TOKEN)
        assert first.done is False
        assert first.observation["messages"] == row["prompt"]
        assert first.observation["interaction"] == "gsm8k"
        assert first.observation["turn"] == 0

        wrong = await env.step({"content": f"I think\n#### {int(truth) + 1}"})
        assert (wrong.reward, wrong.done) == (0.0, False)
        assert wrong.observation["feedback"] == INCORRECT_MESSAGE

        right = await env.step({"content": f"Recounting.\n#### {truth}"})
        assert (right.reward, right.done) == (1.0, True)
        assert right.observation["feedback"] == CORRECT_MESSAGE
        assert right.observation["final_score"] == 1.0
        assert [m["role"] for m in right.observation["messages"]] == [
            *(m["role"] for m in row["prompt"]),
            "assistant",
            "user",
            "assistant",
        ]


def test_a_plain_row_plays_the_interaction_it_names(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(split="plain", index=1, token=TOKEN)
        assert first.observation["interaction"] == "logged"
        assert first.observation["messages"] == PLAIN[1]["prompt"]
        assert env.step({"content": "b"}).observation["final_score"] == 0.25
        sid = env.state()["episode_id"]
    assert f"finalize {sid}" in server.event_lines()


def test_reset_errors_name_the_splits_and_rows(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        with pytest.raises(
            RuntimeError, match=r"unknown split 'train'; served splits: test \(1319"
        ):
            env.reset(split="train", index=0, token=TOKEN)
        with pytest.raises(
            RuntimeError, match=r"index 1319 is out of range: split 'test' has 1319"
        ):
            env.reset(split="test", index=1319, token=TOKEN)
        with pytest.raises(RuntimeError, match="either split and index"):
            env.reset(split="test", index=0, prompt="hi", token=TOKEN)
        # an unknown split of megabytes was echoed whole (15 MB back per request)
        with pytest.raises(RuntimeError, match="unknown split 'sss") as caught:
            env.reset(split="s" * 1_000_000, index=0, token=TOKEN)
        assert len(str(caught.value)) < 2_000, len(str(caught.value))
        # the connection goes on, and a prompt with interaction_kwargs still works
        result = env.reset(
            prompt="2+2?", interaction_kwargs={"name": "gsm8k", "ground_truth": "4"}, token=TOKEN
        )
        assert env.step({"content": "#### 4"}).reward == 1.0
        assert result.observation["messages"] == [{"role": "user", "content": "2+2?"}]


def test_interactions_endpoint_lists_the_splits(server: Server) -> None:
    assert server.get("/interactions")["splits"] == [
        {"name": "test", "type": "test", "num_tasks": 1319},
        {"name": "plain", "type": "validation", "num_tasks": 2},
    ]


# -- OpenEnv's Task API (openenv 0.10) ---------------------------------------------------

if TASK_API:

    def test_task_api_lists_splits_and_counts_rows(server: Server) -> None:
        assert call(server, "/list_environments") == (200, ["interactions"])
        status, splits = call(server, "/interactions/splits")
        assert status == 200
        assert splits == [
            {"name": "test", "type": "test", "num_tasks": 1319},
            {"name": "plain", "type": "validation", "num_tasks": 2},
        ]
        raw = (GSM8K / "test.jsonl").read_text(encoding="utf-8").splitlines()
        assert call(server, "/interactions/num_tasks", {"split": "test"}) == (
            200,
            {"num_tasks": len(raw)},
        )
        assert len(raw) == 1319

    def test_task_api_returns_the_rows(server: Server, rows: dict[str, Any]) -> None:
        for index in (0, 700, 1318):
            status, body = call(server, "/interactions/task", {"split": "test", "index": index})
            assert (status, body) == (200, {"task": rows["test"][index]})
        status, body = call(
            server, "/interactions/task_range", {"split": "test", "start": 5, "stop": 8}
        )
        assert (status, body) == (200, {"tasks": rows["test"][5:8]})
        status, body = call(server, "/interactions/tasks", {"split": "plain"})
        assert (status, body["tasks"]) == (200, PLAIN)

    def test_task_api_errors_are_readable(server: Server) -> None:
        status, body = call(server, "/interactions/task", {"split": "test", "index": 1319})
        assert status == 400
        assert (
            body["detail"] == "index 1319 is out of range: split 'test' has 1319 rows (0 to 1318)"
        )
        status, body = call(server, "/interactions/num_tasks", {"split": "train"})
        assert status == 400
        assert body["detail"] == (
            "unknown split 'train'; served splits: test (1319 rows), plain (2 rows)"
        )

    def test_task_api_wants_the_shared_token(server: Server) -> None:
        for token in (None, "wrong"):
            status, body = call(server, "/interactions/splits", token=token)
            assert status == 401
            assert "Authorization: Bearer <token>" in body["detail"]
        assert call(server, "/list_environments", token=None)[0] == 401
        assert call(server, "/Interactions/splits", token=None)[0] == 401

    @pytest.mark.parametrize("host", ["127.0.0.1#", "127.0.0.1?", "localhost#", "127.0.0.1/x"])
    def test_no_host_header_gets_past_the_token(server: Server, host: str) -> None:
        """Starlette before 1.x rebuilt the path from ``Host``: a ``#`` in it hid the route."""
        import http.client
        from urllib.parse import urlsplit

        port = urlsplit(server.url).port
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.putrequest("POST", "/interactions/task", skip_host=True)
        body = json.dumps({"split": "test", "index": 0}).encode()
        for name, value in (("Host", host), ("Content-Type", "application/json")):
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        answer = response.read()
        connection.close()
        assert response.status in (401, 403) and b"ground_truth" not in answer

else:

    def test_without_task_api_in_openenv_core_the_server_says_so(server: Server) -> None:
        """openenv-core 0.3 has no Task API: no routes, a warning, and resets still play rows."""
        assert call(server, "/interactions/splits")[0] == 404
        assert "this OpenEnv has no Task API" in server.output()


@pytest.mark.parametrize(
    ("prompt", "told"),
    [
        ([{"role": "user", "content": "x" * 3_000_000}], "the prompt holds 3,000,000 characters"),
        ([{"role": "user", "content": "x"}] * 9_000, "the prompt holds 9,000 messages"),
        ([{"role": "r" * 100, "content": "x"}], "prompt[0]'s role is 100 characters long"),
    ],
)
def test_a_row_no_reset_could_play_refuses_the_file_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prompt: Any, told: str
) -> None:
    """Such rows were served (and handed out by the Task API, 3 MB a range), then every
    reset of them was refused for its size or shape."""
    path = tmp_path / "rows.jsonl"
    good = {
        "prompt": [{"role": "user", "content": "2+2?"}],
        "interaction_kwargs": {"name": "gsm8k"},
    }
    bad = {**good, "prompt": prompt}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("default: gsm8k\ninteraction:\n  - name: gsm8k\n", encoding="utf-8")
    assert main(["serve", str(config), "--data", str(path), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert f"{path}: row 2 cannot be played here: {told}" in err, err[:500]
