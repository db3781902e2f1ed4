"""Session: the lifecycle is owned, errors name their source, finalize always runs."""

from __future__ import annotations

import asyncio

import pytest
from runtime_fakes import Faulty, Recorder

from interactions_core._interaction import InteractionResult
from interactions_core.runtime import InteractionCallError, Session, SessionTracker


async def test_lifecycle_and_tracker() -> None:
    interaction = Recorder({"name": "rec"})
    tracker = SessionTracker()
    async with Session(interaction, instance_id="s-1", tracker=tracker) as session:
        assert await session.start(answer="42") == "s-1"
        assert tracker.open == 1 and session.is_open
        result = await session.respond([{"role": "assistant", "content": "42"}])
        assert result == InteractionResult(True, "right", 1.0)
        assert await session.score() == 0.5
    assert tracker.open == 0 and tracker.started == tracker.finalized == 1
    assert interaction.finalized == ["s-1"] and interaction.open_sessions == 0
    assert interaction.calls[0] == ("start", "s-1", {"answer": "42"})
    # kwargs given to start are passed again, as verl does
    assert interaction.calls[1] == ("generate", "", {"answer": "42"})


async def test_interaction_chooses_the_id_when_none_is_given() -> None:
    async with Session(Recorder()) as session:
        sid = await session.start()
        assert sid and session.instance_id == sid


async def test_finalize_runs_when_the_block_raises() -> None:
    interaction = Recorder()
    with pytest.raises(ZeroDivisionError):
        async with Session(interaction, instance_id="x") as session:
            await session.start()
            1 / 0  # noqa: B018
    assert interaction.open_sessions == 0


async def test_errors_name_interaction_session_and_method() -> None:
    async with Session(Faulty({"name": "faulty"}), instance_id="s-9") as session:
        await session.start(fault="generate")
        with pytest.raises(InteractionCallError) as info:
            await session.respond([{"role": "assistant", "content": "x"}])
    message = str(info.value)
    assert "'faulty'" in message and "'s-9'" in message and "generate_response" in message
    assert "ValueError: boom in generate" in message
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.method == "generate_response"


async def test_start_failure_is_wrapped_and_nothing_stays_open() -> None:
    tracker = SessionTracker()
    session = Session(Faulty(), instance_id="s", tracker=tracker)
    with pytest.raises(InteractionCallError, match="start_interaction raised RuntimeError"):
        await session.start(fault="start")
    assert tracker.open == 0 and not session.is_open


async def test_timeout_is_an_error_for_the_call() -> None:
    interaction = Faulty({"name": "slow"})
    async with Session(interaction, instance_id="t", timeout=0.05) as session:
        await session.start(fault="hang")
        with pytest.raises(
            InteractionCallError, match=r"generate_response timed out after 0\.05 s"
        ):
            await session.respond([{"role": "assistant", "content": "x"}])
    assert interaction.open_sessions == 0


async def test_tuples_are_coerced_and_bad_results_reported() -> None:
    async with Session(Faulty(), instance_id="a") as session:
        await session.start(fault="tuple")
        result = await session.respond([])
        assert type(result) is InteractionResult and result.score == 1.0
    async with Session(Faulty({"name": "f"}), instance_id="b") as session:
        await session.start(fault="bad")
        with pytest.raises(InteractionCallError, match="raised TypeError"):
            await session.respond([])


async def test_score_must_be_a_number() -> None:
    async with Session(Faulty(), instance_id="c") as session:
        await session.start(fault="score")
        with pytest.raises(InteractionCallError, match="calculate_score raised KeyError"):
            await session.score()


async def test_finalize_error_is_returned_once_and_raised_by_the_block() -> None:
    tracker = SessionTracker()
    session = Session(Faulty({"name": "f"}), instance_id="d", tracker=tracker)
    await session.start(fault="finalize")
    error = await session.finalize()
    assert isinstance(error, InteractionCallError) and error.method == "finalize_interaction"
    assert await session.finalize() is None  # idempotent
    assert tracker.open == 0
    with pytest.raises(InteractionCallError, match="finalize_interaction raised OSError"):
        async with Session(Faulty(), instance_id="e") as again:
            await again.start(fault="finalize")


async def test_cancellation_finalizes() -> None:
    interaction = Faulty()
    tracker = SessionTracker()
    started = asyncio.Event()

    async def episode() -> None:
        async with Session(interaction, instance_id="z", tracker=tracker) as session:
            await session.start(fault="hang")
            started.set()
            await session.respond([])

    task = asyncio.ensure_future(episode())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tracker.open == 0 and interaction.open_sessions == 0


async def test_calls_on_a_closed_session_are_errors() -> None:
    session = Session(Recorder(), instance_id="q")
    with pytest.raises(InteractionCallError, match="not started"):
        await session.respond([])
    await session.start()
    await session.finalize()
    with pytest.raises(InteractionCallError, match="finalized"):
        await session.score()
    with pytest.raises(ValueError, match="timeout"):
        Session(Recorder(), timeout=0)
