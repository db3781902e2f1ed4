"""A SkyRL step through ``interactions/gsm8k`` vs a hand-written ``BaseTextEnv`` (``nox -s skyrl``).

Both sides play the same GSM8K episodes (rows of the shared test split, written by
the gsm8k plugin's dataset builder; the model answers wrong, then right: two steps
per episode) in skyrl-gym's released code:

* ``interactions`` -- ``interactions/gsm8k``, registered by
  :func:`interactions_core.integrations.skyrl.register_interactions` as the docs
  teach;
* ``hand-written`` -- ``_skyrl_hand_written.HandWrittenGsm8kEnv``, the same check,
  feedback and rewards written directly on ``BaseTextEnv``.

The goal's figure is the step as SkyRL's generator takes it: a batch of episodes at
once, each environment built with ``skyrl_gym.make`` and its ``init``, steps and
``close`` called through ``run_in_executor`` on 32 threads (SkyRL's default
``max_env_workers``). Batches of each side alternate; the ratio of the median batch
times is the goal's (<= 1.3x). Two more rows are for information: the step called
directly in one thread (no executor: the bare cost of the adapter), and the same
generator batch for an interaction that awaits (``async def respond``), which is
played on the shared loop.

    python benchmarks/bench_skyrl.py [--batch 64] [--repeats 31] [--quick] [--no-docs]

The table goes to stdout and ``benchmarks/results/skyrl.md``; a full run also
rewrites the generated block of ``docs/trainers.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import ROOT, DocsBlock

HERE = Path(__file__).resolve().parent
BATCH, REPEATS = 64, 31
QUICK_BATCH, QUICK_REPEATS = 32, 9
GOAL = 1.3
MAX_ENV_WORKERS = 32
ROWS = (
    "SkyRL step, generator path",
    "SkyRL step, called directly",
    "SkyRL step, awaiting interaction",
)
HEADER = "| benchmark | goal | measured | detail |"
DOCS = DocsBlock(ROOT / "docs" / "trainers.md", "bench_skyrl.py", "bench_skyrl")
DATA = ROOT.parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def gsm8k_jobs(batch: int, interaction: str = "gsm8k") -> list[tuple[dict[str, Any], list[str]]]:
    """``batch`` rows of the shared GSM8K split, each with a wrong then a right answer."""
    if not DATA.is_file():
        raise SystemExit(f"error: {DATA} is missing; the benchmark reads the shared GSM8K data")
    from interactions_gsm8k.dataset import build_gsm8k

    jobs = []
    for row in build_gsm8k(input=str(DATA), max_rows=batch, interaction=interaction):
        truth = row["extra_info"]["interaction_kwargs"]["ground_truth"]
        wrong = f"Step by step: the total is {int(truth) + 1}.\n#### {int(truth) + 1}"
        right = f"Checking again, the total is {truth}.\n#### {truth}"
        jobs.append((row, [wrong, right]))
    return jobs


async def _trajectory(executor: Any, env_class: str, row: dict[str, Any], answers: list[str]):
    """One trajectory as SkyRL's generator plays it; returns its rewards."""
    import skyrl_gym
    from omegaconf import DictConfig

    loop = asyncio.get_running_loop()
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = 5
    env = skyrl_gym.make(env_class, env_config=DictConfig({}), extras=extras)
    await loop.run_in_executor(executor, env.init, copy.deepcopy(row["prompt"]))
    rewards = []
    for answer in answers:
        out = await loop.run_in_executor(executor, env.step, answer)
        rewards.append(out["reward"])
        if out["done"]:
            break
    env.get_metrics()
    await loop.run_in_executor(executor, env.close)
    return rewards


def generator_batch(env_class: str, jobs: list[tuple[dict[str, Any], list[str]]], executor: Any):
    """Seconds for one generator batch of ``jobs`` on ``env_class``."""

    async def batch() -> list[list[float]]:
        return await asyncio.gather(*(_trajectory(executor, env_class, r, a) for r, a in jobs))

    started = time.perf_counter()
    rewards = asyncio.run(batch())
    elapsed = time.perf_counter() - started
    assert rewards == [[0.0, 1.0]] * len(jobs), (env_class, rewards[:3])  # both did the work
    return elapsed


