"""A plugin that edits ``messages`` in place cannot change what the record or the policy sees."""

from __future__ import annotations

from typing import Any

from runtime_fakes import sample

from interactions_core._interaction import InteractionResult, SessionInteraction
from interactions_core.runtime import EpisodeLoop


class Editor(SessionInteraction):
    """Rewrites, appends to and reorders the list it is given, then asks for another turn."""

    async def respond(
        self, state: Any, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        messages[0]["content"] = "EDITED BY THE PLUGIN"
        messages[-1]["role"] = "system"
        messages.append({"role": "user", "content": "smuggled"})
        return InteractionResult(False, "try again", 0.0)


class Watcher:
    """A policy that remembers a copy of every conversation it was asked to continue."""

    def __init__(self) -> None:
        self.saw: list[list[dict[str, Any]]] = []

    def start(self, sample: Any) -> list[str]:
        return ["first", "second"]

    def reply(self, state: list[str], messages: list[dict[str, Any]]) -> str | None:
        self.saw.append([dict(m) for m in messages])
        return state.pop(0) if state else None


async def test_the_record_shows_the_conversation_the_policy_saw() -> None:
    policy = Watcher()
    loop = EpisodeLoop(policy, {"editor": Editor()})
    record = await loop.run(sample(kwargs={"name": "editor"}))
    assert record.errors == [] and record.end_reason == "exhausted"
    expected = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": "try again"},
        {"role": "assistant", "content": "second"},
        {"role": "user", "content": "try again"},
    ]
    assert record.messages == expected
    assert policy.saw[-1] == expected  # the policy's last look: the same conversation
    assert policy.saw[1] == expected[:3]
