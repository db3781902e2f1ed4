"""The ``config`` check (``_check_config.py``): the class builds, a declared schema applies."""

from __future__ import annotations

from typing import Any

import pytest
from checker_fakes import ExactConfig, ExactInteraction, VerlStyleInteraction, assert_reported

from interactions_core import BaseInteraction, ConfigError, InteractionResult
from interactions_core.testing import check_interaction
from interactions_core.testing._rules import UNKNOWN_OPTION


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


class RefusesWithKeyError(ExactInteraction):
    """Looks options up itself: an unknown one raises a bare KeyError, not ConfigError."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        if UNKNOWN_OPTION in (config or {}):
            raise KeyError(UNKNOWN_OPTION)
        super().__init__(config)


@pytest.mark.parametrize(
    ("cls", "check", "fragment"),
    [
        (IgnoresSchemaInteraction, "config", "was accepted"),
        (NotAttrsSchema, "config", "must be an attrs class"),
        (BrokenInit, "config", "needs a GPU"),
        (RefusesWithKeyError, "config", "raise KeyError instead of ConfigError"),
    ],
)
def test_each_broken_rule_is_reported(cls: type, check: str, fragment: str) -> None:
    assert_reported(cls, check, fragment)


def test_a_class_that_cannot_be_built_plays_no_episode() -> None:
    report = check_interaction(BrokenInit, {"max_attempts": 2}, raise_on_error=False)
    assert [v.message for v in report.violations] == [
        "the class cannot be built with config {'max_attempts': 2}: raised RuntimeError: "
        "needs a GPU"
    ]
    assert "the class could not be built: no episode was played" in report.notes


def test_with_config_skipped_an_unbuildable_class_is_still_reported() -> None:
    """Nothing runs without an instance, so that one fact is reported even then."""
    report = check_interaction(BrokenInit, skip=["config"], raise_on_error=False)
    assert [str(v) for v in report.violations] == [
        "[config] the class cannot be built: raised RuntimeError: needs a GPU"
    ]


def test_clean_report_notes_a_missing_schema() -> None:
    report = check_interaction(VerlStyleInteraction)
    assert any("no config_schema" in n for n in report.notes)


def test_a_given_instance_is_used_as_is() -> None:
    """No second instance is built to try an unknown option, so nothing is said of the schema."""
    instance = IgnoresSchemaInteraction({})
    instance.name = "ignores"
    report = check_interaction(instance, raise_on_error=False)
    assert "config" not in {v.check for v in report.violations}, report.format()
    assert not any("config_schema" in n for n in report.notes)


def test_config_error_for_unknown_option_is_expected_behaviour() -> None:
    with pytest.raises(ConfigError):
        ExactInteraction({"nope": 1})
