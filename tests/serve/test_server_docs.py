"""The snippets of docs/serve.md and docs/trl.md's served form run against a real server."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import Server, start_server

ROOT = Path(__file__).resolve().parents[2]


def blocks(doc: str, language: str) -> list[str]:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def example_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The server of the doc's command: ``interactions serve examples/config.yaml``."""
    command = blocks("serve.md", "bash")[0].splitlines()[-1].split()
    assert command[:3] == ["interactions", "serve", "examples/config.yaml"]
    config = (ROOT / "examples" / "config.yaml").read_text(encoding="utf-8")
    running = start_server(tmp_path_factory.mktemp("docs"), config)
    yield running
    assert running.stop() == 0


def test_the_serve_client_snippet_prints_what_the_doc_shows(example_server: Server) -> None:
    snippet = blocks("serve.md", "python")[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "docs/serve.md", "exec"), {"URL": example_server.url})
    shown = re.search(r"```\n(0\.0 False.*?)```", (ROOT / "docs" / "serve.md").read_text(), re.S)
    assert shown is not None
    assert printed.getvalue() == shown.group(1)
    assert example_server.wait_sessions(0)["open"] == 0


def test_the_start_up_log_matches_the_doc(example_server: Server) -> None:
    text = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
    summary = re.search(r"INFO:  (serving .*)", text)
    assert summary is not None
    assert summary.group(1) in example_server.output()


def test_the_trl_url_snippet_builds_a_factory(example_server: Server) -> None:
    from interactions_core.integrations.trl import environment_factory

    snippet = next(b for b in blocks("trl.md", "python") if "url=URL" in b)
    namespace = {"URL": example_server.url, "environment_factory": environment_factory}
    exec(compile(snippet, "docs/trl.md", "exec"), namespace)
    env = namespace["factory"]()  # type: ignore[operator]
    env.reset(interaction_kwargs={"ground_truth": "18"})
    assert env.answer("#### 18") == "Your response is correct!"
    assert env.get_reward() == 1.0
    assert example_server.wait_sessions(0)["open"] == 0


def test_the_data_snippets_print_what_the_doc_shows(
    tmp_path_factory: pytest.TempPathFactory, gsm8k_data: Path
) -> None:
    """The ``--data`` section: its commands, then its two snippets against that server.

    The Task API snippet needs ``openenv`` 0.10; with ``openenv-core`` 0.3 the
    routes are absent, as the page says, and that is what is checked instead.
    """
    from openenv.core.env_server import interfaces

    from interactions_core.cli import main

    text = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
    section = text[text.index("## Tasks from data") : text.index("## The observation")]
    commands = re.findall(r"```bash\n(.*?)```", section, re.S)[0].splitlines()
    data = commands[0].split()
    assert data[:3] == ["interactions", "data", "gsm8k"]
    folder = tmp_path_factory.mktemp("docs-data")
    rows = folder / data[data.index("-o") + 1]
    data[data.index("--input") + 1] = str(gsm8k_data / "test.jsonl")
    data[data.index("-o") + 1] = str(rows)
    assert main(data[1:]) == 0
    serve = commands[1].split()
    assert serve[:3] == ["interactions", "serve", "examples/config.yaml"]
    split, _, name = serve[serve.index("--data") + 1].partition("=")
    assert name == rows.name
    config = (ROOT / "examples" / "config.yaml").read_text(encoding="utf-8")
    running = start_server(folder, config, "--data", f"{split}={rows}")
    try:
        snippets = re.findall(r"```python\n(.*?)```", section, re.S)
        shown = re.findall(r"-->\n```\n(.*?)```", section, re.S)
        assert len(snippets) == len(shown) == 2
        for snippet, expected in zip(snippets, shown, strict=True):
            if "task_api" in snippet and not hasattr(interfaces, "TaskProvider"):
                assert "no Task API" in running.output()
                with pytest.raises(OSError, match="404"):
                    running.get("/interactions/splits")
                continue
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(snippet, "docs/serve.md", "exec"), {"URL": running.url})
            assert printed.getvalue() == expected
        assert running.wait_sessions(0)["open"] == 0
    finally:
        assert running.stop() == 0, running.output()
