"""What every conformance rule works with, and the rules judged one call at a time.

A conformance run checks one :class:`Target` (a class, an instance or a
registered name, made ready to build) against scripted episodes. Every rule
needs the same few things: the target and its episodes, a way to call one
lifecycle method under the time limit while watching for a call that holds the
event loop (``blocking``, measured by :class:`LoopWatch`), and a way to record
what it found. :class:`CheckContext` holds them, so each rule is a plain
function of the context; the wording shared by many messages
(:func:`describe_exc`, :func:`short`) lives here too.

The rules here look at single calls: ``config`` (the class can be built, a
declared schema really applies), and the instance-id contract (``lifecycle``,
``unknown_session``, ``reuse``): the runtime keeps many sessions open on one
instance and tells them apart by ``instance_id`` alone, so an interaction must
hand back the id it was given (or a fresh unique one), refuse an id it does not
know instead of answering for the wrong session, finalize harmlessly on every
error path, and refuse to start a second session over a live one (verl silently
overwrote it). The rules that play whole conversations are in ``_rules_play``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import InteractionsError, exception_text
from .driver import ConformanceReport, Episode

__all__ = [
    "BLOCKING_LIMIT",
    "UNKNOWN_OPTION",
    "CheckContext",
    "LoopWatch",
    "Target",
    "bounded",
    "check_buildable",
    "check_config",
    "check_lifecycle",
    "check_reuse",
    "check_unknown_session",
    "describe_exc",
    "new_id",
    "short",
]


# -- the target and the context every rule calls through --------------------------


class Target:
    """What is being checked: a label, the class and a way to get an instance."""

    def __init__(self, label: str, cls: type, make: Callable[[], Any], shared: bool) -> None:
        self.label = label
        self.cls = cls
        self.make = make
        self.shared = shared  # an instance was given: every check uses that one


def describe_exc(exc: BaseException) -> str:
    """``raised ValueError: first line`` (or the timeout said plainly), for a message."""
    if isinstance(exc, asyncio.TimeoutError):
        return "did not return in time (timeout)"
    whole = exception_text(exc).strip()
    text = whole.splitlines()[0] if whole else ""
    return f"raised {exc.__class__.__name__}" + (f": {text}" if text else "")


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, so one odd value keeps a message readable."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def new_id(tag: str) -> str:
    """A fresh instance id that says, in a plugin's own logs, which check made it."""
    return f"conformance-{tag}-{uuid.uuid4().hex[:12]}"


async def bounded(value: Any, timeout: float | None) -> Any:
    """``await value`` (when awaitable) with a time limit in seconds (``None``: none).

    A synchronous lifecycle method returns a plain value; the ``spec`` check
    reports it, and the other checks still see what it returned.
    """
    if inspect.isawaitable(value):
        if timeout is None:
            return await value
        return await asyncio.wait_for(_exit_as_error(value), timeout)
    return value


async def _exit_as_error(value: Any) -> Any:
    """``await value``, a plugin's ``SystemExit`` turned into an error of the check: raised
    in the task ``wait_for`` makes, it would stop the event loop, and the test with it."""
    try:
        return await value
    except SystemExit as exc:
        raise RuntimeError(f"the call raised SystemExit({exc.code!r})") from exc


