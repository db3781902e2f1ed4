"""``turn_rewards: true``: each judged turn's score reaches verl's advantage estimators.

The batches come from verl's own workers: the legacy ``AgentLoopWorker`` (as the
project's :class:`TurnRewardAgentLoopWorker`, built in this process like the
harness builds verl's) and the v1 ``AgentLoopWorkerTQ``, whose per-prompt path
runs here with TransferQueue's two writes captured. verl's ``core_algos`` then
computes the advantages from ``rm_scores``, which both trainers use as
``token_level_scores`` (and, without a KL penalty in the reward, as
``token_level_rewards``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from harness import ScriptedServer, make_worker, run_batch, spans, trainer_config
from hydra.errors import InstantiationException

from interactions_core import InteractionResult, SessionInteraction
from interactions_core.errors import ConfigError
from interactions_core.integrations.verl import (
    TOKEN_REWARDS,
    TurnRewardAgentLoopManager,
    TurnRewardAgentLoopWorker,
    token_rewards,
)

# Each question names its plan: the model's replies, one per turn. A reply says
# the score the judge gives it; "done" ends the episode.
PLANS = {
    "plan-a": ["try 0.25", "try 0.5", "done 0.75"],
    "plan-b": ["try 0.0", "done 1.0"],
    "plan-c": ["done 0.5"],
    "plan-x": ["try 0.25", "boom 0.5"],
}
FINAL = {"plan-a": 0.9, "plan-b": 0.4, "plan-c": 0.5, "plan-x": 0.7}


class ScoredTurns(SessionInteraction):
    """Scores each turn with the number it ends with; ``final`` is ``calculate_score``."""

    def new_session(self, **kwargs: Any) -> Any:
        return float(kwargs["final"])

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        text = str(messages[-1].get("content") or "")
        if "boom" in text:
            raise RuntimeError("the judge crashed on this answer")
        found = re.findall(r"[0-9]+\.[0-9]+", text)
        score = float(found[-1]) if found else -1.0
        return InteractionResult("done" in text, "go on", score)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return float(state)


def write_setup(tmp_path: Path, *, turn_rewards: bool | None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "interactions.yaml"
    config.write_text(
        "interaction:\n  - name: scored\n    class_name: test_turn_rewards.ScoredTurns\n"
    )
    loops = tmp_path / "agent_loops.yaml"
    text = (
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
    )
    if turn_rewards is not None:
        text += f"  turn_rewards: {'true' if turn_rewards else 'false'}\n"
    loops.write_text(text)
    return loops


def script(prompt: str, number: int) -> str:
    found = [plan for plan in PLANS if plan in prompt]
    assert len(found) == 1, "the prompt names one plan"
    return PLANS[found[0]][number]


def row(plan: str) -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": f"Follow {plan}."}],
        "extra_info": {"interaction_kwargs": {"name": "scored", "final": FINAL[plan]}},
    }


def make_turn_worker(config: Any, server: ScriptedServer) -> Any:
    """The project's legacy worker, built in this process as the harness builds verl's."""
    return TurnRewardAgentLoopWorker(config, llm_client=server)


def turn_ends(mask: list[int]) -> list[int]:
    """The index of each assistant turn's last model token."""
    return [end - 1 for _, end in spans(mask, 1)]


def legacy_batch(tmp_path: Path, model_dir: Path, tokenizer: Any, plans: list[str], **kw: Any):  # type: ignore[no-untyped-def]
    loops = write_setup(tmp_path, **kw)
    config = trainer_config(model_dir, loops, max_assistant_turns=5)
    worker = make_turn_worker(config, ScriptedServer(tokenizer, script))
    return run_batch(worker, [row(plan) for plan in plans])


def expected_turn_rewards(plan: str) -> list[float]:
    """Each turn's score, the last replaced by ``calculate_score``."""
    scores = [float(reply.split()[-1]) for reply in PLANS[plan]]
    return [*scores[:-1], FINAL[plan]]


# -- where the scores land -----------------------------------------------------------


