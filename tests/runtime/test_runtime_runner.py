"""The runner: concurrency, streaming records, the summary, cancellation, no leaks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from runtime_fakes import Faulty, Plain, Recorder, sample

from interactions_core.runtime import (
    DatasetError,
    EpisodeRecord,
    ReplayPolicy,
    Runner,
    run_episodes,
)

FAULTS = ["", "", "generate", "", "score", "hang", "finalize", "", "start", "tuple"]


def mixed(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        if i % 7 == 0:
            yield sample(["x"])  # single-turn
        elif i % 2:
            yield sample(["a", "b", "c"], kwargs={"name": "rec", "answer": "abc"[i % 3]})
        else:
            yield sample(["a"], kwargs={"name": "faulty", "fault": FAULTS[i % len(FAULTS)]})


async def test_two_thousand_episodes_leave_no_session_open() -> None:
    rec, faulty = Recorder(), Faulty()
    runner = Runner(
        ReplayPolicy(),
        {"rec": rec, "faulty": faulty},
        concurrency=64,
        # Long enough that a loaded machine never times out a quick call (a start cut
        # short after the plugin stored its session leaves that session to the plugin);
        # the "hang" fault still ends by it.
        timeout=1.0,
        observe=False,
    )
    seen: list[int] = []
    summary = await runner.run(mixed(2000), on_record=lambda r: seen.append(r.index))
    assert summary.episodes == 2000 and sorted(seen) == list(range(2000))
    assert runner.open_sessions == 0 and runner.tracker.started == runner.tracker.finalized
    assert rec.open_sessions == 0 and faulty.open_sessions == 0
    assert summary.records is None  # not kept unless asked
    assert summary.errors == sum(summary.end_reasons.get(r, 0) for r in ("error",))
    assert summary.errors > 0 and summary.end_reasons["single_turn"] == len(range(0, 2000, 7))
    assert sum(summary.turns.values()) == 2000
    assert len(summary.error_examples) == 5


async def test_summary_counts() -> None:
    samples = [
        sample(["a"], kwargs={"name": "rec", "answer": "a"}),
        sample(["x", "b"], kwargs={"name": "rec", "answer": "b"}),
        sample(["x", "y"], kwargs={"name": "rec", "answer": "b"}),
        sample(["a"], kwargs={"name": "nope"}),
    ]
    summary = await run_episodes(
        samples, ReplayPolicy(), {"rec": Recorder()}, observe=False, keep_records=True
    )
    data = summary.as_dict()
    assert data["episodes"] == 4 and data["terminated"] == 2 and data["errors"] == 1
    assert data["turns"] == {"0": 1, "1": 1, "2": 2}
    assert data["final_score_mean"] == 0.5  # Recorder.score; the errored episode is left out
    assert data["end_reasons"] == {"terminated": 2, "exhausted": 1, "error": 1}
    assert data["score_by_turn"] == {"1": pytest.approx(1 / 3), "2": 0.5}
    assert data["error_examples"][0]["where"] == "sample"
    assert [r.index for r in sorted(summary.records or [], key=lambda r: r.index)] == [0, 1, 2, 3]
    text = summary.format()
    assert "episodes          4  (3 ok, 1 errored)" in text
    assert "assistant turns   0: 1  1: 1  2: 2" in text


async def test_concurrency_is_respected() -> None:
    running = peak = 0

    class Slow:
        async def reply(self, state: Any, messages: Any) -> str | None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001)
            running -= 1
            return None

    await run_episodes([sample()] * 40, Slow(), {}, concurrency=5, observe=False)
    assert peak == 5

    class Lonely(Slow):
        max_concurrency = 1

    peak = 0
    await run_episodes([sample()] * 10, Lonely(), {}, concurrency=5, observe=False)
    assert peak == 1


async def test_cancel_finalizes_running_episodes() -> None:
    faulty = Faulty()
    runner = Runner(ReplayPolicy(), {"f": faulty}, concurrency=8, observe=False)
    rows = (sample(["a"], kwargs={"name": "f", "fault": "hang"}) for _ in range(100))
    task = asyncio.ensure_future(runner.run(rows))
    while runner.open_sessions < 8:
        await asyncio.sleep(0)
    runner.cancel()
    summary = await task
    assert summary.interrupted and summary.episodes == 0
    assert runner.open_sessions == 0 and faulty.open_sessions == 0


async def test_outer_cancellation_finalizes_too() -> None:
    faulty = Faulty()
    runner = Runner(ReplayPolicy(), {"f": faulty}, concurrency=4, observe=False)
    task = asyncio.ensure_future(
        runner.run([sample(["a"], kwargs={"name": "f", "fault": "hang"})] * 10)
    )
    while runner.open_sessions < 4:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert faulty.open_sessions == 0


async def test_a_failing_source_stops_the_run_after_cleanup() -> None:
    plain = Plain()

    def rows() -> Iterator[dict[str, Any]]:
        yield from [sample(["a"], kwargs={"name": "p"})] * 5
        raise DatasetError("data.jsonl:6: invalid JSON")

    runner = Runner(ReplayPolicy(), {"p": plain}, concurrency=2, observe=False)
    with pytest.raises(DatasetError, match=r"data\.jsonl:6"):
        await runner.run(rows())
    assert runner.open_sessions == 0 and plain.state == {}


async def test_a_failing_record_sink_stops_the_run() -> None:
    def sink(record: EpisodeRecord) -> None:
        raise OSError("disk full")

    runner = Runner(ReplayPolicy(), {"p": Plain()}, observe=False)
    with pytest.raises(OSError, match="disk full"):
        await runner.run([sample(["a"], kwargs={"name": "p"})] * 50, on_record=sink)
    assert runner.open_sessions == 0


async def test_policy_is_closed_by_run_episodes() -> None:
    closed = []

    class Closing(ReplayPolicy):
        async def aclose(self) -> None:
            closed.append(True)

    await run_episodes([sample(["a"])], Closing(), None, observe=False)
    assert closed == [True]


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Runner(ReplayPolicy(), {}, concurrency=0, observe=False)
