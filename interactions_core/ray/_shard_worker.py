"""What a Ray worker does with a chunk of a sharded run: play it like a local run would.

A worker builds the run's interactions and policy from *its own node's*
plugins, once per run (keyed by :meth:`RunSettings.key`), and keeps them, with
an event loop, between chunks: a chunk costs one Ray task, not a fresh config
load. Each episode keeps its global index, so the records equal a local run's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._messages import one_line

if TYPE_CHECKING:
    from .shard import RunSettings

__all__ = ["play_chunk"]


class _WorkerState:
    """What one worker process keeps between chunks of the same run."""

    def __init__(self, settings: RunSettings) -> None:
        from ..loader import load_config
        from ..registry import get_registry
        from ..runtime.policies import create_policy, get_policy_class
        from ..runtime.runner import Runner

        registry = get_registry()
        interactions = None
        if settings.config is not None:
            interactions = load_config(settings.config, registry=registry).instantiate()
        policy = create_policy(
            get_policy_class(settings.policy, registry),
            settings.policy_options,
            name=settings.policy,
        )
        self.loop = asyncio.new_event_loop()
        self.runner = Runner(
            policy,
            interactions,
            concurrency=settings.concurrency,
            default=settings.default,
            max_assistant_turns=settings.max_assistant_turns,
            max_user_turns=settings.max_user_turns,
            timeout=settings.timeout,
            registry=registry,
        )


_STATES: dict[str, _WorkerState] = {}


def _set_up(settings: RunSettings) -> _WorkerState:
    """Build this worker's state, or say which node could not and why."""
    try:
        return _WorkerState(settings)
    except Exception as exc:
        import socket

        from .errors import WorkerSetupError

        raise WorkerSetupError(
            f"the Ray worker on node {socket.gethostname()} could not set up the run: "
            f"{type(exc).__name__}: {one_line(exc)}. If the driver runs this config, that "
            "node has different plugins: compare them with 'interactions ray check --address "
            "HOST:PORT' and ship the plugins with the job's runtime_env (docs/ray.md)"
        ) from None


def play_chunk(settings: RunSettings, chunk: list[tuple[int, int, Mapping[str, Any]]]) -> list[Any]:
    """Play ``(index, repeat, sample)`` episodes; return their records in order (a Ray task)."""
    from ..runtime.record import WALL_OFFSET as _WALL_OFFSET

    key = settings.key()
    state = _STATES.get(key)
    if state is None:
        state = _STATES[key] = _set_up(settings)
    runner = state.runner

    async def play_all() -> list[Any]:
        gate = asyncio.Semaphore(runner.concurrency)

        async def one(index: int, repeat: int, sample: Mapping[str, Any]) -> Any:
            async with gate:
                return await runner.loop.run(sample, index, repeat)

        return list(await asyncio.gather(*(one(i, r, s) for i, r, s in chunk)))

    records = state.loop.run_until_complete(play_all())
    shift = _WALL_OFFSET - settings.wall_offset
    for record in records:
        record.started_at += shift
    return records
