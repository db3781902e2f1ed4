"""Playing one scripted episode the way a run does, keeping what the plugin returned.

Episodes are played through :class:`~interactions_core.runtime.session.Session`,
the lifecycle a run uses (the interaction kwargs reach every call, a failed
start is not finalized), so the checker judges the rules a run applies. A
:class:`Probe` stands in front of the instance: every call goes through the
context's timed, watched :meth:`~CheckContext.call`, and the raw return value
is kept, so the checks see what the plugin returned before the session coerced
it. :func:`check_episodes` (``results`` and ``scores``) is nothing but this.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from .._interaction import InteractionResult
from ..runtime.errors import InteractionCallError
from ..runtime.session import Session
from ._check_results import check_result, check_score
from ._context import CheckContext, new_id
from .driver import plugin_error
from .target import Episode

__all__ = ["Probe", "Trace", "check_episodes", "open_session", "play", "returned"]

#: What an episode did, step by step: ``(should_terminate, content, score)`` per
#: turn, then ``("score", final score)``; two runs compare equal when they agree.
Trace = list[tuple[Any, ...]]

#: No return value seen yet (``None`` is a return value).
_NOTHING: Any = object()


class Probe:
    """Stands in front of an instance: each call goes through the context's ``call``
    (time limit, blocking detection) and its raw return value is kept in ``raw``."""

    def __init__(self, ctx: CheckContext, obj: Any) -> None:
        self._ctx = ctx
        self._obj = obj
        self.raw: Any = _NOTHING
        self.name = getattr(obj, "name", "?")

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> Any:
        return await self._ctx.call(self._obj, "start_interaction", instance_id, **kwargs)

    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        self.raw = await self._ctx.call(
            self._obj, "generate_response", instance_id, messages, **kwargs
        )
        return self.raw

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> Any:
        self.raw = await self._ctx.call(self._obj, "calculate_score", instance_id, **kwargs)
        return self.raw

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> Any:
        return await self._ctx.call(self._obj, "finalize_interaction", instance_id)


def open_session(ctx: CheckContext, obj: Any, tag: str) -> tuple[Session, Probe]:
    """A session on ``obj`` under a fresh explicit id (verl passes one), and its probe."""
    probe = Probe(ctx, obj)
    return Session(probe, name=ctx.target.label, instance_id=new_id(tag)), probe


async def returned(probe: Probe, call: Awaitable[Any]) -> Any:
    """``await call`` (a session call); return what the plugin returned, even a value
    the session refused. Raises the session's ``InteractionCallError`` only when the
    plugin itself raised (or timed out)."""
    probe.raw = _NOTHING
    try:
        await call
    except InteractionCallError:
        if probe.raw is _NOTHING:
            raise
    return probe.raw


async def check_episodes(ctx: CheckContext) -> None:
    """``results`` and ``scores``: play every episode on a fresh instance."""
    obj = ctx.instance()
    for number, episode in enumerate(ctx.episodes, 1):
        await play(ctx, obj, episode, number)


async def play(
    ctx: CheckContext, obj: Any, episode: Episode, number: int
) -> tuple[str | None, Trace]:
    """Play one episode under a fresh explicit id (verl passes one); return id and trace.

    What the plugin got wrong is recorded on ``ctx``; the episode stops at the
    first turn that gave nothing usable, and the session is always finalized
    once started.
    """
    where = f"in episode {number}"
    session, probe = open_session(ctx, obj, f"episode{number}")
    try:
        await session.start(**episode.kwargs)
    except InteractionCallError as exc:
        ctx.raised("results", "start_interaction", where, plugin_error(exc))
        return None, []
    trace: Trace = []
    try:
        if await _turns(ctx, session, probe, episode, where, trace):
            await _final_score(ctx, session, probe, where, trace)
        return session.instance_id, trace
    finally:
        problem = await session.finalize()
        if problem is not None:
            ctx.raised("results", "finalize_interaction", where, plugin_error(problem))


async def _turns(
    ctx: CheckContext, session: Session, probe: Probe, episode: Episode, where: str, trace: Trace
) -> bool:
    """Play the scripted replies onto ``trace``; False when a turn failed (recorded)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
    for turn, reply in enumerate(episode.replies, 1):
        messages.append({"role": "assistant", "content": reply})
        result = await _judged(ctx, session, probe, list(messages), f"{where}, turn {turn}")
        if result is None:
            return False
        trace.append((result.should_terminate, result.content, result.score))
        messages.append({"role": "user", "content": result.content})
        if result.should_terminate:
            break
    return True


async def _judged(
    ctx: CheckContext, session: Session, probe: Probe, messages: list[dict[str, Any]], where: str
) -> InteractionResult | None:
    """One turn's checked result, or ``None`` (recorded) when the turn failed."""
    try:
        raw = await returned(probe, session.respond(messages))
    except InteractionCallError as exc:
        ctx.raised("results", "generate_response", where, plugin_error(exc))
        return None
    return check_result(ctx, raw, where)


async def _final_score(
    ctx: CheckContext, session: Session, probe: Probe, where: str, trace: Trace
) -> None:
    """``calculate_score``, checked and added to ``trace`` unless the plugin raised."""
    try:
        raw = await returned(probe, session.score())
    except InteractionCallError as exc:
        ctx.raised("results", "calculate_score", where, plugin_error(exc))
        return
    check_score(ctx, raw, "calculate_score's result", where)
    trace.append(("score", raw))
