"""Environments driven the way SkyRL's generator drives them, for the tests and the benchmark.

SkyRL's ``SkyRLGymGenerator`` plays every trajectory of a batch as a task on one
asyncio loop: it builds the environment with ``skyrl_gym.make(env_class,
env_config=..., extras=row)`` (the row without ``prompt`` and ``env_class``, plus
``max_turns`` from ``generator.max_turns``), and calls ``init``, each ``step`` and
``close`` through ``loop.run_in_executor`` on a thread pool of
``skyrl_gym.max_env_workers`` threads (32 by default). The model's answers here
come from a script instead of an inference engine.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import skyrl_gym
from omegaconf import DictConfig

#: SkyRL's default ``skyrl_gym.max_env_workers``.
MAX_ENV_WORKERS = 32


@dataclass
class Trajectory:
    """What the generator keeps of one trajectory."""

    rewards: list[float] = field(default_factory=list)
    observations: list[list[dict[str, Any]]] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    env: Any = None


def env_extras(row: dict[str, Any], max_turns: int) -> dict[str, Any]:
    """The ``extras`` SkyRL passes for a dataset row."""
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns
    return extras


async def trajectory(
    executor: ThreadPoolExecutor,
    env_class: str,
    row: dict[str, Any],
    answers: Sequence[str],
    max_turns: int = 5,
    env_config: dict[str, Any] | None = None,
) -> Trajectory:
    """One trajectory: ``answers`` are the model's turns, in order, until ``done``."""
    loop = asyncio.get_running_loop()
    env = skyrl_gym.make(
        env_class, env_config=DictConfig(env_config or {}), extras=env_extras(row, max_turns)
    )
    out = Trajectory(env=env)
    await loop.run_in_executor(executor, env.init, copy.deepcopy(row["prompt"]))
    for answer in answers:
        step = await loop.run_in_executor(executor, env.step, answer)
        out.rewards.append(step["reward"])
        out.observations.append(step["observations"])
        out.metadata.append(step["metadata"])
        if step["done"]:
            out.done = True
            break
    out.metrics = env.get_metrics()
    await loop.run_in_executor(executor, env.close)
    return out


def play(
    jobs: Sequence[tuple[str, dict[str, Any], Sequence[str]]],
    max_turns: int = 5,
    env_config: dict[str, Any] | None = None,
    workers: int = MAX_ENV_WORKERS,
) -> list[Trajectory]:
    """All ``(env_class, row, answers)`` jobs at once, as one generator batch."""

    async def batch() -> list[Trajectory]:
        with ThreadPoolExecutor(workers, thread_name_prefix="skyrl-gym-env-") as executor:
            return await asyncio.gather(
                *(trajectory(executor, c, r, a, max_turns, env_config) for c, r, a in jobs)
            )

    return asyncio.run(batch())
