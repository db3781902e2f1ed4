"""Calling interactions from synchronous threads: inline when they only compute, else one loop.

``interactions_core.integrations`` serves trainers that call environments
synchronously from many threads (SkyRL). What is checked here needs no trainer.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from interactions_core import BaseInteraction, InteractionResult, Session, SessionInteraction
from interactions_core.integrations import Caller, computes_only, shared_loop


class Computing(SessionInteraction):
    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return InteractionResult(False, threading.current_thread().name, 1.0)


class Awaiting(SessionInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        await asyncio.sleep(0.001)
        loop = id(asyncio.get_running_loop())
        return InteractionResult(False, f"{threading.current_thread().name} {loop}", 1.0)


class VerlStyle(BaseInteraction):
    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        return InteractionResult(False, "ok", 1.0)


class OwnLifecycle(Computing):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return await super().start_interaction(instance_id, **kwargs)


def test_only_session_interactions_with_plain_hooks_and_the_base_lifecycle_compute_only() -> None:
    assert computes_only(Computing())
    assert not computes_only(Awaiting())
    assert not computes_only(VerlStyle())  # async generate_response: may await anything
    assert not computes_only(OwnLifecycle())


def _episode(caller: Caller, n: int) -> str:
    session = Session(caller.interaction, instance_id=f"s{n}")
    caller.run(session.start())
    result = caller.run(session.respond([{"role": "assistant", "content": "x"}]))
    assert caller.run(session.finalize()) is None
    return result.content


def test_an_interaction_that_computes_is_called_in_the_callers_thread() -> None:
    caller = Caller(Computing())
    with ThreadPoolExecutor(8, thread_name_prefix="worker") as pool:
        names = list(pool.map(lambda n: _episode(caller, n), range(64)))
    assert all(name.startswith("worker") for name in names)
    assert caller.interaction.open_sessions == 0


def test_an_interaction_that_awaits_runs_on_one_shared_loop_from_every_thread() -> None:
    callers = [Caller(Awaiting()), Caller(Awaiting())]
    with ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(lambda n: _episode(callers[n % 2], n), range(64)))
    assert seen == {f"interactions-shared-loop {id(shared_loop())}"}
    assert all(c.interaction.open_sessions == 0 for c in callers)


def test_calling_from_the_shared_loop_itself_is_refused_not_a_deadlock() -> None:
    caller = Caller(Awaiting())

    async def inside() -> None:
        session = Session(caller.interaction)
        caller.run(session.start())

    with pytest.raises(RuntimeError, match="cannot be made from the shared loop"):
        asyncio.run_coroutine_threadsafe(inside(), shared_loop()).result(5)
