"""Small interactions and policies for the runtime tests (imported by the test files)."""

from __future__ import annotations

import asyncio
from typing import Any

from interactions_core._interaction import BaseInteraction, InteractionResult, SessionInteraction


class Recorder(SessionInteraction):
    """Terminates when the last assistant message equals ``state['answer']``.

    Records every call so tests can check what the runtime passed.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.calls: list[tuple[str, str, Any]] = []
        self.seen: list[list[dict[str, Any]]] = []
        self.finalized: list[str] = []

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        self.calls.append(("start", instance_id or "", dict(kwargs)))
        return await super().start_interaction(instance_id, **kwargs)

    async def respond(
        self, state: Any, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        self.seen.append([dict(m) for m in messages])
        self.calls.append(("generate", "", dict(kwargs)))
        if messages[-1]["content"] == state.get("answer"):
            return InteractionResult(True, "right", 1.0)
        return InteractionResult(False, f"wrong #{len(self.seen)}", 0.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return 0.5

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self.finalized.append(instance_id)
        await super().finalize_interaction(instance_id, **kwargs)


class Faulty(SessionInteraction):
    """Misbehaves according to the sample's ``fault`` kwarg.

    ``fault``: ``"start"`` / ``"generate"`` / ``"score"`` / ``"finalize"`` raise
    there; ``"hang"`` sleeps in generate_response; ``"tuple"`` returns a verl
    4-tuple; ``"bad"`` returns a malformed value; anything else behaves.
    """

    def new_session(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("fault") == "start":
            raise RuntimeError("cannot start")
        return dict(kwargs)

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        fault = state.get("fault")
        if fault == "generate":
            raise ValueError("boom in generate")
        if fault == "hang":
            await asyncio.sleep(3600)
        if fault == "tuple":
            return (True, "ok", 1, None)
        if fault == "bad":
            return "not a result"
        await asyncio.sleep(0)
        return InteractionResult(True, "ok", 1.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        if state.get("fault") == "score":
            raise KeyError("no score")
        return 1.0

    def end_session(self, state: Any) -> None:
        if state.get("fault") == "finalize":
            raise OSError("cannot finalize")


class Plain(BaseInteraction):
    """A verl-style interaction keeping its own dict (to check it is emptied)."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.state: dict[str, Any] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        assert instance_id is not None
        if instance_id in self.state:
            raise RuntimeError("reused id")
        self.state[instance_id] = kwargs
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        return InteractionResult(False, "again", 0.0)

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        del self.state[instance_id]


def sample(
    responses: list[str] | None = None, *, kwargs: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """A verl-shaped sample with recorded ``responses``."""
    row: dict[str, Any] = {"prompt": [{"role": "user", "content": "question"}], **extra}
    if responses is not None:
        row["responses"] = responses
    if kwargs is not None:
        row["extra_info"] = {"interaction_kwargs": kwargs}
    return row
