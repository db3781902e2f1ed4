"""The conformance checker: clean interactions pass, each broken rule is reported, all at once."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest

from interactions_core import (
    BaseInteraction,
    ConfigError,
    InteractionResult,
    InteractionsError,
    Registry,
    SessionInteraction,
)
from interactions_core.errors import ConformanceError
from interactions_core.testing import CHECKS, ConformanceReport, Episode, check_interaction
from interactions_core.testing.checker import acheck_interaction

# -- reference implementations --------------------------------------------------------


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


def _checks_failed(report: ConformanceReport) -> set[str]:
    return {v.check for v in report.violations}


# -- clean targets ----------------------------------------------------------------------


@pytest.mark.parametrize("target", [ExactInteraction, VerlStyleInteraction])
def test_clean_class_passes_every_check(target: type) -> None:
    report = check_interaction(target)
    assert report.ok, report.format()
    assert report.checks_run == list(CHECKS)
    assert f"passed {len(CHECKS)} conformance checks" in report.format()


def test_instance_target_uses_that_instance() -> None:
    instance = ExactInteraction({"name": "exact", "max_attempts": 2})
    report = check_interaction(instance)
    assert report.ok, report.format()
    assert instance.open_sessions == 0
    assert "instance of" in report.label


def test_registered_name_resolves_in_the_given_registry() -> None:
    registry = Registry.from_classes({"exact": ExactInteraction})
    report = check_interaction("exact", {"max_attempts": 1}, registry=registry)
    assert report.ok
    assert "'exact'" in report.label


def test_unknown_name_is_not_a_conformance_problem() -> None:
    registry = Registry.from_classes({"exact": ExactInteraction})
    with pytest.raises(InteractionsError, match="did you mean 'exact'"):
        check_interaction("exakt", registry=registry)


async def test_async_form_runs_on_the_callers_loop() -> None:
    report = await acheck_interaction(ExactInteraction)
    assert report.ok


async def test_sync_form_works_inside_a_running_loop() -> None:
    assert check_interaction(ExactInteraction).ok


def test_custom_episodes_accept_mappings_and_tuples() -> None:
    episodes = [
        {"replies": ["no", "x"], "kwargs": {"ground_truth": "x"}},
        (["y"], {"ground_truth": "y"}),
        Episode(["z"], {"ground_truth": "q"}),
    ]
    assert check_interaction(ExactInteraction, episodes=episodes).ok


def test_bad_arguments_are_refused_early() -> None:
    with pytest.raises(ValueError, match="unknown check"):
        check_interaction(ExactInteraction, skip=["speling"])
    with pytest.raises(ValueError, match="episodes is empty"):
        check_interaction(ExactInteraction, episodes=[])
    with pytest.raises(TypeError, match="episodes must be"):
        check_interaction(ExactInteraction, episodes=["just a string"])


# -- one broken rule at a time --------------------------------------------------------------


class SharedStateInteraction(SessionInteraction):
    """Keeps the ground truth on the shared instance: sessions see each other's."""

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> None:
        self.truth = str(ground_truth)

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        ok = str(messages[-1].get("content", "")).endswith(self.truth)
        return InteractionResult(ok, "", 1.0 if ok else 0.0)


class LeakyInteraction(VerlStyleInteraction):
    """Forgets to drop the session on finalize (verl's bug)."""

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        return None


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


class IntScoreInteraction(ExactInteraction):
    async def score(self, state: Any, **kwargs: Any) -> float:
        return 0  # type: ignore[return-value]


