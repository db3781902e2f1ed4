"""`vf-eval`, verifiers' own CLI, evaluates an installed interaction served by `interactions serve`.

The user's path, end to end, with the commands and the eval file of
docs/trainers.md ("## verifiers") as written there: ``interactions serve
--rewards final`` on 127.0.0.1 serves the bundled ``gsm8k`` interaction;
verifiers' OpenEnv taskset (``openenv``, ``taskset.base_url``) resets it once per
entry of ``taskset.resets`` (``prompt`` + ``interaction_kwargs``, one per GSM8K
row); the plain-chat ``null`` harness runs verifiers' chat program (a ``uv``
script) in a subprocess runtime against a scripted OpenAI-compatible server that
answers each question wrong, then right. Only the two URLs change (both servers
listen on free ports), and a third GSM8K row is added so that ``-n 2`` has one
to leave out.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from server_harness import Server, start_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DOC = ROOT / "docs" / "trainers.md"
#: The start of what the bundled gsm8k interaction says to a wrong answer.
FEEDBACK = "Your response is incorrect!"
#: GSM8K rows the eval file names: the doc's two, and one more that ``-n 2`` must skip.
ROWS = 3


def doc_blocks() -> list[tuple[str, str]]:
    """The fenced blocks (language, body) of the verifiers section of docs/trainers.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## verifiers\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


def doc_command(program: str) -> list[str]:
    """The doc's command line that starts with ``program``, split as a shell would."""
    lines = [
        line
        for lang, body in doc_blocks()
        if lang == "bash"
        for line in body.splitlines()
        if line.startswith(program + " ")
    ]
    assert len(lines) == 1, f"expected one `{program}` command in the doc, found {lines}"
    return shlex.split(lines[0])


def doc_eval_file() -> dict[str, Any]:
    """The doc's eval file (its first TOML block; the second is the module's taskset)."""
    first = next(body for lang, body in doc_blocks() if lang == "toml")
    return tomllib.loads(first)


def gsm8k_rows(folder: Path, count: int) -> list[dict[str, str]]:
    """The first ``count`` rows of GSM8K's test split, read where the data lives."""
    rows = []
    with (folder / "test.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            rows.append(json.loads(line))
            if len(rows) == count:
                break
    return rows


def reset_of(row: dict[str, str]) -> dict[str, Any]:
    """One ``taskset.resets`` entry: the question, and gsm8k's reference number."""
    truth = row["answer"].rsplit("####", 1)[-1].strip().replace(",", "")
    return {
        "prompt": row["question"],
        "interaction_kwargs": {"name": "gsm8k", "ground_truth": truth},
    }


@pytest.fixture
def rows(gsm8k_data: Path) -> list[dict[str, str]]:
    return gsm8k_rows(gsm8k_data, ROWS)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    """The doc's ``interactions serve`` command, on a free port instead of 8000."""
    words = doc_command("interactions")
    assert words[1] == "serve" and "--port" in words, words
    config = (ROOT / words[2]).read_text(encoding="utf-8")
    at = words.index("--port")
    flags = words[3:at] + words[at + 2 :]
    assert flags == ["--rewards", "final"], flags
    folder = tmp_path / "serve"
    folder.mkdir()
    server = start_server(folder, config, *flags)
    try:
        yield server
    finally:
        assert server.stop() == 0, server.output()


@pytest.fixture
def chat(tmp_path: Path, rows: list[dict[str, str]]) -> Iterator[tuple[str, Path]]:
    """The scripted model server: its ``/v1`` URL and the file it logs requests to."""
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    requests = tmp_path / "chat-requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "scripted_chat.py"), str(rows_file), str(requests)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1", requests
    finally:
        proc.terminate()
        proc.wait(10)


def run_vf_eval(folder: Path, config: dict[str, Any], command: list[str]) -> str:
    """Write ``eval.toml`` into ``folder`` and run the doc's ``vf-eval`` command there."""
    (folder / "eval.toml").write_text(tomli_w.dumps(config), encoding="utf-8")
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    # uv, which verifiers' harness runs its chat program with, is installed beside vf-eval.
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env[config["client"]["api_key_var"]] = "unused-by-the-scripted-server"
    argv = [str(bin_dir / command[0]), *command[1:]]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    output = f"$ {shlex.join(command)}  [{time.monotonic() - started:.1f} s]\n"
    output += f"--- stdout\n{done.stdout[-20000:]}\n--- stderr\n{done.stderr[-20000:]}"
    assert done.returncode == 0, output
    return output


def flag(command: list[str], *names: str) -> str:
    [value] = [command[i + 1] for i, word in enumerate(command) if word in names]
    return value


def observation(node: dict[str, Any]) -> dict[str, Any]:
    """The server's observation a user turn carries (verifiers sends it as JSON)."""
    assert node["message"]["role"] == "user", node
    return json.loads(node["message"]["content"])["observation"]


def test_vf_eval_scores_wrong_then_right_gsm8k_episodes_one(
    tmp_path: Path, rows: list[dict[str, str]], served: Server, chat: tuple[str, Path]
) -> None:
    chat_url, requests = chat
    config = doc_eval_file()
    taskset = config["env"]["taskset"]
    assert taskset["id"] == "openenv"
    # The doc's resets are the first GSM8K rows, in the shape this test builds.
    assert taskset["resets"] == [reset_of(row) for row in rows[: len(taskset["resets"])]]
    taskset["resets"] = [reset_of(row) for row in rows]
    taskset["base_url"] = served.url
    config["client"]["base_url"] = chat_url

    command = doc_command("vf-eval")
    limit, group, concurrency = (int(flag(command, f)) for f in ("-n", "-r", "-c"))
    assert (limit, group, concurrency) == (2, 2, 1)
    output = run_vf_eval(tmp_path, config, command)

    run = tmp_path / flag(command, "-o") / flag(command, "--run.name")
    episodes = [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]
    # -n 2 -r 2: the first two resets, each played twice, the third never.
    played = Counter(e["task"]["data"]["reset"]["prompt"] for e in episodes)
    assert played == {row["question"]: group for row in rows[:limit]}, output
    assert len({t["id"] for e in episodes for t in e["traces"]}) == limit * group

    spans = []
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        [trace] = episode["traces"]
        # The interaction's score, summed over the steps by verifiers' taskset.
        assert trace["rewards"] == {"openenv_reward": {"score": 1.0, "weight": 1.0}}
        truth = episode["task"]["data"]["reset"]["interaction_kwargs"]["ground_truth"]
        roles = [node["message"]["role"] for node in trace["nodes"]]
        assert roles == ["user", "assistant", "user", "assistant"], roles
        first, wrong, feedback, right = trace["nodes"]
        assert observation(first)["feedback"] == ""
        assert not wrong["message"]["content"].endswith(f"#### {truth}")
        # The interaction's feedback on the wrong answer is the user turn that follows it.
        seen = observation(feedback)
        assert seen["feedback"].startswith(FEEDBACK), seen
        assert seen["messages"][-1] == {"role": "user", "content": seen["feedback"]}
        assert seen["messages"][-2] == {"role": "assistant", "content": wrong["message"]["content"]}
        assert right["message"]["content"].endswith(f"#### {truth}")
        timing = trace["timing"]
        spans.append((timing["start"], timing["scoring"]["end"]))
    # -c 1: one episode in flight at a time.
    spans.sort()
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(spans)), spans

    # The model saw each question twice per episode: before and after the feedback.
    assert len(requests.read_text().splitlines()) == 2 * limit * group
    saved = json.loads((run / "configs" / "resolved" / "eval.json").read_text())
    assert (saved["num_rollouts"], saved["max_concurrent"]) == (group, concurrency)
    # Every episode the server played ended and was finalized.
    assert served.wait_sessions(0)["open"] == 0


