"""Two GRPO steps on CPU through ``interactions_core.integrations.trl``, in-process and served.

A tiny random model (see ``tiny.py``) calls the ``answer`` tool with a right or
a wrong GSM8K answer; the gsm8k interaction judges it, and the reward TRL logs
must be the mean of what the interaction scored. No session may stay open.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset
from tiny import QUESTION, RIGHT, answer_bias, build_model, build_tokenizer
from trl import GRPOConfig, GRPOTrainer

from interactions_core.integrations.trl import environment_factory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from server_harness import start_server

CONFIG = {"interaction": [{"name": "gsm8k"}]}
ROWS = 4


def dataset() -> Dataset:
    row = {
        "prompt": [{"role": "user", "content": QUESTION}],
        "interaction_kwargs": {"name": "gsm8k", "ground_truth": RIGHT},
    }
    return Dataset.from_list([row] * ROWS)


def train(
    factory: type, tmp_path: Path, rows: Dataset | None = None
) -> tuple[list[dict[str, Any]], list[float]]:
    """Two GRPO steps; returns TRL's log history and the rewards the environment returned."""
    rewards: list[float] = []

    class Recorded(factory):  # type: ignore[misc, valid-type]
        def get_reward(self) -> float:
            value = super().get_reward()
            rewards.append(value)
            return value

    tokenizer = build_tokenizer()
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        max_completion_length=48,
        max_tool_calling_iterations=1,
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
        generation_kwargs={"sequence_bias": answer_bias(tokenizer)},
    )
    trainer = GRPOTrainer(
        model=build_model(tokenizer),
        args=args,
        processing_class=tokenizer,
        train_dataset=dataset() if rows is None else rows,
        environment_factory=Recorded,
    )
    trainer.train()
    history = [entry for entry in trainer.state.log_history if "loss" in entry]
    del trainer
    gc.collect()
    return history, rewards


def check(history: list[dict[str, Any]], rewards: list[float]) -> None:
    assert len(history) == 2  # two optimisation steps were logged
    # Every rollout called the tool and was judged by the gsm8k interaction.
    assert len(rewards) == 2 * 2 and set(rewards) <= {0.0, 1.0}
    logged = [entry["rewards/Recorded/mean"] for entry in history]
    assert logged == pytest.approx([sum(rewards[:2]) / 2, sum(rewards[2:]) / 2])
    assert [entry["reward"] for entry in history] == pytest.approx(logged)
    assert all(entry["tools/call_frequency"] > 0 for entry in history)


def test_grpo_in_process(tmp_path: Path) -> None:
    factory = environment_factory(CONFIG)
    history, rewards = train(factory, tmp_path)
    check(history, rewards)
    hub = factory._backend.hub
    assert hub.tracker.started >= 4
    assert hub.tracker.open == 0 and hub.open_sessions == 0


def test_grpo_against_interactions_serve(tmp_path: Path) -> None:
    server = start_server(tmp_path, "interaction:\n  - name: gsm8k\n")
    try:
        factory = environment_factory(url=server.url)
        history, rewards = train(factory, tmp_path)
        check(history, rewards)
        counts = server.wait_sessions(0)
        assert counts["started"] >= 4
        assert counts["open"] == 0 and counts["started"] == counts["finalized"]
    finally:
        assert server.stop() == 0, server.output()
