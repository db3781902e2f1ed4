"""Test helpers for interaction authors: a conformance checker and a session driver.

* :func:`check_interaction` drives scripted episodes through an interaction (a
  class, an instance or a registered name) and reports *every* way it breaks the
  contract the runtime relies on, like Gymnasium's ``check_env`` or
  scikit-learn's ``check_estimator``. It raises
  :class:`~interactions_core.errors.ConformanceError` with a readable report, or
  returns a :class:`ConformanceReport` that is ``ok``.
* :class:`SessionDriver` plays conversations against an interaction the way a
  trainer would (assistant reply in, feedback appended as a user message),
  always finalizing the session.
* :mod:`interactions_core.testing.pytest_plugin` exposes both as pytest fixtures
  (registered through the ``pytest11`` entry point, so installing
  interactions-core is enough).

Names are imported on first use so that loading the pytest plugin costs nothing
in test suites that never use them.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .checker import (
        CHECKS,
        ConformanceReport,
        Episode,
        Violation,
        acheck_interaction,
        check_interaction,
    )
    from .driver import ScriptedSession, SessionDriver, Transcript, run_sync

_EXPORTS = {
    "CHECKS": "checker",
    "ConformanceReport": "checker",
    "Episode": "checker",
    "Violation": "checker",
    "acheck_interaction": "checker",
    "check_interaction": "checker",
    "ScriptedSession": "driver",
    "SessionDriver": "driver",
    "Transcript": "driver",
    "run_sync": "driver",
}

__all__ = [
    "CHECKS",
    "ConformanceReport",
    "Episode",
    "ScriptedSession",
    "SessionDriver",
    "Transcript",
    "Violation",
    "acheck_interaction",
    "check_interaction",
    "run_sync",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
