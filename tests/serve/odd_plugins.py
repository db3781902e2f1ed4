"""An interaction whose feedback holds a lone surrogate, which UTF-8 JSON cannot carry."""

from __future__ import annotations

from typing import Any

from interactions_core._interaction import BaseInteraction, InteractionResult


class Surrogate(BaseInteraction):
    """Feedback ``"odd \\ud800"`` on the first turn; done, with reward 1, on the second."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        if turns >= 2:
            return InteractionResult(True, "done", 1.0)
        return InteractionResult(False, "odd \ud800", 0.0)

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        return 0.5


class HungFinalize(Surrogate):
    """A plugin whose ``finalize_interaction`` never returns."""

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        import asyncio

        await asyncio.sleep(3600)


class Flood(BaseInteraction):
    """Feedback of ``size`` characters (config; 50 MB by default, as reported)."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        return InteractionResult(False, "f" * int(self.config.get("size", 50_000_000)), 0.0)

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0


class Editor(BaseInteraction):
    """Edits the conversation it is handed: rewrites the prompt and appends a long message."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        messages[0]["content"] = "REWRITTEN"
        messages.append({"role": "user", "content": "X" * int(self.config.get("size", 90_000))})
        return InteractionResult(False, "go on", 0.0)

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0
