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
from harness import ScriptedServer, make_worker, run_batch

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "migrating-from-verl.md"
SHARED = ROOT.parent / "shared"

pytestmark = pytest.mark.both_workers


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


def run_data_commands(workdir: Path) -> None:
    """Step 1, as written. The shared data holds only GSM8K's test split, so the
    test gives it as both ``gsm8k/train.jsonl`` and ``gsm8k/test.jsonl``."""
    (workdir / "gsm8k").mkdir()
    for split in ("train", "test"):
        (workdir / "gsm8k" / f"{split}.jsonl").symlink_to(SHARED / "data" / "gsm8k" / "test.jsonl")
    commands = blocks("### 1. The data", "sh")[0].strip().splitlines()
    assert [shlex.split(c)[:3] for c in commands] == [["interactions", "data", "gsm8k"]] * 2
    interactions = str(Path(sys.executable).with_name("interactions"))
    for command in commands:
        argv = [interactions, *shlex.split(command)[1:]]
        done = subprocess.run(argv, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "wrote 1319 rows" in done.stderr


def overrides(command: str, workdir: Path) -> list[str]:
    """The command's Hydra overrides, with ``$PWD`` expanded as the shell would."""
    words = shlex.split(command.replace("\\\n", " "))
    return [w.replace("$PWD", str(workdir)) for w in words]


def checked_config(words: list[str]) -> Any:
    """verl's trainer config composed from ``words``, checked as ``main_ppo`` checks it."""
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer", overrides=words)
    auto_set_device(config)
    validate_config(
        config=config,
        use_reference_policy=need_reference_policy(config),
        use_critic=need_critic(config),
    )
    return config


def train_command(workdir: Path) -> list[str]:
    (train,) = blocks("### 2. Train", "sh")
    words = overrides(train, workdir)
    assert words[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    return words[3:]


def scripted_server(tokenizer: Any) -> ScriptedServer:
    """A model that answers every GSM8K question wrong first, then right."""
    answers = {}
    with (SHARED / "data" / "gsm8k" / "test.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            answers[row["question"]] = row["answer"].rsplit("####", 1)[1].strip()

    def script(prompt: str, number: int) -> str:
        (question,) = [q for q in answers if q in prompt]
        return f"#### {answers[question]}" if number else "#### -1"

    return ScriptedServer(tokenizer, script)


def play_rows(config: Any, model_dir: Path, tokenizer: Any, files: str) -> Any:
    """Six rows of ``files``, read by verl's dataset, through the rollout worker built
    from ``config`` (each test runs on verl's default v1 worker and the legacy one)."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    # The model and engine are the test's; everything else is the guide's.
    config.actor_rollout_ref.model.path = str(model_dir)
    worker = make_worker(config, scripted_server(tokenizer))
    dataset = RLHFDataset(files, tokenizer, config.data)
    assert len(dataset) == 1319
    items = [dataset[i] for i in range(6)]
    assert {item["agent_name"] for item in items} == {"interactions"}
    rows = [
        {
            "prompt": list(item["raw_prompt"]),
            "extra_info": dict(item["extra_info"]),
            "agent_name": item["agent_name"],
        }
        for item in items
    ]
    return run_batch(worker, rows)


def trajectories(config: Any, rows: int) -> int:
    """How many trajectories ``rows`` prompts give: verl's v1 worker plays ``rollout.n``
    of each itself, where the legacy trainer repeats the rows before its worker."""
    import harness

    return rows * (config.actor_rollout_ref.rollout.n if harness.WORKER_KIND == "tq" else 1)


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent-loop registry as a fresh process has it, restored afterwards: verl's
    workers keep agent-loop YAML entries in a process-wide registry."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    target = "interactions_core.integrations.verl.InteractionAgentLoop"
    monkeypatch.setitem(_agent_loop_registry, "interactions", {"_target_": target})


def test_the_worked_example_runs_through_verl(
    workdir: Path, model_dir: Path, tokenizer: Any
) -> None:
    run_data_commands(workdir)
    config = checked_config(train_command(workdir))
    assert config.trainer.use_v1  # verl's default trainer path
    assert config.data.train_files == str(workdir / "gsm8k_train.parquet")
    assert config.data.val_files == str(workdir / "gsm8k_test.parquet")
    rollout = config.actor_rollout_ref.rollout
    assert rollout.agent.agent_loop_config_path is None  # the entry point registers the loop
    assert rollout.multi_turn.max_assistant_turns == 4
    assert list(config.trainer.logger) == ["console"]
    # The small-machine setting the section names is one verl accepts.
    small = "transfer_queue.backend.SimpleStorage.num_data_storage_units=1"
    assert small in section("### 2. Train")
    assert (
        checked_config([*train_command(workdir), small]).transfer_queue.backend.SimpleStorage[
            "num_data_storage_units"
        ]
        == 1
    )
    import pyarrow.parquet as pq

    assert set(pq.read_table(config.data.train_files).column("agent_name").to_pylist()) == {
        "interactions"
    }
    out = play_rows(config, model_dir, tokenizer, config.data.train_files)
    played = trajectories(config, 6)
    assert [list(s) for s in out.non_tensor_batch["turn_scores"]] == [[0.0, 1.0]] * played
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [1.0] * played
    assert set(out.non_tensor_batch["interaction_name"]) == {"gsm8k"}


def test_the_options_reach_the_loop(workdir: Path, model_dir: Path, tokenizer: Any) -> None:
    run_data_commands(workdir)
    # INTERACTIONS_CONFIG through the runtime environment verl starts its workers with.
    (line,) = blocks("### 3. Options", "sh")
    config = checked_config([*train_command(workdir), *overrides(line, workdir)])
    env_vars = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert str(workdir / "interactions.yaml") == env_vars.INTERACTIONS_CONFIG
    # the two files, named by their first line
    for text in blocks("### 3. Options", "yaml"):
        name = text.splitlines()[0].lstrip("# ").strip()
        (workdir / name).write_text(text)
    interactions = str(Path(sys.executable).with_name("interactions"))
    check = subprocess.run([interactions, "check", "interactions.yaml"], capture_output=True)
    assert check.returncode == 0, check.stderr
    documented = "actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/agent_loops.yaml"
    assert documented in section("### 3. Options")
    config = checked_config([*train_command(workdir), *overrides(documented, workdir)])
    out = play_rows(config, model_dir, tokenizer, config.data.val_files)
    played = trajectories(config, 6)
    assert [list(s) for s in out.non_tensor_batch["turn_scores"]] == [[0.0, 1.0]] * played
    assert set(out.non_tensor_batch["interaction_name"]) == {"gsm8k"}
