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
import tracemalloc
from typing import Any

from _common import Row
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
    rows.append(
        Row.skipped(
            "Concurrency: 100,000 replay episodes, runtime / bare `asyncio.gather`",
            f">= {EPISODES_GOAL:.2f}x",
            "not measured: the runtime has not landed",
            REPRODUCE,
        )
    )
    return rows
