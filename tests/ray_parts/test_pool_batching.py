"""Batching (interactions_core.ray._routing): one Ray call per loop iteration and replica."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from local_actors import LocalHandle

from interactions_core.ray._routing import CallBatcher


async def test_calls_of_one_loop_iteration_travel_together_in_order() -> None:
    handle = LocalHandle()
    batcher = CallBatcher(handle, 4, asyncio.get_running_loop())
    futures = [batcher.submit(("calculate_score", (f"s{i}",), {})) for i in range(10)]
    answers = await asyncio.gather(*futures)
    assert [a[1] for a in answers] == [("calculate_score", (f"s{i}",)) for i in range(10)]
    assert [len(c[0]) for c in handle.call_batch.calls] == [4, 4, 2]  # max_batch, then the rest
    later = await batcher.submit(("calculate_score", ("t",), {}))
    assert later[1] == ("calculate_score", ("t",))
    assert [len(c[0]) for c in handle.call_batch.calls] == [4, 4, 2, 1]


async def test_a_failed_batch_fails_each_of_its_calls() -> None:
    class Broken(LocalHandle):
        async def _call_batch(self, calls: Any) -> Any:
            raise ConnectionError("actor died")

    batcher = CallBatcher(Broken(), 8, asyncio.get_running_loop())
    futures = [batcher.submit(("generate_response", ("s",), {})) for _ in range(3)]
    for future in futures:
        with pytest.raises(ConnectionError, match="actor died"):
            await future
