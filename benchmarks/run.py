"""Run the benchmarks and write the results table.

    python benchmarks/run.py            # everything (a few minutes)
    python benchmarks/run.py --quick    # fewer repetitions, for a quick look
    python benchmarks/run.py --only startup --only turn

Every figure is a ratio of two things measured side by side in this run (see
``_common.py``), so the table means the same on a laptop and on a loaded CI
machine. The table goes to stdout and to ``benchmarks/results/latest.md``; a
full run (every benchmark, full repetitions) also rewrites the generated block
of ``docs/performance.md``, so the figures the docs show are the ones this
script produced (``--no-docs`` leaves the docs alone).
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import DocsBlock, Row  # noqa: E402

#: Benchmark modules, in table order: ``--only`` takes these names.
BENCHMARKS = ("startup", "import", "discovery", "turn", "sessions", "served", "usersim", "report")
REPEATS = {"full": 41, "quick": 11}
DOCS = DocsBlock(HERE.parent / "docs" / "performance.md", "run.py", "bench")
HEADER = "| benchmark | goal | measured | result | detail | reproduce |"


def expected_titles(names: tuple[str, ...] = BENCHMARKS) -> list[str]:
    """Every row title the named benchmark modules report, in table order."""
    titles: list[str] = []
    for name in names:
        titles.extend(importlib.import_module(f"bench_{name}").ROWS)
    return titles


def table(rows: list[Row]) -> str:
    lines = [HEADER, "|---|---|---|---|---|---|"]
    for r in rows:
        measured = "n/a" if r.ratio is None else f"{r.ratio:.2f}x"
        result = "pass" if r.passed else "FAIL"
        if r.passed is None:
            result = "info" if r.ratio is not None else "skipped"
        lines.append(
            f"| {r.benchmark} | {r.goal} | {measured} | {result} | {r.detail} | `{r.reproduce}` |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--only", action="append", choices=BENCHMARKS, help="run only this benchmark (repeatable)"
    )
    parser.add_argument("--repeats", type=int, help="override the number of repetitions")
    parser.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/performance.md's table"
    )
    args = parser.parse_args(argv)
    repeats = args.repeats or REPEATS["quick" if args.quick else "full"]
    full_run = not args.only and not args.quick and args.repeats is None
    write_docs = DOCS.wanted(full_run=full_run, no_docs=args.no_docs)
    rows: list[Row] = []
    started = time.perf_counter()
    for name in args.only or BENCHMARKS:
        t0 = time.perf_counter()
        module = importlib.import_module(f"bench_{name}")
        produced = module.run(repeats)
        titles = [r.benchmark for r in produced]
        if titles != list(module.ROWS):
            raise RuntimeError(f"bench_{name} reported {titles}, but declares {module.ROWS}")
        rows.extend(produced)
        sys.stderr.write(f"[bench] {name}: {time.perf_counter() - t0:.1f} s\n")
    header = (
        f"Python {platform.python_version()} on {platform.system()} "
        f"({platform.machine()}), at most {repeats} alternating runs of each side per ratio "
        "(each row's detail says how many), "
        f"{time.perf_counter() - started:.0f} s in all.\n\n"
    )
    report = header + table(rows) + "\n"
    sys.stdout.write(report)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.md").write_text(report)
    if write_docs:
        DOCS.write(report)
        sys.stderr.write(f"[bench] table written to {DOCS.where}\n")
    failed = [r for r in rows if r.passed is False]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
