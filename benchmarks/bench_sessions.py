"""Sessions at scale: memory per open session, and episodes that wait concurrently.

* **memory**: 100,000 sessions opened (``start_interaction`` with a ground
  truth) and left open, on the bundled ``Gsm8kInteraction`` (written with the
  documented ``SessionInteraction`` API) and on the minimal verl-style class,
  each measured with ``tracemalloc`` as the bytes allocated and still held
  after opening them, divided by the number of sessions. The ids and ground
  truths are built before measuring, so only what the interaction itself holds
  is counted (its own mapping included). Goal: at most 0.6x.
* **concurrent waits**: 20,000 GSM8K episodes whose model takes 10 ms per
  reply (an ``asyncio.sleep``: the episode really waits), at most 2,000 at
  once, played by the runtime (``run_episodes``, ``concurrency=2000``) and by
  2,000 bare worker tasks calling the interaction directly with the same
  waits. Both sides are allowed the same number of waits in flight, and the
  peak each reached is counted and shown: the row fails unless both reach it.
  The ratio of wall times is then what the runtime costs while it keeps that
  many episodes waiting. The detail also shows the time the same episodes
  would take one at a time, which is what concurrency saves. Goal: at most
  1.10x.
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
GOAL = 0.6
WAIT_EPISODES = 20_000
WAIT_CONCURRENCY = 2_000
WAIT_SECONDS = 0.010
WAIT_GOAL = 1.10
REPRODUCE = "python benchmarks/run.py --only sessions"
MEMORY = "Memory: bytes per open session, documented-style `Gsm8kInteraction` / verl-style"
WAITS = (
    f"Concurrent waits: {WAIT_EPISODES:,} episodes, 2 x {WAIT_SECONDS * 1e3:.0f} ms model "
    f"latency, {WAIT_CONCURRENCY:,} at once: runtime / bare worker tasks"
)
#: The rows this module reports, in order (the docs' table is checked against them).
ROWS = (MEMORY, WAITS)


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


class ModelLatency:
    """The model's reply time: a real wait, with a count of waits in flight at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.in_flight = 0
        self.peak = 0

    async def pause(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.in_flight -= 1


def waiting_row(repeats: int) -> Row:
    """Episodes that wait for their model: the runtime against bare worker tasks."""
    from _episodes import SAMPLE, direct_episode
    from interactions_gsm8k import Gsm8kInteraction

    from interactions_core.runtime import ReplayPolicy, run_episodes

    n, width, delay = WAIT_EPISODES, WAIT_CONCURRENCY, WAIT_SECONDS
    turns = len(SAMPLE["responses"])

    peaks: dict[str, set[int]] = {"runtime": set(), "bare": set()}

    class SlowReplay(ReplayPolicy):
        """The recorded replies, each after the model's latency."""

        def __init__(self, latency: ModelLatency) -> None:
            super().__init__()
            self.latency = latency

        async def reply(self, state: Any, messages: list[dict[str, Any]]) -> Any:
            await self.latency.pause()
            return next(state, None)

    async def runtime() -> float:
        interactions = {"gsm8k": Gsm8kInteraction({"name": "gsm8k"})}
        latency = ModelLatency(delay)
        t0 = time.perf_counter()
        summary = await run_episodes(
            [SAMPLE] * n, SlowReplay(latency), interactions, concurrency=width, observe=False
        )
        elapsed = time.perf_counter() - t0
        assert summary.episodes == n and not summary.errors, summary.as_dict()
        peaks["runtime"].add(latency.peak)
        return elapsed

    async def bare() -> float:
        interaction = Gsm8kInteraction({"name": "gsm8k"})
        latency = ModelLatency(delay)
        work = iter(range(n))
        finals: list[float] = []

        async def worker() -> None:
            for i in work:  # shared iterator: at most ``width`` episodes in flight
                final = await direct_episode(interaction, SAMPLE, f"e-{i}", pause=latency.pause)
                finals.append(final)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(width)))
        elapsed = time.perf_counter() - t0
        assert len(finals) == n and finals[0] == 1.0
        peaks["bare"].add(latency.peak)
        return elapsed

    timed = alternate_calls(
        lambda: asyncio.run(runtime()), lambda: asyncio.run(bare()), repeats=repeats, warmup=1
    )
    serial = n * turns * delay
    assert turns == 2, "the row's title says two replies per episode"
    # The waits really overlap (on both sides), or this would measure something else.
    assert max(timed.a, timed.b) < serial / 10, (timed, serial)
    detail = (
        f"{timed.describe('runtime', 'bare')}; peak waits in flight: runtime "
        f"{max(peaks['runtime']):,}, bare {max(peaks['bare']):,} (of {width:,} allowed); "
        f"one at a time: {serial:,.0f} s"
    )
    row = Row.at_most(WAITS, WAIT_GOAL, timed.ratio, detail, REPRODUCE)
    if peaks != {"runtime": {width}, "bare": {width}}:
        # Fewer waits in flight than asked for is a failure whatever the time ratio.
        row.passed = False
        row.detail += "; FAIL: the runtime did not keep the requested episodes waiting at once"
    return row


def run(repeats: int) -> list[Row]:
    from interactions_gsm8k import Gsm8kInteraction

    n = SESSIONS
    # tracemalloc counts allocations exactly: the figure does not depend on load,
    # so one measurement each is enough (repeated once to confirm it is stable).
    ours = min(bytes_per_session(Gsm8kInteraction, n) for _ in range(2))
    verl = min(bytes_per_session(VerlStyleGsm8k, n) for _ in range(2))
    rows = [
        Row.at_most(
            MEMORY,
            GOAL,
            ours / verl,
            f"{ours:.0f} B / {verl:.0f} B per session ({n:,} open; tracemalloc, exact)",
            REPRODUCE,
        )
    ]
    rows.append(waiting_row(max(3, repeats // 8)))
    return rows
