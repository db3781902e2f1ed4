"""The instance-id contract: the ``lifecycle``, ``unknown_session`` and ``reuse`` checks.

The runtime keeps many sessions open on one instance and tells them apart by
``instance_id`` alone. So an interaction must hand back the id it was given (or
a fresh unique one), refuse an id it does not know instead of answering for the
wrong session, finalize harmlessly on every error path, and refuse to start a
second session over a live one (verl silently overwrote it).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Mapping
from typing import Any

from ..errors import InteractionsError
from ._context import CheckContext, describe_exc, short

__all__ = ["check_lifecycle", "check_reuse", "check_unknown_session"]


async def check_lifecycle(ctx: CheckContext) -> None:
    """``start_interaction`` returns a fresh unique id for ``None``, else the id it was given."""
    obj = ctx.instance()
    if await _generated_ids(ctx, obj):
        await _given_id(ctx, obj)


async def _generated_ids(ctx: CheckContext, obj: Any) -> bool:
    """Two ``start_interaction(None)``: non-empty, distinct ids. False when a start raised."""
    kwargs = ctx.episodes[0].kwargs
    ids: list[str] = []
    for attempt in (1, 2):
        try:
            iid = await ctx.call(obj, "start_interaction", None, **kwargs)
        except Exception as exc:
            ctx.add("lifecycle", f"start_interaction(None) {describe_exc(exc)}")
            return False
        if not isinstance(iid, str) or not iid:
            ctx.add(
                "lifecycle",
                f"start_interaction(None) returned {short(iid)}; it must return a new, "
                "non-empty str id",
            )
        ids.append(iid)
        if attempt == 2 and isinstance(iid, str) and iid and ids[0] == ids[1]:
            ctx.add(
                "lifecycle",
                f"start_interaction(None) returned the same id {ids[0]!r} twice; "
                "generated ids must be unique",
            )
    for iid in ids:
        await ctx.finalize(obj, iid, "after start_interaction(None)")
    return True


async def _given_id(ctx: CheckContext, obj: Any) -> None:
    """``start_interaction(given)`` returns ``given``."""
    given = f"conformance-{uuid.uuid4().hex[:8]}"
    try:
        iid = await ctx.call(obj, "start_interaction", given, **ctx.episodes[0].kwargs)
    except Exception as exc:
        ctx.add("lifecycle", f"start_interaction({given!r}) {describe_exc(exc)}")
        return
    if iid != given:
        ctx.add(
            "lifecycle",
            f"start_interaction({given!r}) returned {short(iid)}; it must return the "
            "instance_id it was given",
        )
    await ctx.finalize(obj, iid if isinstance(iid, str) else given, "after a given id")


async def check_unknown_session(ctx: CheckContext) -> None:
    """Unknown and finalized ids raise ``SessionError``; finalizing them is harmless."""
    obj = ctx.instance()
    never = f"never-started-{uuid.uuid4().hex[:8]}"
    messages = [{"role": "assistant", "content": "hello"}]
    await _expect_session_error(
        ctx,
        "generate_response on an instance_id that was never started",
        ctx.call(obj, "generate_response", never, messages),
    )
    await _expect_session_error(
        ctx,
        "calculate_score on an instance_id that was never started",
        ctx.call(obj, "calculate_score", never),
    )
    await _expect_harmless(
        ctx,
        ctx.call(obj, "finalize_interaction", never),
        "finalize_interaction on an unknown instance_id {}; finalizing must be harmless "
        "(the runtime finalizes on every error path)",
    )
    try:
        iid = await ctx.call(obj, "start_interaction", None, **ctx.episodes[0].kwargs)
    except Exception:
        return  # reported by other checks
    await ctx.finalize(obj, iid, "once")
    await _expect_harmless(
        ctx,
        ctx.call(obj, "finalize_interaction", iid),
        "finalize_interaction called twice for one session {}; the second call must be a no-op",
    )
    await _expect_session_error(
        ctx,
        "generate_response after finalize_interaction",
        ctx.call(obj, "generate_response", iid, messages),
    )


async def _expect_session_error(ctx: CheckContext, what: str, call: Awaitable[Any]) -> None:
    """``call`` (with an id that is not live) must raise an ``InteractionsError``."""
    try:
        await call
    except InteractionsError:  # SessionError, or another clear framework error
        return
    except Exception as exc:
        ctx.add(
            "unknown_session",
            f"{what} {describe_exc(exc)}; raise interactions_core.SessionError "
            "(SessionInteraction does this for you)",
        )
    else:
        ctx.add(
            "unknown_session",
            f"{what} returned normally; it must raise SessionError so a misrouted turn is "
            "not scored silently",
        )


async def _expect_harmless(ctx: CheckContext, call: Awaitable[Any], message: str) -> None:
    """``await call``; when it raises, ``message`` with the exception described at ``{}``."""
    try:
        await call
    except Exception as exc:
        ctx.add("unknown_session", message.format(describe_exc(exc)))


async def check_reuse(ctx: CheckContext) -> None:
    """A live id cannot be started again; once finalized it can."""
    obj = ctx.instance()
    live = f"live-{uuid.uuid4().hex[:8]}"
    kwargs = ctx.episodes[0].kwargs
    try:
        await ctx.call(obj, "start_interaction", live, **kwargs)
    except Exception:
        return  # reported by other checks
    await _expect_live_id_refused(ctx, obj, live, kwargs)
    await ctx.finalize(obj, live, "of the reused id")
    try:
        await ctx.call(obj, "start_interaction", live, **kwargs)
    except Exception as exc:
        ctx.add(
            "reuse",
            f"an instance_id could not be started again after it was finalized: "
            f"{describe_exc(exc)}",
        )
        return
    await ctx.finalize(obj, live, "of the restarted id")


async def _expect_live_id_refused(
    ctx: CheckContext, obj: Any, live: str, kwargs: Mapping[str, Any]
) -> None:
    """Starting ``live`` again while it is open must raise an ``InteractionsError``."""
    try:
        await ctx.call(obj, "start_interaction", live, **kwargs)
    except InteractionsError:
        return
    except Exception as exc:
        ctx.add(
            "reuse",
            f"starting a second session with the live instance_id {live!r} "
            f"{describe_exc(exc)}; raise SessionError instead",
        )
        return
    ctx.add(
        "reuse",
        f"starting a second session with the live instance_id {live!r} was accepted "
        "silently (the first session's state is lost); raise SessionError",
    )
