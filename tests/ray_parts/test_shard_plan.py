"""Planning a sharded run (interactions_core.ray.shard): episodes, skips, chunks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from interactions_core.ray.shard import plan_chunks


def _keys(chunks: Any) -> list[list[tuple[int, int]]]:
    return [[(i, r) for i, r, _ in chunk] for chunk in chunks]


def test_repeats_are_consecutive_and_chunks_cut_across_samples() -> None:
    samples = [{"q": n} for n in range(3)]
    chunks = list(plan_chunks(samples, 2, None, 4))
    assert _keys(chunks) == [[(0, 0), (0, 1), (1, 0), (1, 1)], [(2, 0), (2, 1)]]
    assert chunks[1][0][2] == {"q": 2}


def test_a_resumed_run_leaves_out_the_finished_episodes() -> None:
    done = {(0, 0), (0, 1), (2, 1)}
    assert _keys(plan_chunks([{}] * 3, 2, done, 10)) == [[(1, 0), (1, 1), (2, 0)]]
    assert list(plan_chunks([{}] * 2, 1, {(0, 0), (1, 0)}, 10)) == []


def test_indexed_samples_keep_their_index() -> None:
    pairs = [(7, {"q": 7}), (9, {"q": 9})]
    assert _keys(plan_chunks(pairs, 1, None, 1, indexed=True)) == [[(7, 0)], [(9, 0)]]


def test_nothing_is_read_ahead_of_the_chunk_asked_for() -> None:
    read: list[int] = []

    def samples() -> Iterator[dict[str, int]]:
        for n in range(100):
            read.append(n)
            yield {"q": n}

    chunks = plan_chunks(samples(), 1, None, 5)
    assert read == []
    next(chunks)
    assert read == list(range(5))  # exactly the chunk
