"""What every check shares (``_context.py``): timed calls, recording, the wording of messages."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from checker_fakes import ExactInteraction

from interactions_core.testing import ConformanceReport, Episode
from interactions_core.testing._rules import (
    CheckContext,
    Target,
    bounded,
    describe_exc,
    new_id,
    short,
)


def context(obj: Any = None, timeout: float | None = 1.0) -> CheckContext:
    cls = type(obj) if obj is not None else ExactInteraction
    target = Target("label", cls, lambda: obj if obj is not None else cls({}), shared=False)
    episodes = [Episode(["#### 1"], {"ground_truth": "1"})]
    return CheckContext(target, {"max_attempts": 2}, episodes, ConformanceReport("label"), timeout)


def test_describe_exc_says_the_type_and_the_first_line() -> None:
    assert describe_exc(ValueError("bad\nmore")) == "raised ValueError: bad"
    assert describe_exc(KeyError()) == "raised KeyError"
    assert describe_exc(asyncio.TimeoutError()) == "did not return in time (timeout)"


def test_short_cuts_long_values() -> None:
    assert short("abc") == "'abc'"
    assert short("x" * 100) == repr("x" * 100)[:57] + "..."
    assert len(short(list(range(100)))) == 60


def test_new_ids_are_tagged_and_unique() -> None:
    first, second = new_id("episode1"), new_id("episode1")
    assert first.startswith("conformance-episode1-") and first != second


async def test_bounded_awaits_with_a_limit_and_passes_plain_values() -> None:
    assert await bounded(41, 0.01) == 41
    assert await bounded(asyncio.sleep(0, "done"), None) == "done"
    with pytest.raises(asyncio.TimeoutError):
        await bounded(asyncio.sleep(1), 0.01)


class Slow:
    async def generate_response(self, instance_id: str, messages: Any) -> Any:
        time.sleep(0.3)
        return None

    async def calculate_score(self, instance_id: str) -> float:
        await asyncio.sleep(1)
        return 0.0


async def test_a_call_that_holds_the_loop_is_recorded_once_per_method() -> None:
    ctx = context(Slow())
    await ctx.call(Slow(), "generate_response", "id", [])
    await ctx.call(Slow(), "generate_response", "id", [])
    [violation] = ctx.report.violations
    assert violation.check == "blocking"
    assert "Slow.generate_response held the event loop for 0.3" in violation.message
    assert ctx.report.format().count("(and 1 more time)") == 1


async def test_a_call_past_the_time_limit_raises_a_timeout() -> None:
    ctx = context(Slow(), timeout=0.05)
    with pytest.raises(asyncio.TimeoutError):
        await ctx.call(Slow(), "calculate_score", "id")
    assert ctx.report.ok


async def test_a_failing_finalize_is_a_results_violation_not_an_exception() -> None:
    class FailsToFinalize(ExactInteraction):
        async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
            raise OSError("disk full")

    ctx = context(FailsToFinalize({}))
    await ctx.finalize(FailsToFinalize({}), "some-id", "after a test")
    assert [str(v) for v in ctx.report.violations] == [
        "[results] finalize_interaction raised OSError: disk full (first seen after a test)"
    ]


def test_instance_and_config_come_from_the_target() -> None:
    ctx = context()
    assert isinstance(ctx.instance(), ExactInteraction)
    assert ctx.instance() is not ctx.instance()
    assert ctx.config == {"max_attempts": 2}