def test_legacy_worker_puts_each_turn_score_on_its_last_token(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    plans = ["plan-a", "plan-b", "plan-c"]
    out = legacy_batch(tmp_path, model_dir, tokenizer, plans, turn_rewards=True)
    scores = out.batch["rm_scores"]
    for i, plan in enumerate(plans):
        mask = out.batch["response_mask"][i].tolist()
        ends = turn_ends(mask)
        assert len(ends) == len(PLANS[plan])
        expected = torch.zeros_like(scores[i])
        expected[ends] = torch.tensor(expected_turn_rewards(plan))
        assert torch.allclose(scores[i], expected)
        # The judged turns in order; the pairs that landed are in extra_fields.
        assert list(out.non_tensor_batch["turn_scores"][i]) == [
            float(reply.split()[-1]) for reply in PLANS[plan]
        ]
        pairs = out.non_tensor_batch[TOKEN_REWARDS][i]
        assert [p for p, _ in pairs] == ends
        # Every reward sits on a model token (GAE skips mask-0 tokens).
        assert all(mask[p] == 1 for p, _ in pairs)


def test_a_failed_episode_trains_on_zeros_beside_its_neighbours(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    out = legacy_batch(tmp_path, model_dir, tokenizer, ["plan-x", "plan-b"], turn_rewards=True)
    scores = out.batch["rm_scores"]
    assert not scores[0].any()
    assert "crashed" in out.non_tensor_batch["interaction_error"][0]
    assert list(out.non_tensor_batch[TOKEN_REWARDS][0]) == []
    # The judged turn before the failure is still reported, not trained on.
    assert list(out.non_tensor_batch["turn_scores"][0]) == [0.25]
    # The other sample of the batch is placed as usual.
    expected = torch.zeros_like(scores[1])
    expected[turn_ends(out.batch["response_mask"][1].tolist())] = torch.tensor(
        expected_turn_rewards("plan-b")
    )
    assert torch.allclose(scores[1], expected)


def test_a_worker_batch_without_turn_rewards_still_has_the_column(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    """verl concatenates its workers' batches key by key: every batch needs the key."""
    loops = write_setup(tmp_path, turn_rewards=True)
    config = trainer_config(model_dir, loops, max_assistant_turns=5)
    worker = make_turn_worker(config, ScriptedServer(tokenizer, script))
    out = run_batch(worker, [row("plan-c"), row("plan-b")], agent_name="single_turn_agent")
    assert list(out.non_tensor_batch[TOKEN_REWARDS]) == [None, None]


def test_default_mode_is_verls_final_score_at_the_last_token(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    for turn_rewards in (None, False):
        folder = tmp_path / str(turn_rewards)
        loops = write_setup(folder, turn_rewards=turn_rewards)
        config = trainer_config(model_dir, loops, max_assistant_turns=5)
        # verl's own worker: default mode needs nothing of the project's.
        out = run_batch(make_worker(config, ScriptedServer(tokenizer, script)), [row("plan-a")])
        scores = out.batch["rm_scores"][0]
        last = int(out.batch["attention_mask"][0, out.batch["prompts"].size(1) :].sum()) - 1
        assert scores.nonzero().flatten().tolist() == [last]
        assert scores[last].item() == pytest.approx(FINAL["plan-a"])
        # The model's own last token: GAE, which skips mask-0 tokens, sees the score.
        assert out.batch["response_mask"][0, last].item() == 1
        assert last == turn_ends(out.batch["response_mask"][0].tolist())[-1]
        assert TOKEN_REWARDS not in out.non_tensor_batch


def test_verls_plain_legacy_worker_refuses_turn_rewards(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    loops = write_setup(tmp_path, turn_rewards=True)
    config = trainer_config(model_dir, loops, max_assistant_turns=5)
    worker = make_worker(config, ScriptedServer(tokenizer, script))
    with pytest.raises(ConfigError, match="agent_loop_manager_class"):
        run_batch(worker, [row("plan-a")])


def test_turn_rewards_must_be_a_boolean(tmp_path: Path, model_dir: Path, tokenizer: Any) -> None:
    loops = write_setup(tmp_path, turn_rewards=None)
    loops.write_text(loops.read_text() + "  turn_rewards: 'no'\n")
    config = trainer_config(model_dir, loops, max_assistant_turns=5)
    worker = make_turn_worker(config, ScriptedServer(tokenizer, script))
    # hydra builds the loop and wraps what its constructor raises.
    with pytest.raises(InstantiationException, match="turn_rewards must be true or false"):
        run_batch(worker, [row("plan-a")])


# -- the documented settings ----------------------------------------------------------

PAGE = Path(__file__).resolve().parents[2] / "docs" / "rewards.md"


def documented_blocks() -> list[str]:
    """The fenced blocks of the page's verl turn-rewards section, unindented."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("### verl: turn rewards")
    section = text[start : text.index("\n### ", start + 1)]
    found = re.findall(r"^( *)```\w*\n(.*?)^\1```", section, re.S | re.M)
    return ["\n".join(line[len(indent) :] for line in body.splitlines()) for indent, body in found]


def test_the_documented_settings_run_through_verl(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    import yaml
    from hydra import compose, initialize_config_dir
    from verl.utils.import_utils import load_class_from_fqn

    entry_text, overrides_text = documented_blocks()
    # The agent-loop entry, with the test's interactions file in place of the example's.
    (entry,) = yaml.safe_load(entry_text)
    assert entry["turn_rewards"] is True
    setup = write_setup(tmp_path, turn_rewards=None)
    entry["interaction_config"] = yaml.safe_load(setup.read_text())[0]["interaction_config"]
    setup.write_text(yaml.safe_dump([entry]))
    # The overrides, composed into verl's own trainer config as its command line would.
    config_dir = str(Path(verl_root()) / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides_text.split())
    assert config.trainer.use_v1 is False
    fqn = config.actor_rollout_ref.rollout.agent.agent_loop_manager_class
    manager_class = load_class_from_fqn(fqn, "AgentLoopManager")  # as verl's trainer does
    assert manager_class is TurnRewardAgentLoopManager
    worker_class = manager_class(config, llm_client=None).agent_loop_workers_class
    # That manager's worker, run here, places the turns as the page says.
    worker = worker_class.__ray_actor_class__(
        trainer_config(model_dir, setup, max_assistant_turns=5),
        llm_client=ScriptedServer(tokenizer, script),
    )
    out = run_batch(worker, [row("plan-a")])
    expected = torch.zeros_like(out.batch["rm_scores"][0])
    expected[turn_ends(out.batch["response_mask"][0].tolist())] = torch.tensor(
        expected_turn_rewards("plan-a")
    )
    assert torch.allclose(out.batch["rm_scores"][0], expected)


def verl_root() -> str:
    import verl

    return str(Path(verl.__file__).parent)


# -- verl's advantage estimators on the worker's batch --------------------------------


def test_gae_gives_the_turns_different_advantages(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return

    turn = legacy_batch(tmp_path / "turn", model_dir, tokenizer, ["plan-a"], turn_rewards=True)
    final = legacy_batch(tmp_path / "final", model_dir, tokenizer, ["plan-a"], turn_rewards=None)
    results = {}
    for name, out in (("turn", turn), ("final", final)):
        rewards = out.batch["rm_scores"]  # token_level_scores == token_level_rewards
        mask = out.batch["response_mask"]
        values = torch.zeros_like(rewards)
        advantages, returns = compute_gae_advantage_return(
            rewards, values, mask, gamma=torch.tensor(1.0), lam=torch.tensor(1.0)
        )
        turns = spans(mask[0].tolist(), 1)
        results[name] = (
            [advantages[0, start:end] for start, end in turns],
            [returns[0, start:end] for start, end in turns],
        )
    advantages, returns = results["turn"]
    # gamma = lam = 1 and zero values: each token's return is the rewards still to come.
    to_come = np.cumsum(expected_turn_rewards("plan-a")[::-1])[::-1].tolist()
    for span_returns, expected in zip(returns, to_come, strict=True):
        assert torch.allclose(span_returns, torch.full_like(span_returns, expected))
    means = [float(a.mean()) for a in advantages]
    assert len(set(round(m, 6) for m in means)) == len(means), means
    assert means == sorted(means, reverse=True)
    # Default mode: one score at the end, the same return on every turn's tokens.
    _, default_returns = results["final"]
    flat = torch.cat(default_returns)
    assert torch.allclose(flat, torch.full_like(flat, FINAL["plan-a"]))


def test_grpo_sums_the_turn_rewards_of_each_response(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    plans = ["plan-a", "plan-b", "plan-c"]
    out = legacy_batch(tmp_path, model_dir, tokenizer, plans, turn_rewards=True)
    rewards = out.batch["rm_scores"]
    mask = out.batch["response_mask"]
    group = np.array(["same-prompt"] * len(plans), dtype=object)
    advantages, _ = compute_grpo_outcome_advantage(rewards, mask, group)
    sums = torch.tensor([sum(expected_turn_rewards(plan)) for plan in plans])
    expected = (sums - sums.mean()) / (sums.std() + 1e-6)
    for i in range(len(plans)):
        on = mask[i].bool()
        assert torch.allclose(advantages[i][on], torch.full_like(advantages[i][on], expected[i]))
    # The same sum is the scalar reward_score (what verl would place with no spreading).
    for i, plan in enumerate(plans):
        assert rewards[i].sum().item() == pytest.approx(sum(expected_turn_rewards(plan)))


# -- verl's v1 path (AgentLoopWorkerTQ) ------------------------------------------------


class CapturedQueue:
    """TransferQueue's two writes as the v1 worker makes them, kept in memory."""

    def __init__(self) -> None:
        self.fields: list[Any] = []
        self.keys: list[str] = []
        self.status: list[dict[str, Any]] = []

    async def async_kv_put(self, *, key: str, partition_id: str, tag: dict[str, Any]) -> None:
        self.status.append(dict(tag))

    async def async_kv_batch_put(
        self, *, keys: list[str], fields: Any, tags: Any, **_: Any
    ) -> None:
        self.keys.extend(keys)
        self.fields.append(fields)


def tq_worker(config: Any, server: ScriptedServer) -> Any:
    """verl's ``AgentLoopWorkerTQ`` code in this process, TransferQueue left uninitialized."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    class InProcessTQ(AgentLoopWorkerTQ.__ray_actor_class__):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            AgentLoopWorker.__init__(self, config, llm_client=server)
            self.background_tasks = set()

    return InProcessTQ()


def run_v1(tmp_path: Path, model_dir: Path, tokenizer: Any, plan: str, **kw: Any) -> Any:
    """One prompt through the v1 worker; verl's padded ``rm_scores`` and ``response_mask``."""
    from verl.trainer.ppo.v1 import agent_loop_tq

    loops = write_setup(tmp_path, **kw)
    config = trainer_config(model_dir, loops, max_assistant_turns=5)
    config.actor_rollout_ref.rollout.n = 1
    worker = tq_worker(config, ScriptedServer(tokenizer, script))
    queue = CapturedQueue()
    prompt = {
        "uid": "uid-0",
        "index": 0,
        "global_steps": 1,
        "agent_name": "interactions",
        "raw_prompt": row(plan)["prompt"],
        "extra_info": row(plan)["extra_info"],
    }
    trajectory = {"step": 1, "sample_index": 0, "rollout_n": 0, "validate": False}
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": False}
    saved = agent_loop_tq.tq
    agent_loop_tq.tq = queue  # the module's TransferQueue client, for this call only
    try:
        asyncio.run(worker._run_prompt(prompt, params, trajectory=trajectory))
    finally:
        agent_loop_tq.tq = saved
    assert queue.status[-1] == {"status": "finished"}, queue.status
    assert queue.keys == ["uid-0_0_0"]
    stored = queue.fields[0]
    # As the v1 trainer's _compute_advantage reads them: padded, rm_scores as scores.
    return padded(stored["rm_scores"]), padded(stored["response_mask"])


def padded(values: torch.Tensor) -> torch.Tensor:
    """A stored field as rows (verl stacks equal lengths, nests ragged ones)."""
    return values.to_padded_tensor(0) if values.is_nested else values


def test_v1_worker_stores_each_turn_score_on_its_last_token(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return

    scores, mask = run_v1(tmp_path, model_dir, tokenizer, "plan-a", turn_rewards=True)
    ends = turn_ends(mask[0].tolist())
    expected = torch.zeros_like(scores[0])
    expected[ends] = torch.tensor(expected_turn_rewards("plan-a"))
    assert torch.allclose(scores[0], expected)
    _, returns = compute_gae_advantage_return(
        scores, torch.zeros_like(scores), mask, gamma=torch.tensor(1.0), lam=torch.tensor(1.0)
    )
    firsts = [returns[0, start].item() for start, _ in spans(mask[0].tolist(), 1)]
    assert firsts == pytest.approx(np.cumsum(expected_turn_rewards("plan-a")[::-1])[::-1].tolist())


def test_v1_worker_default_mode_is_the_final_score_at_the_last_token(
    tmp_path: Path, model_dir: Path, tokenizer: Any
) -> None:
    scores, _ = run_v1(tmp_path, model_dir, tokenizer, "plan-a", turn_rewards=None)
    assert scores[0].nonzero().flatten().tolist() == [scores.size(1) - 1]
    assert scores[0, -1].item() == pytest.approx(FINAL["plan-a"])


# -- the placement rule itself ---------------------------------------------------------


def test_the_final_score_replaces_the_last_judged_turn() -> None:
    mask = [1, 1, 0, 0, 1, 1, 0, 1, 1]
    assert token_rewards([1, 5, 8], [0.1, 0.2, 0.3], 0.9, mask) == [[1, 0.1], [5, 0.2], [8, 0.9]]


def test_a_response_ending_unjudged_gets_the_final_score_on_its_last_model_token() -> None:
    # The last turn was a tool call (then a tool response of mask 0): not judged.
    mask = [1, 1, 0, 1, 1, 0, 0]
    assert token_rewards([1], [0.25], 0.5, mask) == [[1, 0.25], [4, 0.5]]


def test_positions_past_the_budget_move_to_the_last_model_token_kept() -> None:
    mask = [1, 1, 0, 1]  # verl cut the response after 4 tokens
    assert token_rewards([1, 9], [0.25, 0.75], 0.5, mask) == [[1, 0.25], [3, 0.5]]
    assert token_rewards([], [], 0.5, []) == []
