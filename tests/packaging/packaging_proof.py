"""Packaging proof: built wheels behave in a fresh virtualenv the way the design promises.

Run from the repository root::

    python tests/packaging/packaging_proof.py [--workdir DIR] [--keep] [--pip-arg=ARG ...]

Steps (each printed as it passes; the first failure stops the proof with exit 1):

1. build wheels of the core and of every plugin under ``plugins/`` (``pip wheel
   --no-deps``; offline with ``--no-build-isolation`` when hatchling is importable);
2. create a fresh virtualenv and install every wheel (dependencies from the package
   index, or wherever ``--pip-arg`` points pip, e.g. ``--pip-arg=--find-links=DIR``);
3. ``interactions list --json`` lists every plugin's names, hook-registered ones
   (``rg/<dataset>``) included, all ``ok``; a second (warm) listing is identical;
4. the core's package data is installed: ``interactions new`` works from the wheel;
5. uninstalling a plugin removes its names on the next listing (the index cache is
   invalidated), for an entry-point plugin and for a hook plugin;
6. a deliberately broken plugin (generated here, its module raises on import) is
   listed without breaking the others; ``list --check`` marks it ``broken`` with the
   original error and exits 1, while the other interactions still load and ``show``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BROKEN_DIST = "interactions-broken-demo"
BROKEN_NAME = "broken_demo"


class ProofFailed(Exception):
    """One step of the proof did not hold."""


def _log(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> Any:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc


def _check(proc: Any, what: str) -> Any:
    if proc.returncode != 0:
        raise ProofFailed(
            f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def projects() -> list[Path]:
    """The core and every plugin distribution in the repository."""
    plugins = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))
    return [ROOT, *plugins]


def _has_hatchling() -> bool:
    try:
        import hatchling  # noqa: F401
    except ImportError:
        return False
    return True


def build_wheels(sources: list[Path], wheels: Path, pip_args: list[str]) -> list[Path]:
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels)]
    if _has_hatchling():
        cmd.append("--no-build-isolation")
    for source in sources:
        _check(_run([*cmd, *pip_args, str(source)]), f"building a wheel of {source.name}")
    built = sorted(wheels.glob("*.whl"))
    if len(built) < len(sources):
        raise ProofFailed(f"expected {len(sources)} wheels, found {[w.name for w in built]}")
    return built


def write_broken_plugin(folder: Path) -> Path:
    """A plugin whose module raises on import: listing must survive it."""
    package = folder / "interactions_broken_demo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'raise RuntimeError("deliberately broken plugin: this module raises on import")\n'
    )
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["hatchling>=1.21"]
            build-backend = "hatchling.build"

            [project]
            name = "{BROKEN_DIST}"
            version = "0.0.1"
            dependencies = ["interactions-core"]

            [project.entry-points."interactions_core.interactions"]
            {BROKEN_NAME} = "interactions_broken_demo:BrokenInteraction"

            [tool.hatch.build.targets.wheel]
            packages = ["interactions_broken_demo"]
            """
        ).lstrip()
    )
    return folder


class Venv:
    """A fresh virtualenv with its own index cache."""

    def __init__(self, path: Path, cache: Path, python: str) -> None:
        self.path = path
        _check(_run([python, "-m", "venv", str(path)]), "creating the virtualenv")
        bindir = "Scripts" if os.name == "nt" else "bin"
        self.python = str(path / bindir / ("python.exe" if os.name == "nt" else "python"))
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("INTERACTIONS_", "PYTHON", "VIRTUAL_ENV"))
        }
        self.env["XDG_CACHE_HOME"] = str(cache)

    def pip(self, *args: str) -> Any:
        return _check(
            _run([self.python, "-m", "pip", "--disable-pip-version-check", *args], self.env),
            f"pip {' '.join(args[:2])}",
        )

    def cli(self, *args: str) -> Any:
        return _run([self.python, "-m", "interactions_core", *args], self.env, timeout=300)

    def listing(self, *extra: str) -> tuple[int, dict[str, dict[str, Any]]]:
        proc = self.cli("list", "--json", *extra)
        if proc.returncode not in (0, 1):
            raise ProofFailed(f"interactions list failed:\n{proc.stdout}\n{proc.stderr}")
        try:
            rows = json.loads(proc.stdout)
        except ValueError as exc:
            raise ProofFailed(f"interactions list --json printed no JSON: {proc.stdout!r}") from exc
        return proc.returncode, {row["name"]: row for row in rows}


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ProofFailed(message)


