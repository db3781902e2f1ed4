"""Developer sessions: ``nox -s tests`` (3.10-3.13), ``nox -s lint``, ``nox -s bench``."""

from __future__ import annotations

import glob
import os

import nox

# Interpreters installed with pyenv are not on PATH unless activated; make every
# installed 3.10+ visible so the version matrix runs without manual setup.
for _bin in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9].*/bin"))):
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The whole test suite, with the core and bundled plugins installed editable."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy on the core and the plugins."""
    session.install("-r", "requirements-dev.txt", "ruff", "mypy", "types-PyYAML")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session
def packaging(session: nox.Session) -> None:
    """Wheels of the core and every plugin in a fresh virtualenv: list, uninstall, broken plugin."""
    session.install("build", "hatchling")
    session.run("python", "tests/packaging/packaging_proof.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark suite; writes a Markdown table (see docs/performance.md)."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", "benchmarks/run.py", *session.posargs)
