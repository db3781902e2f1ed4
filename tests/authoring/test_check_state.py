"""The ``state`` check (``_check_state.py``): nothing of a finished session stays behind."""

from __future__ import annotations

from typing import Any

from checker_fakes import ExactInteraction, VerlStyleInteraction, assert_reported

from interactions_core.testing import check_interaction
from interactions_core.testing._rules_play import holding, open_sessions, sizes


class LeakyInteraction(VerlStyleInteraction):
    """Forgets to drop the session on finalize (verl's bug)."""

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        return None


def test_leaky_state_is_reported() -> None:
    assert_reported(LeakyInteraction, "state", "'_instance_dict'")


def test_leaky_state_names_the_finished_ids_it_holds() -> None:
    report = check_interaction(LeakyInteraction, raise_on_error=False)
    messages = [v.message for v in report.violations if v.check == "state"]
    assert any("grew from" in m for m in messages)
    assert any("still holds" in m for m in messages)


def test_open_sessions_must_return_to_zero() -> None:
    class KeepsSessions(ExactInteraction):
        async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
            return None

    report = check_interaction(KeepsSessions, raise_on_error=False)
    assert any("open_sessions is" in v.message for v in report.violations)


class Holder:
    __slots__ = ("by_id", "count", "nested")

    def __init__(self) -> None:
        self.by_id = {"a": 1, "b": 2}
        self.count = 3
        self.nested = {"cache": [1, 2, 3]}


def test_sizes_sees_slots_and_one_level_inside_dicts() -> None:
    assert sizes(Holder()) == {"by_id": 2, "nested": 1, "nested['cache']": 3}


def test_holding_counts_finished_ids_per_container() -> None:
    assert holding(Holder(), {"a", "z"}) == {"by_id": 1}
    assert holding(Holder(), set()) == {}


def test_open_sessions_is_read_only_when_it_is_a_count() -> None:
    class Counts:
        open_sessions = 2

    class Flag:
        open_sessions = True

    class Broken:
        @property
        def open_sessions(self) -> int:
            raise RuntimeError("no")

    assert open_sessions(Counts()) == 2
    assert open_sessions(Flag()) is None
    assert open_sessions(Broken()) is None
    assert open_sessions(object()) is None