def module_eval_file(chat_url: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    """The doc's eval file, its taskset swapped for the module verifiers loads by name."""
    config = doc_eval_file()
    config["client"]["base_url"] = chat_url
    doc_module = [tomllib.loads(body) for lang, body in doc_blocks() if lang == "toml"][1:]
    assert doc_module, "the doc shows the `interactions-verifiers` taskset block"
    config["env"]["taskset"] = doc_module[0]["env"]["taskset"]
    config["env"]["taskset"]["rows"] = [reset_of(row) for row in rows]
    return config


def test_the_taskset_module_plays_installed_interactions_by_name(
    tmp_path: Path, rows: list[dict[str, str]], chat: tuple[str, Path]
) -> None:
    chat_url, requests = chat
    config = module_eval_file(chat_url, rows)
    assert config["env"]["taskset"]["id"] == "interactions-verifiers"
    command = [
        "vf-eval", "@", "eval.toml", "-n", "2", "-r", "2", "-c", "2",
        "--no-push", "--no-rich", "-o", "outputs", "--run.name", "gsm8k-module",
    ]  # fmt: skip
    output = run_vf_eval(tmp_path, config, command)

    run = tmp_path / "outputs" / "gsm8k-module"
    episodes = [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]
    played = Counter(e["task"]["data"]["opening"] for e in episodes)
    assert played == {row["question"]: 2 for row in rows[:2]}, output
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        [trace] = episode["traces"]
        assert trace["rewards"] == {"interaction_score": {"score": 1.0, "weight": 1.0}}
        assert trace["stop_condition"] == "terminated"
        truth = episode["task"]["data"]["interaction_kwargs"]["ground_truth"]
        messages = [node["message"] for node in trace["nodes"]]
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
        question, wrong, feedback, right = (m["content"] for m in messages)
        assert question == episode["task"]["data"]["opening"]
        assert not wrong.endswith(f"#### {truth}")
        # The interaction's feedback itself is the user turn after the wrong answer.
        assert feedback.startswith(FEEDBACK), feedback
        assert right.endswith(f"#### {truth}")
    assert len(requests.read_text().splitlines()) == 2 * 2 * 2
