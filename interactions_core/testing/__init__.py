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

from .._names import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .checker import acheck_interaction as acheck_interaction
    from .checker import check_interaction as check_interaction
    from .driver import CHECKS as CHECKS
    from .driver import ConformanceReport as ConformanceReport
    from .driver import Episode as Episode
    from .driver import ScriptedSession as ScriptedSession
    from .driver import SessionDriver as SessionDriver
    from .driver import Transcript as Transcript
    from .driver import Violation as Violation
    from .driver import run_sync as run_sync

#: Public name -> the submodule that defines it; each is imported on first use (PEP 562).
_SOURCES = {
    name: module
    for module, names in {
        "checker": ("acheck_interaction", "check_interaction"),
        "driver": (
            "CHECKS",
            "ConformanceReport",
            "Violation",
            "Episode",
            "ScriptedSession",
            "SessionDriver",
            "Transcript",
            "run_sync",
        ),
    }.items()
    for name in names
}
__all__ = sorted(_SOURCES)

__getattr__ = lazy_exports(__name__, _SOURCES)


def __dir__() -> list[str]:
    return list(__all__)
