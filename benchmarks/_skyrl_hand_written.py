"""The benchmark's baseline: a GSM8K environment written by hand on skyrl-gym's ``BaseTextEnv``.

Written the way skyrl-gym's own multi-turn GSM8K environment is: the ground truth
from the row (``reward_spec``, or the ``interaction_kwargs`` of a row written by
``interactions data``), the turn limit from ``extras["max_turns"]``, and per step
the same check the ``gsm8k`` interaction makes (the plugin's scoring functions),
the same feedback, a per-turn reward, and ``done`` when right or out of turns.
It keeps no session, has nothing to finalize and survives no plugin fault: it is
the least an environment can do for the same episode.
"""

from __future__ import annotations

from typing import Any

from interactions_gsm8k.scoring import extract_answer, normalize_ground_truth
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

CORRECT = "Your response is correct!"
INCORRECT = "Your response is incorrect! You need to reflect on your answer and try again."


class HandWrittenGsm8kEnv(BaseTextEnv):  # type: ignore[misc]
    """GSM8K with feedback and turn-level rewards, no framework in between."""

    def __init__(self, env_config: Any = None, extras: Any = None) -> None:
        super().__init__()
        extras = extras or {}
        truth = (extras.get("reward_spec") or {}).get("ground_truth")
        if truth is None:
            truth = extras["extra_info"]["interaction_kwargs"]["ground_truth"]
        self.ground_truth = normalize_ground_truth(truth)
        self.max_turns = int(extras.get("max_turns", 5))

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        correct = extract_answer(action) == self.ground_truth
        reward = 1.0 if correct else 0.0
        done = correct or self.turns >= self.max_turns
        observations = [] if done else [{"role": "user", "content": INCORRECT}]
        return {"observations": observations, "reward": reward, "done": done, "metadata": {}}
