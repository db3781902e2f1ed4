"""Which episodes a sharded run plays, cut into the chunks that become Ray tasks.

A sample played ``--repeat K`` times is K episodes in a row, as a local run
plays them; a resumed run leaves out the ``(index, repeat)`` episodes it
already has a record of, so a task only ever receives episodes to play.
Consecutive episodes go together, so the records of a chunk come back in
dataset order.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Iterable, Iterator, Mapping
from typing import Any

__all__ = ["CHUNK_SIZE", "Chunk", "Episode", "plan_chunks"]

#: Samples per Ray task: large enough to hide the task's cost, small enough to spread.
CHUNK_SIZE = 32

#: ``(index, repeat, sample)`` of one episode.
Episode = tuple[int, int, Mapping[str, Any]]
Chunk = list[Episode]


def plan_chunks(
    samples: Iterable[Mapping[str, Any]] | Iterable[tuple[int, Mapping[str, Any]]],
    repeat: int,
    skip: Container[tuple[int, int]] | None,
    size: int,
    *,
    indexed: bool = False,
) -> Iterator[Chunk]:
    """The episodes to play, ``size`` at a time (the last chunk may be shorter).

    ``samples`` are numbered from 0, or with ``indexed=True`` are ``(index,
    sample)`` pairs already. Nothing is read ahead of the chunk asked for.
    """
    pairs: Iterable[Any] = iter(samples) if indexed else enumerate(samples)
    episodes = _episodes(pairs, repeat, skip)
    while chunk := list(itertools.islice(episodes, size)):
        yield chunk


def _episodes(
    pairs: Iterable[tuple[int, Mapping[str, Any]]],
    repeat: int,
    skip: Container[tuple[int, int]] | None,
) -> Iterator[Episode]:
    """Every episode to play, in the order a local run plays them."""
    for index, sample in pairs:
        for r in range(repeat):
            if skip is None or (index, r) not in skip:
                yield index, r, sample
