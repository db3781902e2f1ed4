"""What only verl's default v1 worker (``AgentLoopWorkerTQ``, ``trainer.use_v1=true``) does.

Every test of ``test_agent_loop.py`` already runs on this worker too; these cover
what the legacy worker has no counterpart for: the v1 worker returns nothing and
writes each trajectory into TransferQueue under ``{uid}_{session}_{index}`` with a
tag the replay buffer reads, marks each prompt ``finished`` or ``failure``, and
plays ``rollout.n`` sessions of a prompt itself (the legacy trainer repeats rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness
import pytest
from harness import (
    TWO,
    ScriptedServer,
    column,
    make_worker,
    row,
    run_batch,
    trainer_config,
    write_setup,
)

from interactions_core.integrations.verl import interactions_for


@pytest.fixture(autouse=True)
def only_tq(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "WORKER_KIND", "tq")


def test_trajectories_are_stored_with_the_tags_the_replay_buffer_reads(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, "default: gsm8k\ninteraction:\n  - name: gsm8k\n")
    replies = ["#### 71", "#### 72"]
    server = ScriptedServer(tokenizer, lambda prompt, n: replies[n])
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=3), server)
    assert type(worker).__name__ == "AgentLoopWorkerTQ"
    out = run_batch(worker, [row("What is 18 + 54?", ground_truth="72")])

    assert out.prompt_status == ["finished"]
    assert not worker.background_tasks  # nothing of the rollout is left running
    [tag] = out.tags
    assert tag["status"] == "success" and tag["global_steps"] == 1
    # The stored sequence is the last request's prompt plus the last reply.
    first, last = server.requests[0], server.requests[-1]
    assert tag["prompt_len"] == len(first["prompt_ids"])
    assert tag["prompt_len"] + tag["response_len"] == len(last["prompt_ids"]) + len(
        server.replies[-1]
    )
    assert list(out.non_tensor_batch["turn_scores"][0]) == [0.0, 1.0]
    assert column(out, "interaction_end_reason") == ["terminated"]
    assert out.batch["rm_scores"][0].sum().item() == 1.0


def test_each_of_rollout_n_sessions_plays_its_own_routed_episode(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, TWO)
    # "A: 72" is right for the flexible extractor and wrong for the strict one.
    server = ScriptedServer(tokenizer, lambda prompt, n: "so A: 72")
    config = trainer_config(model_dir, loops, max_assistant_turns=1)
    config.actor_rollout_ref.rollout.n = 2
    worker = make_worker(config, server)
    out = run_batch(
        worker,
        [
            row("q1", name="strict", ground_truth="72"),
            row("q2", name="flexible", ground_truth="72"),
        ],
    )
    assert out.prompt_status == ["finished", "finished"]
    # Two sessions per prompt, in prompt order: each its own request and its own episode.
    assert column(out, "interaction_name") == ["strict", "strict", "flexible", "flexible"]
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [0.0, 0.0, 1.0, 1.0]
    assert len(server.calls) == 4 and set(server.calls.values()) == {1}
    for name in ("strict", "flexible"):
        assert interactions_for(tmp_path / "interactions.yaml").get(name)[1].open_sessions == 0


def test_a_misconfigured_prompt_fails_alone_and_its_siblings_are_stored(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, TWO)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 1")
    worker = make_worker(trainer_config(model_dir, loops, max_assistant_turns=1), server)
    out = run_batch(
        worker,
        [row("q-bad", name="flexibel", ground_truth="1"), row("q-ok", ground_truth="1")],
        raise_failures=False,
    )
    # verl marks the prompt failed and logs why; the other prompt is unaffected.
    assert out.prompt_status == ["failure", "finished"]
    [error] = out.errors
    assert isinstance(error, ValueError) and "did you mean 'flexible'" in str(error)
    assert column(out, "interaction_name") == ["strict"]
    assert len(server.requests) == 1
    assert "q-ok" in tokenizer.decode(server.requests[0]["prompt_ids"])
