"""The sharded run's driver loop (interactions_core.ray.shard).

Its ordering and failure rules are plain Python over three Ray calls (``wait``,
``get``, ``cancel``); here a scheduler in this process finishes chunks in an
order the test chooses. The same loop on a real cluster: tests/ray_cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from interactions_core._stop_signals import StopSignals
from interactions_core.ray.errors import WorkerSetupError
from interactions_core.ray.shard import ShardDriver, lost_chunk


class TaskFailed(Exception):
    """What ``ray.get`` raises for a failed task: the task's own error is ``cause``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"task failed\n\n{cause}")
        self.cause = cause


class Scheduler:
    """``ray.wait``/``get``/``cancel`` and a task, finishing the newest chunk first."""

    def __init__(self, fail: dict[int, BaseException] | None = None) -> None:
        self.fail = fail or {}
        self.submitted: list[int] = []
        self.most_in_flight = 0
        self.cancelled: list[int] = []
        self.stop: StopSignals | None = None
        self.stop_after = -1

    def remote(self, settings_ref: Any, chunk: list[Any]) -> int:
        self.submitted.append(chunk[0][0])
        return len(self.submitted) - 1

    def wait(self, refs: list[int], num_returns: int, timeout: float) -> tuple[list[int], Any]:
        self.most_in_flight = max(self.most_in_flight, len(refs))
        if self.stop is not None and len(self.submitted) > self.stop_after:
            self.stop.requested = True
        return [max(refs)], None

    def get(self, ref: int) -> list[str]:
        if ref in self.fail:
            raise TaskFailed(self.fail[ref])
        return [f"record of chunk {ref}"]

    def cancel(self, ref: int, force: bool) -> None:
        self.cancelled.append(ref)


def _chunks(count: int) -> Any:
    return iter([[(n, 0, {"id": f"q{n}"})] for n in range(count)])


def _drive(scheduler: Scheduler, count: int, stop: StopSignals | None = None) -> Any:
    released: list[str] = []
    driver = ShardDriver(scheduler, scheduler, "settings", 3, released.extend)
    interrupted = driver.run(_chunks(count), stop or StopSignals())
    return released, interrupted


def test_records_are_released_in_dataset_order_within_the_window() -> None:
    scheduler = Scheduler()
    released, interrupted = _drive(scheduler, 7)
    assert released == [f"record of chunk {n}" for n in range(7)]
    assert not interrupted and scheduler.most_in_flight == 3


def test_a_chunk_whose_task_died_becomes_error_records() -> None:
    scheduler = Scheduler(fail={1: RuntimeError("worker died\n  while playing")})
    released, _ = _drive(scheduler, 3)
    assert released[0] == "record of chunk 0" and released[2] == "record of chunk 2"
    record = released[1]
    assert (record.index, record.sample_id, record.repeat) == (1, "q1", 0)
    assert record.errors[0]["where"] == "ray"
    assert record.errors[0]["message"] == (
        "the Ray task playing samples 1-1 failed: RuntimeError: worker died while playing"
    )


def test_a_worker_that_cannot_set_up_stops_the_run() -> None:
    scheduler = Scheduler(fail={2: WorkerSetupError("the Ray worker on node n1 could not")})
    with pytest.raises(WorkerSetupError, match="could not") as info:
        _drive(scheduler, 6)
    assert info.value.__cause__ is None
    assert scheduler.cancelled == [0, 1]  # the other chunks in flight


def test_a_stop_cancels_the_running_chunks_and_keeps_the_finished_ones() -> None:
    scheduler = Scheduler()
    stop = StopSignals()
    stop.restore()  # no handlers needed: the scheduler requests the stop
    scheduler.stop, scheduler.stop_after = stop, 3
    released, interrupted = _drive(scheduler, 10, stop)
    assert interrupted
    # chunks 2 and 3 finished while 0 and 1 still ran: theirs count, in order
    assert released == ["record of chunk 2", "record of chunk 3"]
    assert scheduler.cancelled == [0, 1]


def test_lost_chunk_names_the_samples_and_the_cause() -> None:
    chunk = [(4, 0, {}), (4, 1, {}), (5, 0, {"extra_info": {"index": 77}})]
    records = lost_chunk(chunk, TaskFailed(MemoryError("out of memory")))
    assert [(r.index, r.repeat, r.sample_id) for r in records] == [(4, 0, 4), (4, 1, 4), (5, 0, 77)]
    assert records[0].errors[0]["type"] == "RuntimeError"
    assert "samples 4-5 failed: MemoryError: out of memory" in records[0].errors[0]["message"]