class NanScoreInteraction(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        return InteractionResult(False, "", float("nan"))


class WrongShapeInteraction(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        return ("not", "a", "result")


class CrashOnNoneInteraction(ExactInteraction):
    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        text = messages[-1]["content"]
        return InteractionResult(False, text.strip(), 0.0)  # crashes on None / lists / []


class IgnoresSchemaInteraction(BaseInteraction):
    config_schema = ExactConfig

    def __init__(self, config: dict[str, Any] | None = None) -> None:  # no super().__init__
        self.config = dict(config or {})
        self._sessions: dict[str, Any] = {}

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kw: Any):
        return InteractionResult(True, "", 0.0)


class NotAttrsSchema(ExactInteraction):
    config_schema = dict  # type: ignore[assignment]


class BrokenInit(ExactInteraction):
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        raise RuntimeError("needs a GPU")


class DuplicateIds(VerlStyleInteraction):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return await super().start_interaction(instance_id or "same", **kwargs)


class IgnoresGivenId(ExactInteraction):
    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return await super().start_interaction(None, **kwargs)


class FinalizeTwiceRaises(VerlStyleInteraction):
    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self._instance_dict.pop(instance_id)


@pytest.mark.parametrize(
    ("cls", "check", "fragment"),
    [
        (SharedStateInteraction, "isolation", "sessions share state"),
        (LeakyInteraction, "state", "'_instance_dict'"),
        (OverwritingInteraction, "reuse", "accepted silently"),
        (KeyErrorInteraction, "unknown_session", "raised KeyError"),
        (IntScoreInteraction, "scores", "calculate_score's result is an int"),
        (NanScoreInteraction, "scores", "not finite"),
        (WrongShapeInteraction, "results", "must return (should_terminate"),
        (CrashOnNoneInteraction, "messages", "assistant content None"),
        (IgnoresSchemaInteraction, "config", "was accepted"),
        (NotAttrsSchema, "config", "must be an attrs class"),
        (BrokenInit, "config", "needs a GPU"),
        (DuplicateIds, "lifecycle", "start_interaction(None)"),
        (IgnoresGivenId, "lifecycle", "must return the instance_id it was given"),
        (FinalizeTwiceRaises, "unknown_session", "finalize_interaction"),
    ],
)
def test_each_broken_rule_is_reported(cls: type, check: str, fragment: str) -> None:
    with pytest.raises(ConformanceError) as info:
        check_interaction(cls)
    error = info.value
    assert check in {v.check for v in error.violations}, str(error)
    assert fragment in str(error)
    assert isinstance(error, InteractionsError) and isinstance(error, AssertionError)


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


def test_every_violation_is_reported_not_only_the_first() -> None:
    class Everything:
        """verl's original shape with most of its bugs."""

        def __init__(self, config: dict[str, Any]) -> None:
            self._instance_dict: dict[Any, Any] = {}
            self.current: Any = None

        async def start_interaction(self, instance_id=None, **kwargs):
            self._instance_dict[instance_id] = kwargs
            self.current = kwargs.get("ground_truth")
            return instance_id

        async def generate_response(self, instance_id, messages, **kwargs):
            ok = self.current in messages[-1]["content"]
            return ok, "", 1 if ok else 0, {}

        async def calculate_score(self, instance_id, **kwargs):
            return 0

        def finalize_interaction(self, instance_id, **kwargs):
            pass

    report = check_interaction(Everything, raise_on_error=False)
    failed = _checks_failed(report)
    expected = {"spec", "lifecycle", "scores", "messages", "unknown_session", "reuse", "state"}
    assert expected <= failed, report.format()
    assert "isolation" in failed
    text = report.format()
    assert text.count("\n  - ") == len(report.violations)
    assert "finalize_interaction is not async" in text


def test_skip_leaves_checks_out() -> None:
    report = check_interaction(IntScoreInteraction, skip=["scores"], raise_on_error=False)
    assert report.ok, report.format()
    assert "scores" not in report.checks_run


def test_missing_methods_are_reported_without_playing() -> None:
    class Half:
        def __init__(self, config: Any) -> None:
            pass

        async def start_interaction(self, instance_id=None, **kwargs):
            return "x"

    report = check_interaction(Half, raise_on_error=False)
    assert {v.check for v in report.violations} == {"spec"}
    assert sum("is missing" in v.message for v in report.violations) == 3
    assert any("no episode was played" in n for n in report.notes)


def test_unloadable_registered_name_reports_spec_problems() -> None:
    class Sync(BaseInteraction):
        def generate_response(self, instance_id, messages, **kwargs):  # type: ignore[override]
            return InteractionResult(True, "", 0.0)

    registry = Registry.from_classes({"sync": Sync})
    report = check_interaction("sync", registry=registry, raise_on_error=False)
    assert report.violations[0].check == "spec"
    assert "generate_response is not async" in report.violations[0].message
    # BaseInteraction keeps no sessions, so the dynamic checks find more
    assert "unknown_session" in {v.check for v in report.violations}


def test_hanging_call_is_a_violation_not_a_hang() -> None:
    import asyncio

    class Hangs(ExactInteraction):
        async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
            await asyncio.sleep(60)
            return InteractionResult(True, "", 0.0)

    report = check_interaction(
        Hangs, timeout=0.05, skip=["isolation", "state", "messages"], raise_on_error=False
    )
    assert any("timeout" in v.message for v in report.violations), report.format()


def test_clean_report_notes_a_missing_schema() -> None:
    report = check_interaction(VerlStyleInteraction)
    assert any("no config_schema" in n for n in report.notes)


def test_isolation_needs_distinct_episodes() -> None:
    report = check_interaction(ExactInteraction, episodes=[Episode(["1"], {"ground_truth": "1"})])
    assert any("isolation not checked" in n for n in report.notes)


def test_config_error_for_unknown_option_is_expected_behaviour() -> None:
    with pytest.raises(ConfigError):
        ExactInteraction({"nope": 1})


def test_a_plugin_that_blocks_the_event_loop_is_reported_by_name() -> None:
    import time as _time

    from interactions_core import BaseInteraction, InteractionResult

    class Sleepy(BaseInteraction):
        """Calls a synchronous client inside an async method."""

        def __init__(self, config: dict | None = None) -> None:
            super().__init__(config or {})
            self.sessions: dict[str, bool] = {}

        async def start_interaction(self, instance_id=None, **kwargs):  # type: ignore[no-untyped-def]
            from interactions_core.errors import SessionError

            instance_id = instance_id or uuid.uuid4().hex
            if instance_id in self.sessions:
                raise SessionError(f"session {instance_id!r} is live")
            self.sessions[instance_id] = True
            return instance_id

        async def generate_response(self, instance_id, messages, **kwargs):  # type: ignore[no-untyped-def]
            from interactions_core.errors import SessionError

            if instance_id not in self.sessions:
                raise SessionError(f"unknown session {instance_id!r}")
            _time.sleep(0.3)
            return InteractionResult(True, "ok", 1.0)

        async def calculate_score(self, instance_id, **kwargs):  # type: ignore[no-untyped-def]
            from interactions_core.errors import SessionError

            if instance_id not in self.sessions:
                raise SessionError(f"unknown session {instance_id!r}")
            return 1.0

        async def finalize_interaction(self, instance_id, **kwargs):  # type: ignore[no-untyped-def]
            self.sessions.pop(instance_id, None)

    report = check_interaction(Sleepy, skip=["isolation", "messages"], raise_on_error=False)
    blocking = [v for v in report.violations if v.check == "blocking"]
    assert len(blocking) == 1, report.format()
    assert "Sleepy.generate_response held the event loop" in blocking[0].message
    assert "asyncio.to_thread" in blocking[0].message
    assert {v.check for v in report.violations} == {"blocking"}, report.format()


def test_episodes_given_in_the_config_slot_get_a_clear_message() -> None:
    with pytest.raises(TypeError, match="pass scripted episodes by keyword"):
        check_interaction(ExactInteraction, [Episode(["#### 1"], {"ground_truth": "1"})])  # type: ignore[arg-type]
