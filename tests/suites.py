"""Suites that need a heavy stack: skipped with their reason where it is missing.

Some test folders need what the core's own test install does not bring (Ray, verl,
TRL and torch, the OpenEnv server stack). Each runs in a nox session of its own that
installs it (``.ci/run`` runs them all). A plain local ``python -m pytest`` cannot run
them; it must say so, not drop them silently. A folder's ``conftest.py`` declares what
it needs with :func:`requires`; every test file it covers is then reported as
skipped, with the missing piece and the nox session to run, instead of being
collected (its imports would fail).
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

#: Set by the nox sessions of the heavy suites: there a missing stack is a failure.
STRICT = "INTERACTIONS_REQUIRE_SUITES"


def importable(module: str) -> bool:
    """Whether ``module`` is installed (a bare namespace folder does not count)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def missing(modules: Sequence[str] = (), env: Sequence[str] = ()) -> list[str]:
    """What of ``modules`` (importable) and ``env`` (set, non-empty) is absent."""
    absent = [f"the {m!r} package" for m in modules if not importable(m)]
    absent += [f"${name}" for name in env if not os.environ.get(name)]
    return absent


class _Unavailable(pytest.Module):
    """A test file that is not imported, reported as one skip with the reason."""

    reason = ""

    def collect(self) -> list[pytest.Item]:
        where = self.path.relative_to(self.config.rootpath).as_posix()
        pytest.skip(f"{where} {self.reason}")


MakeModule = Callable[[Path, pytest.Collector], "pytest.Module | None"]


def requires(
    session: str,
    *,
    modules: Sequence[str] = (),
    env: Sequence[str] = (),
    files: str = "test_*.py",
    strict_env: Sequence[str] = (STRICT,),
) -> MakeModule:
    """A ``pytest_pycollect_makemodule`` hook for a folder's ``conftest.py``.

    Test files matching ``files`` are skipped when any of ``modules`` cannot be
    imported or any variable of ``env`` is unset; the reason names them and
    ``nox -s session``. When a variable of ``strict_env`` is set, nothing is skipped,
    so a missing stack fails the run (the nox sessions set :data:`STRICT`).
    """
    absent = missing(modules, env)
    reason = f"needs {', '.join(absent)}; `nox -s {session}` runs it with them"
    strict = any(os.environ.get(name) for name in strict_env)

    def pytest_pycollect_makemodule(
        module_path: Path, parent: pytest.Collector
    ) -> pytest.Module | None:
        if not absent or strict:
            return None
        if not fnmatch.fnmatch(module_path.name, files):
            return None
        module = _Unavailable.from_parent(parent, path=module_path)
        module.reason = reason
        return module

    return pytest_pycollect_makemodule
