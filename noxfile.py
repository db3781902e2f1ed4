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
#: Set for the heavy suites' pytest runs: a test file whose stack is missing fails there
#: instead of being skipped as it is in a plain local ``pytest`` (see tests/suites.py).
STRICT = {"INTERACTIONS_REQUIRE_SUITES": "1"}
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
    "-e",
    f"{ROOT}/plugins/interactions-usersim",
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
    if done.exists() and not _built_here(env):
        # A copied or moved venv keeps its scripts' ``#!`` lines pointing at the old
        # place, so console scripts (``vf-eval``, ``ray``) fail to start: rebuild it.
        done.unlink()
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


def _built_here(env: Path) -> bool:
    """Whether the venv's ``pip`` script starts this venv's own interpreter."""
    try:
        with open(env / "bin" / "pip", "rb") as script:
            first = script.readline().strip()
    except OSError:
        return False
    return first == b"#!" + os.fsencode(env / "bin" / "python")


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


#: Where ``nox -s build`` writes the core's and the bundled plugins' distributions.
DIST = ROOT / "dist"


@nox.session
def build(session: nox.Session) -> None:
    """Wheels and sdists of the core and every bundled plugin into ``dist/``.

    Until interactions-core is on the package index, these files (or a checkout) are
    how to install it outside this clone: pip cannot find ``interactions-core`` by
    name, so the plugins, which depend on it, install only beside the core's wheel
    (see docs/install.md). Built without isolation, with the backend installed
    here, so a second run needs no index; the previous run's files are replaced,
    so ``dist/*.whl`` never holds two versions of one distribution.
    """
    session.install("build", "hatchling")
    projects = [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]
    DIST.mkdir(exist_ok=True)
    for old in [*DIST.glob("interactions_*.whl"), *DIST.glob("interactions_*.tar.gz")]:
        old.unlink()
    for project in projects:
        command = ["python", "-m", "build", "--no-isolation", "--outdir", str(DIST)]
        session.run(*command, str(project), silent=True)
    wheels = sorted(DIST.glob("interactions_*.whl"))
    sdists = sorted(DIST.glob("interactions_*.tar.gz"))
    if len(wheels) != len(projects) or len(sdists) != len(projects):
        found = [p.name for p in [*wheels, *sdists]]
        session.error(f"expected {len(projects)} wheels and sdists in dist/, found {found}")
    for built in [*wheels, *sdists]:
        session.log(f"wrote dist/{built.name} ({built.stat().st_size // 1024} KiB)")
    [core] = [w.name for w in wheels if w.name.startswith("interactions_core-")]
    session.log("install them (the core in the same command as the plugins, or first;")
    session.log("docs/install.md has every form):")
    session.log("  pip install dist/*.whl                   # the core and every plugin")
    session.log(f'  pip install "dist/{core}[verl]"   # the core with an extra')
    session.log('  pip install --find-links dist "interactions-core[verl]" interactions-gsm8k')


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark suite; writes a Markdown table (see docs/performance.md)."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", "benchmarks/run.py", *session.posargs)


#: The verl releases the agent-loop adapter supports, each tested in its own environment.
VERL_VERSIONS = ["0.9.0", "0.9.1"]
#: What verl's agent loop imports without declaring it, what the tests build tokenizers with,
#: and TransferQueue, which verl's default (v1) trainer path needs and does not declare.
VERL_UNDECLARED = ["cachetools", "uvicorn", "fastapi", "tokenizers", "transferqueue==0.1.11"]


@nox.session(venv_backend="none")
@nox.parametrize("verl", VERL_VERSIONS)
def verl(session: nox.Session, verl: str) -> None:
    """The verl adapters against verl's released wheels (torch CPU build, no GPU, no Ray)."""
    python = heavy_env(
        session,
        f"verl-{verl}",
        [["torch==2.13.0"], [f"verl=={verl}", *VERL_UNDECLARED]],
    )
    session.run(str(python), "-m", "pytest", "tests/verl_adapter", "-p", "no:cacheprovider",
                *session.posargs, external=True, env=STRICT)  # fmt: skip


#: The last verl release that ships verl/interactions, for the drop-in's tests.
VERL_LEGACY = "0.7.1"


