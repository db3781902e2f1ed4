"""One conformance run's shared state, and how every check calls the plugin.

Every check needs the same few things: the target and its episodes, a way to
call one lifecycle method under the time limit (and the ``blocking`` watch),
and a way to record what it found. :class:`CheckContext` holds them, so each
check is a plain function of the context; the wording shared by many messages
(:func:`describe_exc`, :func:`short`) lives here too.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Mapping
from typing import Any

from ._check_blocking import BLOCKING_LIMIT, LoopWatch
from .report import ConformanceReport
from .target import Episode, Target

__all__ = ["CheckContext", "bounded", "describe_exc", "new_id", "short"]


def describe_exc(exc: BaseException) -> str:
    """``raised ValueError: first line`` (or the timeout said plainly), for a message."""
    if isinstance(exc, asyncio.TimeoutError):
        return "did not return in time (timeout)"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
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
        return await asyncio.wait_for(value, timeout)
    return value


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
