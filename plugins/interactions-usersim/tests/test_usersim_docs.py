"""docs/usersim.md: the worked example, the templates and the recording, run as written.

The page's config, dataset and command are used verbatim, with only the two
endpoint addresses pointed at scripted servers on 127.0.0.1 (they play the
simulated users, the judge and the assistant); the summary printed must be the
one the page shows (lines shown ending in "…" vary by machine).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from interactions_usersim.config import (
    DEFAULT_CONVERSATION_JUDGE_TEMPLATE,
    DEFAULT_SYSTEM_TEMPLATE,
)
from usersim_server import ScriptedServer
from usersim_support import script

PAGE = Path(__file__).resolve().parents[3] / "docs" / "usersim.md"
SIMULATOR_URL = "http://127.0.0.1:8000/v1"
ASSISTANT_URL = "http://127.0.0.1:8001/v1"


def blocks(language: str) -> list[str]:
    """The page's fenced blocks of ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def shown_matches(printed: str, shown: str) -> bool:
    """A shown line ending in "…" matches a printed line that starts with its text."""
    if shown.endswith("…"):
        return printed.startswith(shown[:-1].rstrip())
    return printed == shown


def interactions(folder: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Run a documented ``interactions ...`` command line in ``folder``."""
    argv = shlex.split(command)
    assert argv[0] == "interactions"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    config, *_ = blocks("yaml")
    data, _recording = blocks("jsonl")
    (extras_shown,) = blocks("json")
    (console,) = blocks("console")
    command, *output = console.strip().splitlines()
    simulator, assistant = ScriptedServer(script), ScriptedServer(script)
    try:
        config = config.replace(SIMULATOR_URL, simulator.url)
        (tmp_path / "usersim.yaml").write_text(config, encoding="utf-8")
        (tmp_path / "support.jsonl").write_text(data, encoding="utf-8")
        done = interactions(tmp_path, command[2:].replace(ASSISTANT_URL, assistant.url))
    finally:
        simulator.close()
        assistant.close()
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()
    assert len(printed) == len(output), done.stdout
    for line, shown in zip(printed, output, strict=True):
        assert shown_matches(line, shown), (line, shown)
    assert (tmp_path / "report.html").stat().st_size > 0
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    refund = next(r for r in records if r["sample_id"] == "refund")
    last = refund["extras"][-1]
    shown_extra = json.loads(extras_shown)
    assert [c["call"] for c in last["usage"]] == [c["call"] for c in shown_extra["usage"]]
    assert set(last["usersim"]) == set(shown_extra["usersim"])
    assert set(last["usersim"]["calls"]) == set(shown_extra["usersim"]["calls"])
    for key in ("ended", "last_user_message"):
        assert last["usersim"][key] == shown_extra["usersim"][key]
    assert last["usersim"]["totals"]["requests"] == shown_extra["usersim"]["totals"]["requests"]
    # The simulated user with a persona was told who it is.
    persona = "a busy customer who answers in few words"
    assert any(persona in r["messages"][0]["content"] for r in simulator.by_model("user-sim"))


def test_the_documented_templates_are_the_defaults() -> None:
    system, judge = blocks("text")
    assert system.rstrip("\n") == DEFAULT_SYSTEM_TEMPLATE
    assert judge.rstrip("\n") == DEFAULT_CONVERSATION_JUDGE_TEMPLATE


def test_the_documented_recording_pins_an_episode(tmp_path: Path) -> None:
    _data, recording = blocks("jsonl")
    (tmp_path / "replies.jsonl").write_text(recording, encoding="utf-8")
    (tmp_path / "config.yaml").write_text(
        "interaction:\n  - name: support\n    plugin: usersim\n    config:\n"
        "      mode: replay\n      replay_file: replies.jsonl\n",
        encoding="utf-8",
    )
    goal = json.loads(recording.splitlines()[0])["goal"]
    row = {
        "prompt": [{"role": "user", "content": "Hi, I need help with something."}],
        "responses": ["What is the order number?", "Refund issued for order 1234."],
        "interaction_kwargs": {"name": "support", "goal": goal},
    }
    (tmp_path / "data.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    done = interactions(
        tmp_path, "interactions run config.yaml --data data.jsonl --output out.jsonl --no-progress"
    )
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [m["content"] for m in record["messages"]] == [
        "Hi, I need help with something.",
        "What is the order number?",
        "It is order 1234.",
        "Refund issued for order 1234.",
    ]
    assert record["end_reason"] == "terminated" and record["final_score"] == 0.9
    assert record["extras"][-1]["usersim"]["last_user_message"] == "Great, thank you!"
