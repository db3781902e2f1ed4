"""Run the benchmarks and write the results table.

    python benchmarks/run.py            # everything (a few minutes)
    python benchmarks/run.py --quick    # fewer repetitions, for a quick look
    python benchmarks/run.py --only startup --only turn

Every figure is a ratio of two things measured side by side in this run (see
``_common.py``), so the table means the same on a laptop and on a loaded CI
machine. The table goes to stdout and to ``benchmarks/results/latest.md``.
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

from _common import Row  # noqa: E402

#: Benchmark modules, in table order: ``--only`` takes these names.
BENCHMARKS = ("startup", "import", "discovery", "turn", "sessions", "served", "report")
REPEATS = {"full": 41, "quick": 11}


def table(rows: list[Row]) -> str:
    lines = [
        "| benchmark | goal | measured | result | detail | reproduce |",
        "|---|---|---|---|---|---|",
    ]
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
    args = parser.parse_args(argv)
    repeats = args.repeats or REPEATS["quick" if args.quick else "full"]
    rows: list[Row] = []
    started = time.perf_counter()
    for name in args.only or BENCHMARKS:
        t0 = time.perf_counter()
        module = importlib.import_module(f"bench_{name}")
        rows.extend(module.run(repeats))
        sys.stderr.write(f"[bench] {name}: {time.perf_counter() - t0:.1f} s\n")
    header = (
        f"Python {platform.python_version()} on {platform.system()} "
        f"({platform.machine()}), {repeats} alternating repetitions per ratio, "
        f"{time.perf_counter() - started:.0f} s in all.\n\n"
    )
    report = header + table(rows) + "\n"
    sys.stdout.write(report)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.md").write_text(report)
    failed = [r for r in rows if r.passed is False]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
