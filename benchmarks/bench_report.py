"""``interactions report`` at 100,000 episodes: time against reading the file, and page size.

The records are written by ``interactions run`` itself (the demo's eleven
samples repeated to 100,001 episodes, replayed through gsm8k). The report
(read every record, compute the figures, keep the shown episodes, render and
write the page) is timed against the floor any report must pay: reading the
file and ``json.loads`` of every line. Goal: at most 2.0x. The page's size is
reported too; the goal is a page under 1 MiB whatever the number of episodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, Row, alternate_calls, scratch

GOAL = 2.0
PAGE_LIMIT = 1 << 20
COPIES = 9092  # x 11 samples = 100,012 episodes
REPRODUCE = "python benchmarks/run.py --only report"
EPISODES = 11 * COPIES
SPEED = f"`interactions report` of {EPISODES:,} episodes / reading the records"
SIZE = f"Report page size at {EPISODES:,} episodes / 1 MiB"
#: The rows this module reports, in order (docs/performance.md's table is checked against them).
ROWS = (SPEED, SIZE)


def make_records(folder: Path) -> Path:
    demo = (ROOT / "examples" / "gsm8k_demo.jsonl").read_text(encoding="utf-8")
    data = folder / "data.jsonl"
    data.write_text(demo.rstrip("\n") + "\n" + (demo.rstrip("\n") + "\n") * (COPIES - 1))
    records = folder / "records.jsonl"
    cmd = [sys.executable, "-m", "interactions_core", "run", str(ROOT / "examples" / "config.yaml"),
           "--data", str(data), "--output", str(records), "--no-progress"]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return records


def run(repeats: int) -> list[Row]:
    from interactions_core.report import read_records, write_report

    folder = scratch("report")
    records = make_records(folder)
    page = folder / "report.html"
    episodes = sum(1 for _ in records.open("rb"))

    def report() -> float:
        t0 = time.perf_counter()
        write_report(read_records([str(records)]), page)
        return time.perf_counter() - t0

    def floor() -> float:
        t0 = time.perf_counter()
        loads = json.loads
        with records.open("rb") as handle:
            for line in handle:
                loads(line)
        return time.perf_counter() - t0

    timed = alternate_calls(report, floor, repeats=max(3, min(repeats, 7)))
    assert episodes == EPISODES, (episodes, EPISODES)
    size = page.stat().st_size
    mib = records.stat().st_size / (1 << 20)
    return [
        Row.at_most(
            SPEED,
            GOAL,
            timed.ratio,
            timed.describe("report", "json.loads of every line") + f"; records file {mib:.0f} MiB",
            REPRODUCE,
        ),
        Row(
            SIZE,
            "<= 1.00x",
            size / PAGE_LIMIT,
            size <= PAGE_LIMIT,
            f"{size / 1024:.0f} KiB page from a {mib:.0f} MiB records file",
            REPRODUCE,
        ),
    ]
