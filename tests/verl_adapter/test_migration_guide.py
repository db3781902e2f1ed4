"""docs/migrating-from-verl.md, verl 0.9 part: every command and file, run for real.

The data command writes parquet that verl's own ``RLHFDataset`` reads; the
training command's overrides are composed into verl's own trainer config with
hydra; verl's ``AgentLoopWorker`` built from that config (tiny tokenizer and a
scripted model in place of the real ones) plays the rows through the adapter.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import verl
from harness import ScriptedServer, make_worker

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "migrating-from-verl.md"
SHARED = ROOT.parent / "shared"


def section(title: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(title)
    following = re.search(r"\n#{2,3} ", text[start + len(title) :])
    end = start + len(title) + following.start() if following else len(text)
    return text[start:end]


def blocks(title: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(title), re.S)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder beside a link to the shared data, as the guide's relative paths expect."""
    (tmp_path / "shared").symlink_to(SHARED)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_the_worked_example_runs_through_verl(
    workdir: Path, model_dir: Path, tokenizer: Any
) -> None:
    # 1. the data
    (command,) = blocks("### 1. The data", "sh")
    interactions = str(Path(sys.executable).with_name("interactions"))
    argv = shlex.split(command)
    assert argv[0] == "interactions"
    done = subprocess.run([interactions, *argv[1:]], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "wrote 1319 rows" in done.stderr
    # 2 and 3. the two YAML files, named by their first line
    for title in ("### 2. The interactions", "### 3. The loop"):
        (text,) = blocks(title, "yaml")
        name = text.splitlines()[0].lstrip("# ").strip()
        (workdir / name).write_text(text)
    check = subprocess.run([interactions, "check", "interactions.yaml"], capture_output=True)
    assert check.returncode == 0, check.stderr
    # 4. the training command's overrides, composed into verl's own config
    (train,) = blocks("### 4. Train", "sh")
    words = shlex.split(train.replace("\\\n", " "))
    assert words[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    from hydra import compose, initialize_config_dir

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer", overrides=words[3:])
    rollout = config.actor_rollout_ref.rollout
    assert rollout.agent.agent_loop_config_path == "agent_loops.yaml"
    assert rollout.multi_turn.max_assistant_turns == 4
    # The model and engine are the test's; everything else is the guide's.
    config.actor_rollout_ref.model.path = str(model_dir)
    answers = {}
    with (SHARED / "data" / "gsm8k" / "test.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            answers[row["question"]] = row["answer"].rsplit("####", 1)[1].strip()

    def script(prompt: str, number: int) -> str:
        (question,) = [q for q in answers if q in prompt]
        right = answers[question]
        return f"#### {right}" if number else "#### -1"  # wrong first, then right

    server = ScriptedServer(tokenizer, script)
    worker = make_worker(config, server)
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    dataset = RLHFDataset(config.data.train_files, tokenizer, config.data)
    assert len(dataset) == 1319
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(6)]))
    assert set(batch.non_tensor_batch["agent_name"]) == {"interactions"}
    import asyncio

    out = asyncio.run(worker.generate_sequences(batch))
    assert [list(s) for s in out.non_tensor_batch["turn_scores"]] == [[0.0, 1.0]] * 6
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [1.0] * 6
    assert set(out.non_tensor_batch["interaction_name"]) == {"gsm8k"}