class CheckContext:
    """What the checks of one run share: target, config, episodes, report and time limit."""

    def __init__(
        self,
        target: Target,
        config: Mapping[str, Any] | None,
        episodes: list[Episode],
        report: ConformanceReport,
        timeout: float | None,
    ) -> None:
        self.target = target
        self.config = dict(config or {})
        self.episodes = episodes
        self.report = report
        self.timeout = timeout

    def add(self, check: str, message: str, key: str | None = None) -> None:
        """Record a violation (see :meth:`ConformanceReport.add`)."""
        self.report.add(check, message, key)

    def instance(self) -> Any:
        """An instance to check: a fresh one per check, or the one given."""
        return self.target.make()

    async def call(self, obj: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        """``obj.method(*args, **kwargs)`` under the time limit, watched for blocking."""
        watch = LoopWatch()
        try:
            return await bounded(getattr(obj, method)(*args, **kwargs), self.timeout)
        finally:
            held = watch.stop()
            if held > BLOCKING_LIMIT:
                self._blocked(obj, method, held)

    def _blocked(self, obj: Any, method: str, held: float) -> None:
        from ..runtime.watchdog import BLOCKING_ADVICE

        cls = type(obj)
        self.add(
            "blocking",
            f"{cls.__module__}.{cls.__qualname__}.{method} held the event loop for "
            f"{held:.2f} s without awaiting; {BLOCKING_ADVICE}",
            key=f"blocking:{method}",
        )

    def raised(self, check: str, method: str, where: str, exc: BaseException) -> None:
        """Record that ``method`` raised ``exc`` (listed once, at the first place seen)."""
        text = describe_exc(exc)
        self.add(check, f"{method} {text} (first seen {where})", key=f"{method}:{text}")

    async def finalize(self, obj: Any, iid: str, where: str) -> None:
        """Finalize ``iid``; a failure is a ``results`` violation, never an exception."""
        try:
            await self.call(obj, "finalize_interaction", iid)
        except Exception as exc:
            self.raised("results", "finalize_interaction", where, exc)


# -- ``blocking``: how long a call kept the event loop from running -----------------
#
# A plugin that calls a synchronous HTTP client or ``time.sleep`` inside
# ``async def`` stops every other episode of a run, yet passes every functional
# check. A ticker scheduled on the loop shows it: while the call holds the loop,
# the ticker cannot run, so the longest gap between two ticks is the longest
# stretch the call held the loop without awaiting.

#: A lifecycle call that holds the event loop this long without awaiting is reported.
BLOCKING_LIMIT = 0.25

#: How often the ticker asks to run, in seconds.
_TICK = 0.01


class LoopWatch:
    """Measures the longest stretch the running loop could not run anything.

    Start it right before a call and read :meth:`stop` right after; the ticker
    reschedules itself every :data:`_TICK` seconds in between.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._last = time.perf_counter()
        self._longest = 0.0
        self._handle: Any = self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self._longest = max(self._longest, now - self._last)
        self._last = now
        self._handle = self._loop.call_later(_TICK, self._tick)

    def stop(self) -> float:
        """Stop ticking; return the longest time, in seconds, the loop was held."""
        self._handle.cancel()
        return max(self._longest, time.perf_counter() - self._last)


# -- ``config``: the class can be built, and a declared schema really applies --------
#
# A run builds each interaction from the options in its config. A class that
# cannot be built with them stops every other check; a ``config_schema`` that is
# declared but never applied (``__init__`` without ``super().__init__(config)``)
# lets a misspelt option through silently, which is what the schema is for.

#: Option name no schema declares; a class with a schema must refuse it.
UNKNOWN_OPTION = "__conformance_unknown_option__"


def check_config(ctx: CheckContext) -> bool:
    """Build the instance; check the schema. Returns False when nothing else can run."""
    schema = _declared_schema(ctx)
    try:
        ctx.instance()
    except Exception as exc:
        options = {k: v for k, v in ctx.config.items() if k != "name"}
        ctx.add(
            "config",
            f"the class cannot be built with config {options!r}: {describe_exc(exc)}",
        )
        return False
    if ctx.target.shared:
        return True
    if schema is None:
        ctx.report.notes.append(
            "no config_schema declared: config options are passed through unchecked"
        )
        return True
    _check_unknown_option_refused(ctx)
    return True


def check_buildable(ctx: CheckContext) -> bool:
    """With ``config`` skipped: only whether an instance can be had (a ``config`` violation)."""
    try:
        ctx.instance()
    except Exception as exc:
        ctx.add("config", f"the class cannot be built: {describe_exc(exc)}")
        return False
    return True


def _declared_schema(ctx: CheckContext) -> Any:
    """The class's ``config_schema`` when it is an attrs class; anything else is reported."""
    schema = getattr(ctx.target.cls, "config_schema", None)
    if schema is None:
        return None
    import attrs

    if isinstance(schema, type) and attrs.has(schema):
        return schema
    ctx.add(
        "config",
        f"config_schema must be an attrs class (@attrs.define), got {short(schema)}",
    )
    return None


def _check_unknown_option_refused(ctx: CheckContext) -> None:
    """An option the schema does not declare must be refused with an ``InteractionsError``."""
    try:
        ctx.target.cls({**ctx.config, UNKNOWN_OPTION: 1})
    except InteractionsError:
        return
    except Exception as exc:
        ctx.add(
            "config",
            f"an unknown config option made __init__ raise {exc.__class__.__name__} "
            "instead of ConfigError (call super().__init__(config) so the schema is applied)",
        )
        return
    ctx.add(
        "config",
        f"config_schema is declared but the unknown option {UNKNOWN_OPTION!r} was "
        "accepted (call super().__init__(config) so the schema is applied)",
    )


# -- the instance-id contract: ``lifecycle``, ``unknown_session``, ``reuse`` ----------


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
