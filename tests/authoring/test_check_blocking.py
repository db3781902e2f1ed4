"""The ``blocking`` check (``_check_blocking.py``): no call may hold the event loop."""

from __future__ import annotations

import asyncio
import time
import uuid

from interactions_core.testing import check_interaction
from interactions_core.testing._rules import BLOCKING_LIMIT, LoopWatch


async def test_the_watch_measures_how_long_the_loop_was_held() -> None:
    watch = LoopWatch()
    await asyncio.sleep(0.05)  # the loop runs: the ticker keeps the gaps short
    time.sleep(0.3)  # the loop is held
    held = watch.stop()
    assert 0.3 <= held < 1.0


async def test_awaiting_does_not_count_as_holding() -> None:
    watch = LoopWatch()
    await asyncio.sleep(0.3)
    assert watch.stop() < BLOCKING_LIMIT


def test_a_plugin_that_blocks_the_event_loop_is_reported_by_name() -> None:
    from interactions_core import BaseInteraction, InteractionResult

    class Sleepy(BaseInteraction):
        """Calls a synchronous client inside an async method."""

        def __init__(self, config: dict | None = None) -> None:
            super().__init__(config or {})
            self.sessions: dict[str, bool] = {}

        async def start_interaction(self, instance_id=None, **kwargs):  # type: ignore[no-untyped-def]
            from interactions_core.errors import SessionError

            instance_id = instance_id or uuid.uuid4().hex
            if instance_id in self.sessions:
                raise SessionError(f"session {instance_id!r} is live")
            self.sessions[instance_id] = True
            return instance_id

        async def generate_response(self, instance_id, messages, **kwargs):  # type: ignore[no-untyped-def]
            from interactions_core.errors import SessionError

            if instance_id not in self.sessions:
                raise SessionError(f"unknown session {instance_id!r}")
            time.sleep(0.3)
            return InteractionResult(True, "ok", 1.0)

        async def calculate_score(self, instance_id, **kwargs):  # type: ignore[no-untyped-def]
            from interactions_core.errors import SessionError

            if instance_id not in self.sessions:
                raise SessionError(f"unknown session {instance_id!r}")
            return 1.0

        async def finalize_interaction(self, instance_id, **kwargs):  # type: ignore[no-untyped-def]
            self.sessions.pop(instance_id, None)

    report = check_interaction(Sleepy, skip=["isolation", "messages"], raise_on_error=False)
    blocking = [v for v in report.violations if v.check == "blocking"]
    assert len(blocking) == 1, report.format()
    assert "Sleepy.generate_response held the event loop" in blocking[0].message
    assert "asyncio.to_thread" in blocking[0].message
    assert {v.check for v in report.violations} == {"blocking"}, report.format()


def test_a_call_that_blocks_for_ever_is_broken_at_the_timeout() -> None:
    """`timeout` bounded only awaited calls: a `time.sleep(3600)` in a method hung
    `check_interaction` with no word."""
    from checker_fakes import ExactInteraction

    class Stuck(ExactInteraction):
        blocked = False

        async def respond(self, state, messages, **kwargs):  # type: ignore[no-untyped-def]
            if not Stuck.blocked:  # the first call only, so the check goes on quickly
                Stuck.blocked = True
                time.sleep(3600)
            return await super().respond(state, messages, **kwargs)

    started = time.monotonic()
    report = check_interaction(Stuck, timeout=1, raise_on_error=False)
    assert time.monotonic() - started < 600  # an hour before
    assert any("blocked the event loop" in v.message for v in report.violations), report.format()


def test_a_plugin_raising_systemexit_is_a_violation_not_an_exit() -> None:
    from checker_fakes import ExactInteraction

    class Exits(ExactInteraction):
        async def respond(self, state, messages, **kwargs):  # type: ignore[no-untyped-def]
            raise SystemExit(3)

    report = check_interaction(Exits, raise_on_error=False)
    assert any("SystemExit" in v.message for v in report.violations), report.format()
