"""The instance-id contract (``_check_ids.py``): ``lifecycle``, ``unknown_session``, ``reuse``."""

from __future__ import annotations

from typing import Any

import pytest
from checker_fakes import ExactInteraction, VerlStyleInteraction, assert_reported

from interactions_core.testing import check_interaction


class OverwritingInteraction(VerlStyleInteraction):
    """Silently overwrites a live session (verl's bug)."""

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        instance_id = instance_id or "generated"
        self._instance_dict[instance_id] = {"truth": str(kwargs.get("ground_truth"))}
        return instance_id


class KeyErrorInteraction(VerlStyleInteraction):
    """Lets a bare KeyError escape for unknown ids."""

    def _state(self, instance_id: str) -> dict[str, Any]:
        return self._instance_dict[instance_id]


class DuplicateIds(VerlStyleInteraction):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return await super().start_interaction(instance_id or "same", **kwargs)


class IgnoresGivenId(ExactInteraction):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return await super().start_interaction(None, **kwargs)


class FinalizeTwiceRaises(VerlStyleInteraction):
    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self._instance_dict.pop(instance_id)


class NeverReleasesIds(VerlStyleInteraction):
    """Remembers every id it ever saw and refuses to start one again."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._seen: set[str] = set()

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        if instance_id in self._seen:
            raise RuntimeError(f"{instance_id} was used before")
        instance_id = await super().start_interaction(instance_id, **kwargs)
        self._seen.add(instance_id)
        return instance_id


class EmptyGeneratedId(ExactInteraction):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        given = await super().start_interaction(instance_id, **kwargs)
        return given if instance_id is not None else ""


@pytest.mark.parametrize(
    ("cls", "check", "fragment"),
    [
        (OverwritingInteraction, "reuse", "accepted silently"),
        (KeyErrorInteraction, "unknown_session", "raised KeyError"),
        (DuplicateIds, "lifecycle", "start_interaction(None)"),
        (IgnoresGivenId, "lifecycle", "must return the instance_id it was given"),
        (FinalizeTwiceRaises, "unknown_session", "finalize_interaction"),
        (NeverReleasesIds, "reuse", "could not be started again after it was finalized"),
        (EmptyGeneratedId, "lifecycle", "returned ''; it must return a new, non-empty str id"),
    ],
)
def test_each_broken_rule_is_reported(cls: type, check: str, fragment: str) -> None:
    assert_reported(cls, check, fragment)


def test_a_second_finalize_must_be_a_no_op() -> None:
    report = check_interaction(FinalizeTwiceRaises, raise_on_error=False)
    messages = [v.message for v in report.violations if v.check == "unknown_session"]
    assert any(
        m.startswith("finalize_interaction called twice for one session raised KeyError")
        for m in messages
    )
    assert any(
        "finalize_interaction on an unknown instance_id raised KeyError" in m for m in messages
    )


def test_a_misrouted_turn_names_the_call_and_the_fix() -> None:
    report = check_interaction(KeyErrorInteraction, raise_on_error=False)
    messages = [v.message for v in report.violations if v.check == "unknown_session"]
    assert messages[0].startswith(
        "generate_response on an instance_id that was never started raised KeyError"
    )
    assert messages[0].endswith(
        "raise interactions_core.SessionError (SessionInteraction does this for you)"
    )
    assert any(
        m.startswith("calculate_score on an instance_id that was never started") for m in messages
    )
