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

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .checker import acheck_interaction as acheck_interaction
    from .checker import check_interaction as check_interaction
    from .driver import Episode as Episode
    from .driver import ScriptedSession as ScriptedSession
    from .driver import SessionDriver as SessionDriver
    from .driver import Transcript as Transcript
    from .driver import run_sync as run_sync
    from .report import CHECKS as CHECKS
    from .report import ConformanceReport as ConformanceReport
    from .report import Violation as Violation

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "checker": ("acheck_interaction", "check_interaction"),
        "report": ("CHECKS", "ConformanceReport", "Violation"),
        "driver": (
            "Episode",
            "ScriptedSession",
            "SessionDriver",
            "Transcript",
            "run_sync",
        ),
    },
)
