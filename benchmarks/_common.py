"""Shared helpers: side-by-side timing, medians, and the result rows.

The machines this runs on are small and shared, so no figure is an absolute
time: every benchmark times a command *and its baseline in the same run*,
alternating them so that a burst of background load hits both, and reports the
ratio of the medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@dataclass
class Row:
    """One line of the results table."""

    benchmark: str
    goal: str
    ratio: float | None  # None: not measured (see note)
    passed: bool | None
    detail: str
    reproduce: str

    @classmethod
    def at_most(
        cls, benchmark: str, limit: float, ratio: float, detail: str, reproduce: str
    ) -> Row:
        return cls(benchmark, f"<= {limit:.2f}x", ratio, ratio <= limit, detail, reproduce)

    @classmethod
    def at_least(
        cls, benchmark: str, limit: float, ratio: float, detail: str, reproduce: str
    ) -> Row:
        return cls(benchmark, f">= {limit:.2f}x", ratio, ratio >= limit, detail, reproduce)

    @classmethod
    def report(cls, benchmark: str, ratio: float, detail: str, reproduce: str) -> Row:
        """A figure shown for information, with no goal."""
        return cls(benchmark, "report", ratio, None, detail, reproduce)

    @classmethod
    def skipped(cls, benchmark: str, goal: str, why: str, reproduce: str) -> Row:
        return cls(benchmark, goal, None, None, why, reproduce)


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without the core's own variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTIONS_")}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONSTARTUP", None)
    # Installed code runs from cached bytecode; any value of this variable (even
    # "0") would make every run recompile what changed since the last install.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def scratch(prefix: str) -> Path:
    """A fresh temporary folder (removed by the OS; benchmarks keep nothing)."""
    return Path(tempfile.mkdtemp(prefix=f"interactions-bench-{prefix}-"))


def interactions_command() -> list[str]:
    """The ``interactions`` console script of this interpreter (``-m`` when absent)."""
    script = Path(PYTHON).with_name("interactions")
    if script.is_file():
        return [str(script)]
    return [PYTHON, "-m", "interactions_core"]


def run_once(
    cmd: Sequence[str], env: dict[str, str], before: Callable[[], None] | None = None
) -> float:
    """Wall time of one run of ``cmd`` in seconds; raises if it fails."""
    if before is not None:
        before()
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()}")
    return elapsed


@dataclass
class Timed:
    """Medians of two commands timed alternately, and how many runs each median is of."""

    a: float
    b: float
    runs: int

    @property
    def ratio(self) -> float:
        return self.a / self.b

    def describe(self, a: str, b: str) -> str:
        return (
            f"{a} {self.a * 1e3:.1f} ms / {b} {self.b * 1e3:.1f} ms "
            f"(medians of {self.runs} runs each)"
        )


def alternate(
    cmd_a: Sequence[str],
    cmd_b: Sequence[str],
    *,
    repeats: int,
    env_a: dict[str, str],
    env_b: dict[str, str] | None = None,
    before_a: Callable[[], None] | None = None,
    before_b: Callable[[], None] | None = None,
    warmup: int = 2,
) -> Timed:
    """Run ``a`` and ``b`` alternately ``repeats`` times each; return both medians."""
    env_b = env_a if env_b is None else env_b
    for _ in range(warmup):
        run_once(cmd_a, env_a, before_a)
        run_once(cmd_b, env_b, before_b)
    times_a: list[float] = []
    times_b: list[float] = []
    for i in range(repeats):
        # Swap the order every other round so neither always runs first.
        if i % 2:
            times_b.append(run_once(cmd_b, env_b, before_b))
            times_a.append(run_once(cmd_a, env_a, before_a))
        else:
            times_a.append(run_once(cmd_a, env_a, before_a))
            times_b.append(run_once(cmd_b, env_b, before_b))
    return Timed(statistics.median(times_a), statistics.median(times_b), repeats)


def alternate_calls(
    fn_a: Callable[[], float], fn_b: Callable[[], float], *, repeats: int, warmup: int = 1
) -> Timed:
    """Like :func:`alternate` for in-process measurements returning a time each."""
    for _ in range(warmup):
        fn_a()
        fn_b()
    times_a: list[float] = []
    times_b: list[float] = []
    for i in range(repeats):
        if i % 2:
            times_b.append(fn_b())
            times_a.append(fn_a())
        else:
            times_a.append(fn_a())
            times_b.append(fn_b())
    return Timed(statistics.median(times_a), statistics.median(times_b), repeats)