def direct_batch(env_class: str, jobs: list[tuple[dict[str, Any], list[str]]]) -> float:
    """Seconds for the same episodes' ``init``, steps and ``close``, called in this thread."""
    import skyrl_gym

    envs = []
    for row, _ in jobs:
        extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
        extras["max_turns"] = 5
        envs.append(skyrl_gym.make(env_class, env_config={}, extras=extras))
    started = time.perf_counter()
    for env, (row, answers) in zip(envs, jobs, strict=True):
        env.init(row["prompt"])
        for answer in answers:
            env.step(answer)
        env.close()
    return time.perf_counter() - started


def alternate(a: Any, b: Any, repeats: int) -> tuple[float, float]:
    """Medians of ``a()`` and ``b()`` timed alternately (after one warm-up each)."""
    a(), b()
    times_a, times_b = [], []
    for i in range(repeats):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        t1, t2 = first(), second()
        (times_a, times_b)[first is b].append(t1)
        (times_a, times_b)[second is b].append(t2)
    return statistics.median(times_a), statistics.median(times_b)


def _register() -> None:
    import skyrl_gym
    from interactions_gsm8k import Gsm8kInteraction

    from interactions_core.integrations.skyrl import register_interactions
    from interactions_core.registry import get_registry

    class AwaitingGsm8k(Gsm8kInteraction):
        """The gsm8k interaction with ``async def respond``: played on the shared loop."""

        async def respond(self, state: Any, messages: Any, **kwargs: Any) -> Any:
            return super().respond(state, messages, **kwargs)

    get_registry().add("gsm8k_awaiting", AwaitingGsm8k)
    register_interactions(["gsm8k", "gsm8k_awaiting"])
    skyrl_gym.register(
        id="hand-written-gsm8k", entry_point="_skyrl_hand_written:HandWrittenGsm8kEnv"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=BATCH, help="episodes per batch")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="batches per side")
    parser.add_argument("--quick", action="store_true", help="a smaller run (CI)")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/trainers.md alone")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.repeats = QUICK_BATCH, QUICK_REPEATS
    full = (args.batch, args.repeats) == (BATCH, REPEATS)
    write_docs = DOCS.wanted(full_run=full, no_docs=args.no_docs)
    sys.path.insert(0, str(HERE))
    _register()
    jobs = gsm8k_jobs(args.batch)
    awaiting_jobs = gsm8k_jobs(args.batch, "gsm8k_awaiting")
    steps = 2 * len(jobs)
    ours, base = "interactions/gsm8k", "hand-written-gsm8k"
    with ThreadPoolExecutor(MAX_ENV_WORKERS, thread_name_prefix="skyrl-gym-env-") as executor:
        gen = alternate(
            lambda: generator_batch(ours, jobs, executor),
            lambda: generator_batch(base, jobs, executor),
            args.repeats,
        )
        awaiting = alternate(
            lambda: generator_batch("interactions/gsm8k_awaiting", awaiting_jobs, executor),
            lambda: generator_batch(base, jobs, executor),
            args.repeats,
        )
    direct = alternate(
        lambda: direct_batch(ours, jobs), lambda: direct_batch(base, jobs), args.repeats
    )

    def row(title: str, goal: str, pair: tuple[float, float], how: str) -> str:
        a, b = pair
        return (
            f"| {title} | {goal} | {a / b:.2f}x | {how}: {a / steps * 1e6:.1f} us vs "
            f"{b / steps * 1e6:.1f} us per step (median batch of {len(jobs)} episodes x 2 "
            f"steps, {args.repeats} alternating batches) |"
        )

    verdict = "met" if gen[0] / gen[1] <= GOAL else "NOT met"
    lines = [
        f"SkyRL benchmark ({'full' if full else 'custom'} run), this machine: "
        f"{os.cpu_count()} cores; goal {verdict}",
        "",
        HEADER,
        "|---|---|---|---|",
        row(ROWS[0], f"<= {GOAL}x", gen, f"make, init, steps, close via {MAX_ENV_WORKERS} threads"),
        row(ROWS[1], "report", direct, "init, steps, close in one thread"),
        row(ROWS[2], "report", awaiting, "generator path, `async def respond`, shared loop"),
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "skyrl.md").write_text(table)
    if write_docs:
        DOCS.write(table)
        print(f"[bench] table written to {DOCS.where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