@nox.session(venv_backend="none")
def verl_legacy(session: nox.Session) -> None:
    """The verl <= 0.7 drop-in against verl 0.7.1's released code and its own tests."""
    python = heavy_env(session, "verl-legacy", [["omegaconf"]])
    downloads = HEAVY_ENVS / f"verl-{VERL_LEGACY}-dist"
    wheel = downloads / f"verl-{VERL_LEGACY}-py3-none-any.whl"
    sdist = downloads / f"verl-{VERL_LEGACY}.tar.gz"
    pip = [str(python), "-m", "pip", "download", "-q", "--no-deps", "-d", str(downloads)]
    if not wheel.exists():
        session.run(*pip, "--only-binary", ":all:", f"verl=={VERL_LEGACY}", external=True)
    if not sdist.exists():
        session.run(*pip, "--no-binary", ":all:", f"verl=={VERL_LEGACY}", external=True)
    env = {
        "INTERACTIONS_VERL_LEGACY_WHEEL": str(wheel),
        "INTERACTIONS_VERL_LEGACY_SDIST": str(sdist),
        **STRICT,
    }
    session.run(str(python), "-m", "pytest", "tests/verl_legacy", "-p", "no:cacheprovider",
                *session.posargs, external=True, env=env)  # fmt: skip


@nox.session(venv_backend="none")
def bench_verl(session: nox.Session) -> None:
    """The verl adapter's overhead over a bare agent loop, in the newest verl's environment."""
    version = VERL_VERSIONS[-1]
    python = heavy_env(
        session,
        f"verl-{version}",
        [["torch==2.13.0"], [f"verl=={version}", *VERL_UNDECLARED]],
    )
    session.run(str(python), "benchmarks/bench_verl_adapter.py", *session.posargs, external=True)


#: Ray, pinned: the cluster tests start real local clusters with this release.
RAY_PIN = "ray==2.60.0"


@nox.session(python=False)
def ray(session: nox.Session) -> None:
    """interactions_core.ray on real local Ray clusters, then its benchmark (quick form).

    ``nox -s ray -- -k pool`` passes arguments to pytest.
    """
    python = heavy_env(session, "ray", [[RAY_PIN]])
    session.run(
        str(python),
        "-m",
        "pytest",
        "tests/ray_cluster",
        "-q",
        *session.posargs,
        external=True,
        env=STRICT,
    )
    session.run(str(python), "benchmarks/bench_ray.py", "--quick", external=True)


@nox.session(python=False)
def bench_ray(session: nox.Session) -> None:
    """The Ray benchmark in full (pooled calls, batching, replicas, sharded runs)."""
    python = heavy_env(session, "ray", [[RAY_PIN]])
    session.run(str(python), "benchmarks/bench_ray.py", *session.posargs, external=True)


#: The OpenEnv server stack, pinned: what `interactions-core[openenv]` installs, tested.
OPENENV_PINS = ["openenv==0.10.0", "uvicorn==0.55.0"]
#: The older package name, still installed by some users: tested alone, never beside `openenv`.
OPENENV_CORE_PINS = ["openenv-core==0.3.0", "uvicorn==0.55.0"]
#: What the project's ``[parquet]`` extra adds, for the Task API's parquet splits.
PARQUET_PINS = ["pyarrow>=14"]
#: Tells tests/serve/test_server_packaging.py which OpenEnv distribution a session pinned.
OPENENV_EXPECTED = "INTERACTIONS_EXPECT_OPENENV"
#: TRL and what its GRPO trainer needs on CPU; torch first so its CPU build is the one used.
TRL_STEPS = [["torch==2.13.0"], ["trl==1.16.0", *OPENENV_PINS]]


@nox.session(python=False)
def serve(session: nox.Session) -> None:
    """`interactions serve` on 127.0.0.1 driven by OpenEnv's own client; then its benchmark.

    ``nox -s serve -- -k capacity`` passes arguments to pytest.
    """
    python = heavy_env(session, "serve", [OPENENV_PINS, PARQUET_PINS])
    session.run(str(python), "-m", "pytest", "tests/serve", "-q", *session.posargs,
                external=True, env={**STRICT, OPENENV_EXPECTED: OPENENV_PINS[0]})  # fmt: skip
    session.run(str(python), "benchmarks/bench_serve.py", "--quick", external=True)


