"""The ``isolation`` check: concurrent sessions on one instance do not see each other.

A run keeps many episodes open on one instance and interleaves their turns.
State kept on the instance (``self.truth = ...``) instead of per ``instance_id``
passes every one-at-a-time test and then mixes up answers in a run. So every
episode is played alone, twice (to tell non-determinism apart), then all of them
together, turn ``k`` of each at the same time; an episode whose steps differ
from its solo run shares state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..result import InteractionResult
from ._context import CheckContext, new_id, short
from ._play import Trace, play
from .target import Episode

__all__ = ["check_isolation"]


async def check_isolation(ctx: CheckContext) -> None:
    """Compare each episode played alone with the same episode played among the others."""
    distinct = {repr(sorted(e.kwargs.items(), key=repr)) for e in ctx.episodes}
    if len(ctx.episodes) < 2 or len(distinct) < 2:
        ctx.report.notes.append(
            "isolation not checked: give at least two episodes with different kwargs"
        )
        return
    obj = ctx.instance()
    alone = await _solo_traces(ctx, obj)
    together = await _interleaved(ctx, obj)
    for number, (solo, mixed) in enumerate(zip(alone, together, strict=True), 1):
        if solo is None or mixed is None or solo == mixed:
            continue
        step = next(
            (i for i, (a, b) in enumerate(zip(solo, mixed, strict=False), 1) if a != b),
            min(len(solo), len(mixed)) + 1,
        )
        ctx.add(
            "isolation",
            f"episode {number} behaved differently when run concurrently with the others "
            f"(first difference at step {step}: alone {short(_at(solo, step))}, "
            f"concurrently {short(_at(mixed, step))}): sessions share state; keep it per "
            "instance_id (SessionInteraction.new_session)",
        )


async def _solo_traces(ctx: CheckContext, obj: Any) -> list[Trace | None]:
    """Each episode's trace played alone; ``None`` (noted) when two solo runs disagree."""
    alone: list[Trace | None] = []
    for number, episode in enumerate(ctx.episodes, 1):
        first = (await play(ctx, obj, episode, number))[1]
        second = (await play(ctx, obj, episode, number))[1]
        alone.append(first if first == second else None)
    skipped = [str(n) for n, t in enumerate(alone, 1) if t is None]
    if skipped:
        ctx.report.notes.append(
            f"episode(s) {', '.join(skipped)} gave different results on two solo runs "
            "(non-deterministic); isolation was not compared for them"
        )
    return alone


def _at(trace: Trace, step: int) -> Any:
    return trace[step - 1] if 0 < step <= len(trace) else "(episode ended)"


class _Concurrent:
    """One episode of the interleaved run: its session id, conversation and trace so far.

    ``trace`` is ``None`` when the episode could not be compared (a call failed:
    the solo runs report that); ``done`` once it ended or ran out of replies.
    """

    def __init__(self, episode: Episode, iid: str | None) -> None:
        self.episode = episode
        self.iid = iid
        self.trace: Trace | None = [] if iid else None
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
        self.done = iid is None


async def _interleaved(ctx: CheckContext, obj: Any) -> list[Trace | None]:
    """Start every episode, then play turn k of all of them together, for each k."""
    runs = [
        _Concurrent(episode, await _start(ctx, obj, episode, number))
        for number, episode in enumerate(ctx.episodes, 1)
    ]
    try:
        k = 0
        while not all(run.done for run in runs):
            await asyncio.gather(*(_turn(ctx, obj, run, k) for run in runs if not run.done))
            k += 1
        for run in runs:
            await _score(ctx, obj, run)
    finally:
        for run in runs:
            if run.iid is not None:
                await ctx.finalize(obj, run.iid, "after the concurrent run")
    return [run.trace for run in runs]


async def _start(ctx: CheckContext, obj: Any, episode: Episode, number: int) -> str | None:
    """The started session's id, or ``None`` when it could not start."""
    iid = new_id(f"concurrent{number}")
    try:
        await ctx.call(obj, "start_interaction", iid, **episode.kwargs)
    except Exception:
        return None
    return iid


async def _turn(ctx: CheckContext, obj: Any, run: _Concurrent, k: int) -> None:
    """Play the episode's ``k``-th reply."""
    trace = run.trace
    assert trace is not None
    run.messages.append({"role": "assistant", "content": run.episode.replies[k]})
    try:
        raw = await ctx.call(obj, "generate_response", run.iid, list(run.messages))
        result = InteractionResult.coerce(raw)
    except Exception:
        run.trace, run.done = None, True  # reported by the solo runs
        return
    trace.append((result.should_terminate, result.content, result.score))
    run.messages.append({"role": "user", "content": result.content})
    if result.should_terminate or k + 1 >= len(run.episode.replies):
        run.done = True


async def _score(ctx: CheckContext, obj: Any, run: _Concurrent) -> None:
    """Add the final score to a comparable episode's trace."""
    if run.iid is None or run.trace is None:
        return
    try:
        run.trace.append(("score", await ctx.call(obj, "calculate_score", run.iid)))
    except Exception:
        run.trace = None
