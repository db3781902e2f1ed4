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

from .._interaction import InteractionResult
from ..runtime.errors import InteractionCallError
from ._context import CheckContext, short
from ._play import Trace, open_session, play, returned
from .driver import plugin_error
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
    """One episode of the interleaved run: its session, conversation and trace so far.

    ``trace`` is ``None`` when the episode cannot be compared (it did not start,
    or a call failed: the solo runs report that); ``done`` once it ended or ran
    out of replies.
    """

    def __init__(self, ctx: CheckContext, obj: Any, episode: Episode, number: int) -> None:
        self.episode = episode
        self.session, self.probe = open_session(ctx, obj, f"concurrent{number}")
        self.trace: Trace | None = None
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
        self.done = True

    async def start(self) -> None:
        try:
            await self.session.start(**self.episode.kwargs)
        except InteractionCallError:
            return
        self.trace, self.done = [], False

    async def turn(self, k: int) -> None:
        """Play the episode's ``k``-th reply."""
        trace = self.trace
        assert trace is not None
        self.messages.append({"role": "assistant", "content": self.episode.replies[k]})
        try:
            raw = await returned(self.probe, self.session.respond(list(self.messages)))
            result = InteractionResult.coerce(raw)
        except Exception:
            self.trace, self.done = None, True
            return
        trace.append((result.should_terminate, result.content, result.score))
        self.messages.append({"role": "user", "content": result.content})
        if result.should_terminate or k + 1 >= len(self.episode.replies):
            self.done = True

    async def score(self) -> None:
        """Add the final score to a comparable episode's trace."""
        if self.trace is None:
            return
        try:
            self.trace.append(("score", await returned(self.probe, self.session.score())))
        except InteractionCallError:
            self.trace = None


async def _interleaved(ctx: CheckContext, obj: Any) -> list[Trace | None]:
    """Start every episode, then play turn k of all of them together, for each k.

    The episodes are played through ``Session`` like the solo runs, so both
    sides get the same calls (the interaction kwargs reach every one).
    """
    runs = [_Concurrent(ctx, obj, episode, n) for n, episode in enumerate(ctx.episodes, 1)]
    try:
        for run in runs:
            await run.start()
        k = 0
        while not all(run.done for run in runs):
            await asyncio.gather(*(run.turn(k) for run in runs if not run.done))
            k += 1
        for run in runs:
            await run.score()
    finally:
        for run in runs:
            problem = await run.session.finalize()  # nothing for a session never started
            if problem is not None:
                where = "after the concurrent run"
                ctx.raised("results", "finalize_interaction", where, plugin_error(problem))
    return [run.trace for run in runs]
