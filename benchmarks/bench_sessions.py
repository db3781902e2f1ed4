"""Sessions at scale: memory per open session, and many concurrent episodes.

* **memory**: 100,000 sessions opened (``start_interaction`` with a ground
  truth) and left open, on the bundled ``Gsm8kInteraction`` and on the minimal
  verl-style class, each measured with ``tracemalloc`` as the bytes allocated
  and still held after opening them, divided by the number of sessions. The ids
  and ground truths are built before measuring, so only what the interaction
  itself holds is counted (its own mapping included). Goal: at most 0.75x.
* **concurrent replay episodes** (when the runtime has landed): 100,000
  episodes run concurrently through the runtime against a bare
  ``asyncio.gather`` of the same direct calls. Goal: at least 0.9x the
  episodes per second.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from typing import Any

from _common import Row, alternate_calls
from _verl_style import VerlStyleGsm8k

SESSIONS = 100_000
GOAL = 0.75
EPISODES_GOAL = 0.9
REPRODUCE = "python benchmarks/run.py --only sessions"


async def _open_all(interaction: Any, ids: list[str], truths: list[str]) -> None:
    start = interaction.start_interaction
    for iid, truth in zip(ids, truths, strict=True):
        await start(iid, ground_truth=truth)


def bytes_per_session(factory: Any, n: int) -> float:
    ids = [f"session-{i:08d}" for i in range(n)]
    truths = [str(i % 1000) for i in range(n)]
    interaction = factory({"name": "gsm8k"})
    loop = asyncio.new_event_loop()
    try:
        # Open and close one session first so lazily created internals are not counted.
        loop.run_until_complete(_open_all(interaction, ["warm"], ["1"]))
        loop.run_until_complete(interaction.finalize_interaction("warm"))
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        loop.run_until_complete(_open_all(interaction, ids, truths))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    finally:
        loop.close()
    return (after - before) / n


def episodes_row(repeats: int, n: int = SESSIONS) -> Row:
    """``n`` replay episodes at once: the runtime against ``asyncio.gather``."""
    title = "Concurrency: 100,000 replay episodes, runtime / bare `asyncio.gather`"
    try:
        from interactions_core.runtime import ReplayPolicy, run_episodes
    except ImportError:
        return Row.skipped(
            title,
            f">= {EPISODES_GOAL:.2f}x",
            "not measured: the runtime has not landed",
            REPRODUCE,
        )
    from _episodes import SAMPLE, direct_episode
    from interactions_gsm8k import Gsm8kInteraction

    samples = [SAMPLE] * n
    ids = [f"episode-{i:08d}" for i in range(n)]

    async def runtime() -> float:
        interactions = {"gsm8k": Gsm8kInteraction({"name": "gsm8k"})}
        t0 = time.perf_counter()
        summary = await run_episodes(
            samples, ReplayPolicy(), interactions, concurrency=n, observe=False
        )
        elapsed = time.perf_counter() - t0
        assert summary.episodes == n and not summary.errors, summary.as_dict()
        return elapsed

    async def bare() -> float:
        interaction = Gsm8kInteraction({"name": "gsm8k"})
        t0 = time.perf_counter()
        finals = await asyncio.gather(
            *(direct_episode(interaction, s, i) for s, i in zip(samples, ids, strict=True))
        )
        elapsed = time.perf_counter() - t0
        assert len(finals) == n and finals[0] == 1.0
        return elapsed

    # Throughput is the inverse of time: runtime eps/s over bare eps/s = bare / runtime.
    timed = alternate_calls(
        lambda: asyncio.run(bare()), lambda: asyncio.run(runtime()), repeats=repeats, warmup=0
    )
    return Row.at_least(
        title,
        EPISODES_GOAL,
        timed.ratio,
        f"{n / timed.b:,.0f} / {n / timed.a:,.0f} episodes per second",
        REPRODUCE,
    )


def run(repeats: int) -> list[Row]:
    from interactions_gsm8k import Gsm8kInteraction

    n = SESSIONS
    # tracemalloc counts allocations exactly: the figure does not depend on load,
    # so one measurement each is enough (repeated once to confirm it is stable).
    ours = min(bytes_per_session(Gsm8kInteraction, n) for _ in range(2))
    verl = min(bytes_per_session(VerlStyleGsm8k, n) for _ in range(2))
    rows = [
        Row.at_most(
            "Memory: bytes per open session, `Gsm8kInteraction` / verl-style",
            GOAL,
            ours / verl,
            f"{ours:.0f} B / {verl:.0f} B per session ({n:,} open)",
            REPRODUCE,
        )
    ]
    rows.append(episodes_row(max(2, repeats // 10)))
    return rows
