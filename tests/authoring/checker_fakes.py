"""Reference interactions for the conformance checker's tests: two that keep every rule.

The broken variants in each ``test_check_*.py`` subclass these, so each breaks
exactly the rule its test names.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from interactions_core import (
    BaseInteraction,
    InteractionResult,
    InteractionsError,
    SessionInteraction,
)
from interactions_core.errors import ConformanceError
from interactions_core.testing import ConformanceReport, check_interaction


@attrs.define
class ExactConfig:
    max_attempts: int = 3


class ExactInteraction(SessionInteraction):
    """Correct when the last assistant message equals the ground truth."""

    config_schema = ExactConfig

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> dict[str, Any]:
        return {"truth": str(ground_truth), "attempts": 0, "score": 0.0}

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        text = next(
            (m.get("content") for m in reversed(messages) if m.get("role") == "assistant"), None
        )
        state["attempts"] += 1
        if isinstance(text, str) and text.strip().endswith(state["truth"]):
            state["score"] = 1.0
            return InteractionResult(True, "correct", 1.0)
        done = state["attempts"] >= self.settings.max_attempts
        return InteractionResult(done, "try again", 0.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return state["score"]


class VerlStyleInteraction(BaseInteraction):
    """verl's way, done right: a per-instance dict keyed by id, cleaned up on finalize."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._instance_dict: dict[str, dict[str, Any]] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        from interactions_core import SessionError

        instance_id = await super().start_interaction(instance_id)
        if instance_id in self._instance_dict:
            raise SessionError(f"session {instance_id!r} is live")
        self._instance_dict[instance_id] = {"truth": str(kwargs.get("ground_truth"))}
        return instance_id

    def _state(self, instance_id: str) -> dict[str, Any]:
        from interactions_core import SessionError

        try:
            return self._instance_dict[instance_id]
        except KeyError:
            raise SessionError(f"no session {instance_id!r}") from None

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kw: Any):
        state = self._state(instance_id)
        last = messages[-1].get("content") if messages else None
        ok = isinstance(last, str) and last.endswith(state["truth"])
        state["score"] = 1.0 if ok else 0.0
        return ok, "yes" if ok else "no", state["score"], {}

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        return float(self._state(instance_id).get("score", 0.0))

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self._instance_dict.pop(instance_id, None)


def checks_failed(report: ConformanceReport) -> set[str]:
    """The names of the checks with at least one violation."""
    return {v.check for v in report.violations}


def assert_reported(cls: type, check: str, fragment: str) -> ConformanceError:
    """Check ``cls``: it must fail with a ``check`` violation whose report says ``fragment``."""
    with pytest.raises(ConformanceError) as info:
        check_interaction(cls)
    error = info.value
    assert check in {v.check for v in error.violations}, str(error)
    assert fragment in str(error)
    assert isinstance(error, InteractionsError) and isinstance(error, AssertionError)
    return error
