"""Test doubles that run inside verl's worker: a tool, and interactions that misbehave."""

from __future__ import annotations

from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse

from interactions_core import InteractionResult, SessionInteraction

WEATHER_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city"}},
            "required": ["city"],
        },
    },
}


class WeatherTool(BaseTool):
    """A verl tool answering a fixed forecast; counts its calls."""

    calls: list[dict[str, Any]] = []

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        WeatherTool.calls.append(dict(parameters))
        return ToolResponse(text=f"Sunny, 21 C in {parameters.get('city')}"), 0.0, {}


class RaisingInteraction(SessionInteraction):
    """Judges like a strict checker, but raises when the answer says 'boom'."""

    def new_session(self, **kwargs: Any) -> Any:
        if kwargs.get("ground_truth") == "explode":
            raise ValueError("cannot start a session for this sample")
        return kwargs.get("ground_truth")

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        text = str(messages[-1].get("content") or "")
        if "boom" in text:
            raise RuntimeError("the judge crashed on this answer")
        if "exit" in text:
            raise SystemExit(3)  # a library calling sys.exit inside the judge
        if "cancel" in text:
            import asyncio

            raise asyncio.CancelledError("raised by the plugin, not a real cancellation")
        correct = text.strip().endswith(str(state))
        return InteractionResult(correct, "ok" if correct else "again", 1.0 if correct else 0.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return 0.5


class CountingInteraction(SessionInteraction):
    """Counts how many instances were built: verl builds one loop per trajectory."""

    built = 0

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        CountingInteraction.built += 1

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return InteractionResult(True, "thanks", 1.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return 1.0


class RecordingInteraction(SessionInteraction):
    """Keeps the messages of every turn it judges; ends the episode with full marks."""

    seen: list[list[dict[str, Any]]] = []

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        RecordingInteraction.seen.append([dict(message) for message in messages])
        return InteractionResult(True, "thanks", 1.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return 1.0
