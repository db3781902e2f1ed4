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
    # A real Ctrl-C (and its run-stopping form), not an error of the framework.
    assert outside == {"Interrupted", "RunInterrupted"}
    assert issubclass(Interrupted, KeyboardInterrupt)
    warnings_ = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, Warning)
    }
    assert all(issubclass(getattr(errors, name), InteractionsWarning) for name in warnings_)
    assert {"IncompatibleCoreWarning", "SelectionWarning"} <= warnings_


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


# -- how the framework's warnings are shown --------------------------------------

_SHOW = """
from interactions_core import cli, errors
from interactions_core.errors import IncompatibleCoreWarning
cli.compact_warnings()
errors.warn("a plugin wants another core", IncompatibleCoreWarning)
import warnings
warnings.warn("someone else's", UserWarning)
"""


def test_the_cli_shows_framework_warnings_in_one_line() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _SHOW], capture_output=True, text=True, check=True)
    lines = proc.stderr.splitlines()
    assert lines[0] == "interactions: warning: a plugin wants another core"
    assert "UserWarning: someone else's" in proc.stderr  # Python's own display for others


def test_warn_points_at_the_callers_frame_and_is_recordable() -> None:
    from interactions_core.errors import IncompatibleCoreWarning

    def plugin_code() -> None:
        errors.warn("from plugin code", IncompatibleCoreWarning, stacklevel=2)

    with pytest.warns(IncompatibleCoreWarning, match="from plugin code") as record:
        plugin_code()  # stacklevel=2: this line, the caller of plugin_code
    assert record[0].filename == __file__


def test_a_recording_block_after_the_cli_still_records(monkeypatch) -> None:
    """The display the CLI installs does not override a later recording block."""
    import warnings

    from interactions_core.cli import compact_warnings
    from interactions_core.errors import IncompatibleCoreWarning

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    compact_warnings()
    assert getattr(warnings.showwarning, "_interactions_compact", False)
    monkeypatch.setattr(warnings, "showwarning", warnings._showwarning_orig)  # type: ignore[attr-defined]
    with pytest.warns(IncompatibleCoreWarning):  # a later recording block is not overridden
        errors.warn("recorded", IncompatibleCoreWarning)
    compact_warnings()  # each CLI call puts the display back if it was replaced
    assert getattr(warnings.showwarning, "_interactions_compact", False)
