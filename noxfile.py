"""Developer sessions: ``nox -s tests`` (3.10-3.13), ``nox -s lint``, ``nox -s bench``.

Heavy stacks (a trainer's released wheel with torch, Ray, TRL) get sessions of their
own. Their virtualenvs live outside the clone, under ``INTERACTIONS_HEAVY_ENVS``
(default ``~/.cache/interactions-core/heavy-envs``), keyed by what they pin: a second
run with the same pins reuses them, a changed pin builds a new one and removes the old.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
from pathlib import Path

import nox

# Interpreters installed with pyenv are not on PATH unless activated; make every
# installed 3.10+ visible so the version matrix runs without manual setup.
for _bin in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9].*/bin"))):
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
ROOT = Path(__file__).resolve().parent
HEAVY_ENVS = Path(
    os.environ.get("INTERACTIONS_HEAVY_ENVS")
    or Path.home() / ".cache" / "interactions-core" / "heavy-envs"
)
#: The interpreter of heavy environments: torch's CPU build for it is what pip finds first.
HEAVY_PYTHON = "python3.11"
#: The project itself, installed editable into every heavy environment on every run.
PROJECT = [
    "-e",
    f"{ROOT}[test]",
    "-e",
    f"{ROOT}/plugins/interactions-gsm8k",
    "-e",
    f"{ROOT}/plugins/interactions-weather",
]


def heavy_env(session: nox.Session, name: str, steps: list[list[str]]) -> Path:
    """A virtualenv outside the clone with ``steps`` (pip argument lists) installed in order.

    Returns the environment's ``python``. The environment is reused while ``steps``
    are unchanged; a finished build is marked, so an interrupted one is rebuilt.
    The project is (re)installed editable from this clone every time, which costs
    seconds, since CI clones into a new folder on every run.
    """
    key = hashlib.sha256(repr((HEAVY_PYTHON, steps)).encode()).hexdigest()[:12]
    env = HEAVY_ENVS / f"{name}-{key}"
    python = env / "bin" / "python"
    done = env / ".complete"
    if not done.exists():
        for stale in HEAVY_ENVS.glob(f"{name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        env.parent.mkdir(parents=True, exist_ok=True)
        session.log(f"building {env} (reused by later runs while its pins are unchanged)")
        started = _now()
        session.run(HEAVY_PYTHON, "-m", "venv", str(env), external=True)
        session.run(str(python), "-m", "pip", "install", "-q", "--upgrade", "pip", external=True)
        for step in steps:
            session.run(str(python), "-m", "pip", "install", "-q", *step, external=True)
        done.write_text(f"built in {_now() - started:.0f} s\n")
    session.log(f"using {env} ({done.read_text().strip()})")
    session.run(str(python), "-m", "pip", "install", "-q", *PROJECT, external=True)
    return python


def _now() -> float:
    import time

    return time.monotonic()


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
