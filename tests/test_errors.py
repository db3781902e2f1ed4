"""``errors.py``: one family of errors, each also the built-in type verl's callers catch."""

from __future__ import annotations

import pytest

from interactions_core import errors
from interactions_core.errors import (
    ConfigError,
    ConformanceError,
    InteractionsError,
    InteractionsWarning,
    Interrupted,
    UnknownInteractionError,
)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("ConfigError", ValueError),
        ("UnknownNameError", KeyError),
        ("ConflictError", LookupError),
        ("DisabledError", LookupError),
        ("PluginLoadError", ImportError),
        ("InteractionValidationError", TypeError),
        ("SessionError", RuntimeError),
        ("TrustError", PermissionError),
        ("ConformanceError", AssertionError),
    ],
)
def test_each_error_is_in_the_family_and_a_builtin_type(name: str, builtin: type) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, InteractionsError) and issubclass(cls, builtin)


def test_every_exported_exception_is_in_the_family_or_says_why_not() -> None:
    outside = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and not issubclass(obj, (InteractionsError, Warning))
    }
    assert outside == {"Interrupted"}  # a real Ctrl-C, not an error of the framework
    assert issubclass(Interrupted, KeyboardInterrupt)
    assert issubclass(errors.IncompatibleCoreWarning, InteractionsWarning)


def test_a_config_error_carries_and_counts_every_problem() -> None:
    one = ConfigError(["c.yaml:2: bad"], source="c.yaml")
    assert one.problems == ["c.yaml:2: bad"] and one.source == "c.yaml"
    assert str(one) == "1 problem in c.yaml:\n  - c.yaml:2: bad"
    two = ConfigError(("a", "b"))
    assert str(two) == "2 problems:\n  - a\n  - b" and two.problems == ["a", "b"]


def test_an_unknown_name_message_is_not_quoted_like_a_key_error() -> None:
    error = UnknownInteractionError("unknown interaction 'x'; did you mean 'y'?")
    assert str(error) == "unknown interaction 'x'; did you mean 'y'?"
    assert str(KeyError("plain")) == "'plain'"  # what KeyError alone would print
    assert UnknownInteractionError.kind == "interaction" and str(UnknownInteractionError()) == ""


def test_a_conformance_error_keeps_its_violations() -> None:
    error = ConformanceError("2 violations", ["a", "b"])
    assert error.violations == ["a", "b"] and str(error) == "2 violations"
    assert ConformanceError("none").violations == []
