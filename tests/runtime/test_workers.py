"""``Workers``: tasks added only while episodes wait, doubling up to the concurrency."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from interactions_core.runtime.record import EpisodeRecord
from interactions_core.runtime.runner import Workers


def items(n: int) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    return ((i, 0, {"i": i}) for i in range(n))


class Counting:
    """An episode that waits ``delay`` seconds (or never, with ``None``), counted in flight."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.in_flight = self.peak = 0
        self.played: list[int] = []

    async def play(self, sample: Mapping[str, Any], index: int, repeat: int) -> EpisodeRecord:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.delay is not None:
                await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        self.played.append(index)
        return EpisodeRecord(index, index, repeat)


def workers(episode: Counting, done: list[EpisodeRecord], cap: int, **kw: Any) -> Workers:
    stopping = [False]
    return Workers(
        episode.play,
        done.append,
        concurrency=cap,
        stopping=lambda: stopping[0],
        stop=lambda: stopping.__setitem__(0, True),
        **kw,
    )


async def test_episodes_that_wait_reach_the_requested_concurrency() -> None:
    episode, done = Counting(0.01), []
    pool = workers(episode, done, 500)
    await pool.run(items(5000))
    assert episode.peak == 500 and len(pool.tasks) == 500
    assert sorted(r.index for r in done) == list(range(5000))


async def test_episodes_that_never_wait_cost_two_tasks() -> None:
    episode, done = Counting(None), []
    pool = workers(episode, done, 2000)
    await pool.run(items(3000))
    assert len(pool.tasks) == 2 and episode.peak == 1
    assert episode.played == list(range(3000))  # one worker, in order


@pytest.mark.parametrize("cap", [1, 3, 64])
async def test_the_pool_never_exceeds_its_concurrency(cap: int) -> None:
    episode, done = Counting(0.001), []
    pool = workers(episode, done, cap)
    await pool.run(items(200))
    assert len(pool.tasks) <= cap and episode.peak == min(cap, 200)
    assert len(done) == 200


async def test_skipped_items_are_read_but_not_played() -> None:
    episode, done = Counting(0.0), []
    pool = workers(episode, done, 4, skip={(i, 0) for i in range(0, 20, 2)})
    await pool.run(items(20))
    assert sorted(episode.played) == list(range(1, 20, 2))


async def test_a_failing_iterator_is_raised_after_the_running_episodes_end() -> None:
    def broken() -> Iterator[tuple[int, int, Mapping[str, Any]]]:
        yield from items(5)
        raise ValueError("bad row 6")

    episode, done = Counting(0.001), []
    pool = workers(episode, done, 8)
    with pytest.raises(ValueError, match="bad row 6"):
        await pool.run(broken())
    assert all(task.done() for task in pool.tasks)


async def test_a_failing_sink_stops_taking_samples() -> None:
    episode = Counting(0.0)
    counter = itertools.count()

    def sink(record: EpisodeRecord) -> None:
        if next(counter) == 3:
            raise OSError("disk full")

    stopping = [False]
    pool = Workers(
        episode.play,
        sink,
        concurrency=2,
        stopping=lambda: stopping[0],
        stop=lambda: stopping.__setitem__(0, True),
    )
    with pytest.raises(OSError, match="disk full"):
        await pool.run(items(1000))
    assert len(episode.played) < 10
