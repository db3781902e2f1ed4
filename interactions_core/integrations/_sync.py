"""Calling an interaction from synchronous code: inline, or on the one shared loop.

Some trainers (SkyRL) call their environments synchronously, from many executor
threads at once, while an interaction's lifecycle is ``async``. Starting an event
loop per environment, or a thread per step, costs more than the turn itself, and
an interaction instance shared by every environment may hold loop-bound objects
(an HTTP client, a lock). So each interaction is called one of two ways, chosen
once per instance by :class:`Caller`:

* **inline**, in the calling thread, when nothing in its lifecycle can suspend: a
  :class:`~interactions_core.SessionInteraction` whose ``respond`` and ``score``
  are plain ``def`` (the documented way to write an interaction that only
  computes) and whose lifecycle methods are the base class's. Its coroutines then
  finish on their first step, so they are driven to the end without any loop,
  under a lock per instance: the interaction sees one call at a time, as it would
  on a loop;
* **on the shared loop** otherwise: one event loop per process, in one daemon
  thread, started on first use and shared by every caller
  (``asyncio.run_coroutine_threadsafe``). A child process made by ``fork`` starts
  a loop of its own when it first needs one.

Either way the caller runs the runtime's own coroutines (the session and the
episode step), so nothing of the episode's logic is written twice.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .. import SessionInteraction

__all__ = ["Caller", "computes_only", "shared_loop"]

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """This process's background event loop, started in a daemon thread on first use."""
    global _loop
    loop = _loop
    if loop is not None:
        return loop
    with _loop_lock:
        if _loop is None:
            new = asyncio.new_event_loop()
            thread = threading.Thread(
                target=new.run_forever, name="interactions-shared-loop", daemon=True
            )
            thread.start()
            _loop = new
        return _loop


def _forget_loop() -> None:
    """In a forked child the loop's thread does not exist: start afresh when needed."""
    global _loop, _loop_lock
    _loop = None
    _loop_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loop)

#: The lifecycle methods an inline interaction must inherit unchanged.
_LIFECYCLE = ("start_interaction", "generate_response", "calculate_score", "finalize_interaction")


def computes_only(interaction: Any) -> bool:
    """Whether no lifecycle call of ``interaction`` can suspend (see the module docstring)."""
    if not isinstance(interaction, SessionInteraction):
        return False
    cls = type(interaction)
    if any(getattr(cls, m) is not getattr(SessionInteraction, m) for m in _LIFECYCLE):
        return False
    hooks = (cls.new_session, cls.respond, cls.score, cls.end_session)
    return not any(inspect.iscoroutinefunction(h) for h in hooks)


def _run_to_end(coro: Coroutine[Any, Any, T]) -> T:
    """Drive ``coro``, which must finish without suspending, and return its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(
        "an interaction call suspended although its class computes only; write "
        "respond/score as `async def` when they await something"
    )


class Caller:
    """Runs one interaction's coroutines for synchronous code (see the module docstring)."""

    __slots__ = ("inline", "interaction", "lock")

    def __init__(self, interaction: Any) -> None:
        self.interaction = interaction
        self.inline = computes_only(interaction)
        self.lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` to its end and return its result (``timeout`` in seconds, loop only).

        Must not be called from the shared loop's own thread (it would wait on itself).
        """
        if self.inline:
            with self.lock:
                return _run_to_end(coro)
        loop = shared_loop()
        if _running_loop() is loop:
            coro.close()
            raise RuntimeError("a synchronous interaction call cannot be made from the shared loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` without waiting for it (safe from a garbage-collector callback)."""
        asyncio.run_coroutine_threadsafe(self._locked(coro), shared_loop())

    async def _locked(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if not self.inline:
            return await coro
        with self.lock:  # held briefly: inline calls never wait on anything
            return _run_to_end(coro)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