@nox.session(python=False)
def serve_openenv_core(session: nox.Session) -> None:
    """The server tests again with the older `openenv-core` 0.3 installed alone."""
    python = heavy_env(session, "openenv-core", [OPENENV_CORE_PINS, PARQUET_PINS])
    session.run(str(python), "-m", "pytest", "tests/serve", "-q", *session.posargs,
                external=True, env={**STRICT, OPENENV_EXPECTED: OPENENV_CORE_PINS[0]})  # fmt: skip


@nox.session(python=False)
def trl(session: nox.Session) -> None:
    """Two GRPO steps on CPU through `interactions_core.integrations.trl`, in-process and served."""
    python = heavy_env(session, "trl", TRL_STEPS)
    session.run(str(python), "-m", "pytest", "tests/trl", "tests/serve/test_server_packaging.py",
                "-q", *session.posargs, external=True,
                env={**STRICT, OPENENV_EXPECTED: OPENENV_PINS[0]})  # fmt: skip


#: skyrl-gym's released wheel, pinned: what `interactions-core[skyrl]` installs, tested.
SKYRL_PINS = ["skyrl-gym==0.4.0"]


@nox.session(python=False)
def skyrl(session: nox.Session) -> None:
    """interactions/<name> environments on skyrl-gym, driven as SkyRL's generator does; then
    the benchmark against a hand-written environment (quick form)."""
    python = heavy_env(session, "skyrl", [SKYRL_PINS])
    session.run(str(python), "-m", "pytest", "tests/skyrl", "-q", *session.posargs,
                external=True, env=STRICT)  # fmt: skip
    session.run(str(python), "benchmarks/bench_skyrl.py", "--quick", external=True)


@nox.session(python=False)
def bench_skyrl(session: nox.Session) -> None:
    """The SkyRL benchmark in full; rewrites the generated block of docs/trainers.md."""
    python = heavy_env(session, "skyrl", [SKYRL_PINS])
    session.run(str(python), "benchmarks/bench_skyrl.py", *session.posargs, external=True)


#: The site's tools: MkDocs, and mkdocstrings with its Python handler for docs/api.md
#: (the API reference rendered from the docstrings, so it cannot drift from the code).
DOCS_TOOLS = ["mkdocs>=1.6", "mkdocstrings>=1.0", "mkdocstrings-python>=2.0"]


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (MkDocs), every warning and broken link an error; the CLI
    reference must match the CLI's parser and the diagrams their script."""
    session.install("-e", ".", *DOCS_TOOLS)
    session.run("python", "docs/tools/cli_reference.py", "--check")
    session.run("python", "docs/tools/diagrams.py", "--check")
    session.run("mkdocs", "build", "--strict", "--site-dir", session.create_tmp() + "/site")


@nox.session(python=False)
def bench_serve(session: nox.Session) -> None:
    """The serving benchmark in full; rewrites the generated block of docs/serve.md."""
    python = heavy_env(session, "serve", [OPENENV_PINS, PARQUET_PINS])
    session.run(str(python), "benchmarks/bench_serve.py", *session.posargs, external=True)


#: verifiers' released wheel with its OpenEnv extra, and uv, which runs the chat program of
#: verifiers' harnesses as a script. verifiers pins `mcp==2.0.0` while `openenv` 0.10 needs
#: fastmcp 3 (`mcp<2`), so pip resolves the extra to `openenv` 0.4.1: the server runs beside
#: it on that release here.
VERIFIERS_PINS = ["verifiers[openenv]==0.4.0", "openenv==0.4.1", "uvicorn==0.55.0", "uv==0.13.9"]


@nox.session(python=False)
def verifiers(session: nox.Session) -> None:
    """`vf-eval` (verifiers' own CLI) evaluating installed interactions served by
    `interactions serve`, against a local scripted OpenAI-compatible server.

    uv's cache lives in the environment's folder: the chat program's dependencies are
    downloaded once per environment, not once per run (the tests' XDG cache is temporary).
    """
    python = heavy_env(session, "verifiers", [VERIFIERS_PINS])
    # The taskset module verifiers loads by name, a distribution of its own.
    session.run(str(python), "-m", "pip", "install", "-q", "--no-deps", "-e",
                f"{ROOT}/integrations/verifiers", external=True)  # fmt: skip
    uv_cache = {"UV_CACHE_DIR": str(python.parent.parent / "uv-cache")}
    session.run(str(python), "-m", "pytest", "tests/verifiers", "-q", *session.posargs,
                external=True, env={**STRICT, **uv_cache})  # fmt: skip
