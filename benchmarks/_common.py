"""Shared helpers: side-by-side timing, medians, the result rows, and the docs' blocks.

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


class DocsBlockError(RuntimeError):
    """A page has no well-formed generated block for a benchmark to write into."""


@dataclass(frozen=True)
class DocsBlock:
    """The part of a docs page that a benchmark script writes, between two marker comments.

    The figures the docs show must be the ones a script measured, so each script
    that has figures in a page owns a block there and rewrites it, whole, at the end
    of a full run; nothing outside the markers is touched. The markers name the
    script and the nox session that regenerates the block, for the reader of the
    page's source.
    """

    page: Path
    script: str  # the file name under benchmarks/, e.g. "bench_ray.py"
    session: str  # the nox session that runs it in full, e.g. "bench_ray"

    @property
    def begin(self) -> str:
        return (
            f"<!-- BEGIN generated by benchmarks/{self.script} "
            f"(nox -s {self.session}); do not edit -->"
        )

    @property
    def end(self) -> str:
        return f"<!-- END generated by benchmarks/{self.script} -->"

    def _load(self) -> tuple[str, int, int]:
        """The page's text and where the block's content starts and ends; raises if malformed."""
        if not self.page.is_file():
            raise DocsBlockError(f"{self.page} is missing; benchmarks/{self.script} writes there")
        text = self.page.read_text(encoding="utf-8")
        found = (text.count(self.begin), text.count(self.end))
        if found != (1, 1) or text.index(self.begin) > text.index(self.end):
            raise DocsBlockError(
                f"{self.page.name} needs exactly one generated block for "
                f"benchmarks/{self.script} (found {found[0]} BEGIN and {found[1]} END "
                "markers): put these two lines, in this order, where its figures belong, "
                f"then run the benchmark again:\n{self.begin}\n{self.end}"
            )
        return text, text.index(self.begin) + len(self.begin), text.index(self.end)

    def check(self) -> None:
        """Raise :class:`DocsBlockError` now, before a long run, if the page cannot take it."""
        self._load()

    def read(self) -> str:
        """The block's content, without the markers and the line breaks around it."""
        text, start, end = self._load()
        return text[start:end].strip("\n")

    def write(self, content: str) -> None:
        """Replace the block's content with ``content``; the rest of the page stays as it is."""
        text, start, end = self._load()
        body = content.strip("\n")
        self.page.write_text(f"{text[:start]}\n{body}\n{text[end:]}", encoding="utf-8")

    def wanted(self, *, full_run: bool, no_docs: bool) -> bool:
        """Whether this run rewrites the block: a full run only, and not with ``--no-docs``.

        A quick run's figures are too noisy for the docs, and CI's quick runs must
        leave the clone as it was. When the block will be written, the page is
        checked now, so a page without markers fails before minutes of measuring.
        """
        if full_run and not no_docs:
            self.check()
            return True
        return False

    @property
    def where(self) -> str:
        """The page's path as the docs and messages name it."""
        try:
            return str(self.page.relative_to(ROOT))
        except ValueError:
            return str(self.page)