def prove(workdir: Path, pip_args: list[str], python: str) -> None:
    started = time.perf_counter()
    sources = projects()
    wheels = build_wheels(sources, workdir / "wheels", pip_args)
    _log(f"ok   built {len(wheels)} wheels: {', '.join(w.name.split('-')[0] for w in wheels)}")

    venv = Venv(workdir / "venv", workdir / "cache", python)
    venv.pip("install", "--quiet", *pip_args, *map(str, wheels))
    _log("ok   installed every wheel into a fresh virtualenv")

    code, names = venv.listing()
    expect(code == 0, "interactions list exited non-zero")
    for required in ("gsm8k", "weather", "usersim", "rg/countdown", "rg/basic_arithmetic"):
        expect(required in names, f"{required!r} is not listed; got {sorted(names)[:10]}...")
    rg = [n for n in names if n.startswith("rg/")]
    expect(len(rg) >= 100, f"expected over a hundred rg/ names, got {len(rg)}")
    bad = {n: r["status"] for n, r in names.items() if r["status"] != "ok"}
    expect(not bad, f"entries not ok after a clean install: {bad}")
    _, warm = venv.listing()
    expect(warm == names, "the warm (cached) listing differs from the cold one")
    _log(f"ok   all {len(names)} names listed ({len(rg)} rg/ names), warm listing identical")

    made = workdir / "scaffolded"
    proc = venv.cli("new", "proof_probe", "--dir", str(made))
    _check(proc, "interactions new from the installed wheel")
    expect((made / "pyproject.toml").is_file(), "interactions new wrote no pyproject.toml")
    _log("ok   'interactions new' works from the wheel (templates are package data)")

    venv.pip("uninstall", "--quiet", "--yes", "interactions-weather")
    _, names = venv.listing()
    expect("weather" not in names, "weather is still listed after uninstalling its plugin")
    expect("gsm8k" in names, "gsm8k disappeared when weather was uninstalled")
    venv.pip("uninstall", "--quiet", "--yes", "interactions-reasoning-gym")
    _, names = venv.listing()
    left = [n for n in names if n.startswith("rg/")]
    expect(not left, f"hook-registered names survive the uninstall: {left[:5]}")
    _log("ok   uninstalling a plugin removes its names on the next list (entry point and hook)")

    broken_src = write_broken_plugin(workdir / "broken-src")
    broken = build_wheels([broken_src], workdir / "broken-wheel", pip_args)
    venv.pip("install", "--quiet", "--no-deps", *map(str, broken))
    code, names = venv.listing()
    expect(code == 0, "a broken plugin made 'interactions list' fail")
    expect(BROKEN_NAME in names and "gsm8k" in names, "listing lost entries with a broken plugin")
    code, names = venv.listing("--check")
    expect(code == 1, f"list --check exited {code} with a broken plugin installed (expected 1)")
    row = names[BROKEN_NAME]
    expect(row["status"] == "broken", f"broken plugin has status {row['status']!r}")
    expect("deliberately broken" in (row["error"] or ""), f"original error lost: {row['error']}")
    expect(names["gsm8k"]["status"] == "ok", "gsm8k is not ok next to a broken plugin")
    _check(venv.cli("show", "gsm8k"), "interactions show gsm8k next to a broken plugin")
    _log("ok   a broken plugin is listed, marked broken by --check, and the others still work")
    _log(f"packaging proof passed in {time.perf_counter() - started:.1f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="where to build (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter for the fresh virtualenv"
    )
    parser.add_argument(
        "--pip-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for pip wheel/install (repeatable), e.g. --pip-arg=--no-index",
    )
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="interactions-packaging-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        prove(workdir, args.pip_arg, args.python)
    except ProofFailed as exc:
        _log(f"FAIL {exc}")
        return 1
    finally:
        if args.keep:
            _log(f"work folder kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
