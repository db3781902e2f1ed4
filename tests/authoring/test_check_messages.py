"""The ``messages`` check (``_check_messages.py``): odd conversations get an answer, not a crash."""

from __future__ import annotations

from typing import Any

import pytest
from checker_fakes import ExactInteraction

from interactions_core import InteractionResult, InteractionsError
from interactions_core.errors import ConformanceError
from interactions_core.testing import check_interaction
from interactions_core.testing._rules_play import odd_conversations


class CrashOnNoneInteraction(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        text = messages[-1]["content"]
        return InteractionResult(False, text.strip(), 0.0)  # crashes on None / lists / []


class RefusesClearly(ExactInteraction):
    """Refuses anything but text with a framework error: that is allowed."""

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        if not messages or not isinstance(messages[-1].get("content"), str):
            raise InteractionsError("this interaction needs a text answer")
        return await super().respond(state, messages, **kwargs)


class EditsTheConversation(ExactInteraction):
    """Appends to the list it is given (allowed, if unusual)."""

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        messages.append({"role": "user", "content": "seen"})
        return InteractionResult(False, "ok", 0.0)


def test_a_crash_is_reported_for_each_odd_conversation() -> None:
    with pytest.raises(ConformanceError) as info:
        check_interaction(CrashOnNoneInteraction)
    messages = [v.message for v in info.value.violations if v.check == "messages"]
    assert "assistant content None" in str(info.value)
    assert len(messages) == 3, messages  # [], None content, a list of parts
    assert all(m.endswith("return a result or raise an InteractionsError") for m in messages)


def test_a_clear_refusal_is_not_a_violation() -> None:
    report = check_interaction(RefusesClearly, raise_on_error=False)
    assert report.ok, report.format()


def test_every_run_gets_conversations_of_its_own() -> None:
    first = odd_conversations()
    first[0][1].append({"role": "user", "content": "edited"})
    assert odd_conversations()[0][1] == []
    report = check_interaction(EditsTheConversation, skip=["isolation"], raise_on_error=False)
    assert "messages" not in {v.check for v in report.violations}, report.format()
    assert [label for label, _ in odd_conversations()] == [
        "an empty conversation",
        "no assistant turn yet",
        "assistant content None",
        "assistant content as a list of parts",
    ]


class NeedsKwargsEveryTurn(ExactInteraction):
    """Reads the ground truth from each call's kwargs, and refuses a turn without it."""

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        truth = kwargs["ground_truth"]  # a KeyError here is a crash the check would report
        text = messages[-1].get("content") if messages else None
        ok = isinstance(text, str) and text.endswith(str(truth))
        return InteractionResult(ok, "yes" if ok else "no", 1.0 if ok else 0.0)


def test_odd_conversations_get_the_interaction_kwargs_as_in_a_run() -> None:
    report = check_interaction(NeedsKwargsEveryTurn, raise_on_error=False)
    assert report.ok, report.format()
