"""The conformance checker's entry points (``checker.py``): targets, options, the whole report.

Each group of rules has its own test module beside this one (``test_check_*.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from checker_fakes import ExactInteraction, VerlStyleInteraction, checks_failed

from interactions_core import BaseInteraction, InteractionResult, InteractionsError
from interactions_core.registry import Registry
from interactions_core.testing import CHECKS, Episode, check_interaction, run_sync
from interactions_core.testing.checker import acheck_interaction

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


# -- reporting ---------------------------------------------------------------------------


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
    failed = checks_failed(report)
    expected = {"spec", "lifecycle", "scores", "messages", "unknown_session", "reuse", "state"}
    assert expected <= failed, report.format()
    assert "isolation" in failed
    text = report.format()
    assert text.count("\n  - ") == len(report.violations)
    assert "finalize_interaction is not async" in text


def test_skip_leaves_checks_out() -> None:
    class IntScoreInteraction(ExactInteraction):
        async def score(self, state: Any, **kwargs: Any) -> float:
            return 0  # type: ignore[return-value]

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


def test_episodes_given_in_the_config_slot_get_a_clear_message() -> None:
    with pytest.raises(TypeError, match="pass scripted episodes by keyword"):
        check_interaction(ExactInteraction, [Episode(["#### 1"], {"ground_truth": "1"})])  # type: ignore[arg-type]


@pytest.mark.parametrize("form", ["check_interaction", "acheck_interaction"])
def test_an_unknown_option_is_refused_like_a_misspelt_keyword(form: str) -> None:
    with pytest.raises(
        TypeError, match=rf"^{form}\(\) got an unexpected keyword argument 'timout'$"
    ):
        if form == "check_interaction":
            check_interaction(ExactInteraction, timout=1.0)  # type: ignore[call-arg]
        else:
            run_sync(acheck_interaction(ExactInteraction, timout=1.0))  # type: ignore[call-arg]


def test_both_forms_share_one_declaration_of_the_options() -> None:
    from interactions_core.testing.checker import _DEFAULTS, CheckOptions

    assert set(_DEFAULTS) == set(CheckOptions.__annotations__)
    assert _DEFAULTS["timeout"] == 10.0 and _DEFAULTS["raise_on_error"] is True


def test_the_default_time_limit_lets_a_slow_call_finish() -> None:
    import asyncio

    class Slow(ExactInteraction):
        async def score(self, state: Any, **kwargs: Any) -> float:
            await asyncio.sleep(0.2)
            return 1.0

    steps = ["isolation", "state", "messages", "lifecycle", "unknown_session", "reuse"]
    assert check_interaction(Slow, skip=steps).ok
    report = check_interaction(Slow, skip=steps, timeout=0.05, raise_on_error=False)
    assert "did not return in time (timeout)" in report.format()


def test_the_rules_table_in_the_docs_names_every_check_in_order() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    table = text.split("### The conformance checker: the rules", 1)[1].split("\n\n", 2)[1]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == list(CHECKS)
