"""What Ray costs and what it buys: pooled calls, batching, replicas, sharded runs.

    python benchmarks/bench_ray.py            # full (a few minutes); needs Ray
    python benchmarks/bench_ray.py --quick    # fewer repetitions (what `nox -s ray` runs)
    nox -s bench_ray                          # in the Ray virtualenv

Starts a local cluster limited to 2 CPUs, on the loopback interface. Every row
compares two things measured in this run (ratios of medians, alternating runs),
like the other benchmarks:

1. **Per-call overhead.** One gsm8k ``generate_response`` awaited at a time,
   through a 1-replica pool against a local instance: the microseconds a Ray
   round trip adds to each call. Then 64 sessions in flight at once, unbatched
   against batched: what batching saves per call when calls overlap.
2. **Replicas.** A judge that burns 2 ms of CPU per turn (the kind of
   interaction worth pooling), 64 sessions in flight, served by 1, 2 and 4
   replicas: turns per second, relative to 1 replica.
3. **Sharded run.** ``interactions run`` on the GSM8K replay (or the demo data
   repeated when the shared data is absent), with ``--ray ADDRESS`` against
   without: wall time ratio, connecting to the running cluster included; then
   the same with the 2 ms judge, where episodes cost CPU and sharding can pay.

The results go to stdout and ``benchmarks/results/ray.md``; a full run (no
``--quick``) also rewrites the generated block of ``docs/ray.md`` (``--no-docs``
leaves it alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import ROOT, DocsBlock

HERE = Path(__file__).resolve().parent

ANSWER = [{"role": "assistant", "content": "She sold 48 + 24 = 72 clips.\n#### 72"}]
KEYS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
#: The table's rows, in order (tests/test_benchmark_docs.py checks the docs' block against them).
ROWS = (
    "pooled call, one at a time",
    "64 sessions in flight, unbatched",
    "64 sessions in flight, batched",
    "2 ms judge, 1 replica",
    "2 ms judge, 2 replicas",
    "2 ms judge, 4 replicas",
    "sharded run, GSM8K replay (µs per turn)",
    "sharded run, 2 ms judge, 4 turns each",
)
HEADER = "| measurement | measured | ratio | note |"
DOCS = DocsBlock(ROOT / "docs" / "ray.md", "bench_ray.py", "bench_ray")
JUDGE = """
import time
from interactions_core import SessionInteraction

class BurnJudge(SessionInteraction):
    '''Spends ``burn_ms`` of CPU per turn, like a small model or a checker would.'''

    def new_session(self, **kwargs):
        return {}

    async def respond(self, state, messages, **kwargs):
        end = time.process_time() + 0.002
        while time.process_time() < end:
            pass
        return False, "noted", 1.0, {}
"""


def private_cluster_env() -> None:
    """Set up this process's environment for the benchmark's own local cluster.

    Done when the benchmark runs, not when the module is imported (the docs' tests
    import it for its row titles and must not change their own environment).
    """
    # Loopback only, no token file, no usage report: a benchmark's cluster is private.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts its workers at nice 15, so on a machine that also runs other work they
    # get the CPU last, while the local side of every comparison runs at nice 0. Same
    # priority for both sides, unless the caller chose otherwise.
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.pop("RAY_ADDRESS", None)


def median_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(a) / statistics.median(b)


async def sequential_calls(interaction, n: int) -> float:
    """Seconds per generate_response, one at a time (a session per 50 calls)."""
    started = time.perf_counter()
    for _ in range(0, n, 50):
        sid = await interaction.start_interaction(ground_truth="72")
        for _turn in range(50):
            await interaction.generate_response(sid, ANSWER)
        await interaction.finalize_interaction(sid)
    return (time.perf_counter() - started) / n


async def concurrent_turns(interaction, sessions: int, turns: int) -> float:
    """Seconds per turn with ``sessions`` sessions each playing ``turns`` turns at once."""

    async def one() -> None:
        sid = await interaction.start_interaction(ground_truth="72")
        for _ in range(turns):
            await interaction.generate_response(sid, ANSWER)
        await interaction.finalize_interaction(sid)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(sessions)))
    return (time.perf_counter() - started) / (sessions * turns)


def per_call(repeats: int, calls: int) -> list[str]:
    from interactions_core import load_interactions
    from interactions_core.ray import remote_interactions_from_config

    config = {"interaction": [{"name": "gsm8k"}]}
    local = load_interactions(config)["gsm8k"]
    pool = remote_interactions_from_config(config, replicas=1, resources={"CPU": 0})["gsm8k"]
    batched = remote_interactions_from_config(config, replicas=1, resources={"CPU": 0}, batch=True)[
        "gsm8k"
    ]
    rows = []
    try:
        loc, rem = [], []
        for _ in range(repeats):
            loc.append(asyncio.run(sequential_calls(local, calls)))
            rem.append(asyncio.run(sequential_calls(pool, calls)))
        added = (statistics.median(rem) - statistics.median(loc)) * 1e6
        rows.append(
            f"| pooled call, one at a time | {statistics.median(rem) * 1e6:,.0f} µs per call "
            f"against {statistics.median(loc) * 1e6:,.1f} µs local | "
            f"{median_ratio(rem, loc):,.0f}x | Ray adds {added:,.0f} µs per call |"
        )
        unb, bat, loc2 = [], [], []
        for _ in range(repeats):
            unb.append(asyncio.run(concurrent_turns(pool, 64, max(2, calls // 64))))
            bat.append(asyncio.run(concurrent_turns(batched, 64, max(2, calls // 64))))
            loc2.append(asyncio.run(concurrent_turns(local, 64, max(2, calls // 64))))
        rows.append(
            f"| 64 sessions in flight, unbatched | {statistics.median(unb) * 1e6:,.0f} µs per "
            f"turn | {median_ratio(unb, loc2):,.0f}x local | calls overlap in the actor |"
        )
        rows.append(
            f"| 64 sessions in flight, batched | {statistics.median(bat) * 1e6:,.0f} µs per "
            f"turn | {median_ratio(bat, loc2):,.0f}x local | "
            f"{median_ratio(unb, bat):.1f}x faster than unbatched |"
        )
    finally:
        pool.shutdown()
        batched.shutdown()
    return rows


def judge_site() -> Path:
    """A folder with the ``bench-judge`` distribution (entry point ``burn``), made visible
    to this process and, through ``PYTHONPATH``, to the cluster's workers."""
    site = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    info = site / "bench_judge-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-judge\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[interactions_core.interactions]\nburn = bench_judge:BurnJudge\n"
    )
    (site / "bench_judge.py").write_text(textwrap.dedent(JUDGE))
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = str(site)
    return site


def replicas(repeats: int, turns: int) -> list[str]:
    from interactions_core.ray import pool_for_entry

    results: dict[int, list[float]] = {1: [], 2: [], 4: []}
    pools = {
        n: pool_for_entry(
            {"interaction": [{"name": "burn"}]}, "burn", n, resources={"CPU": 0}, batch=True
        )
        for n in results
    }
    try:
        for _ in range(repeats):
            for n, pool in pools.items():
                results[n].append(asyncio.run(concurrent_turns(pool, 64, turns)))
    finally:
        for pool in pools.values():
            pool.shutdown()
    base = statistics.median(results[1])
    return [
        f"| 2 ms judge, {n} replica{'s' if n > 1 else ''} | "
        f"{1 / statistics.median(results[n]):,.0f} turns/s | "
        f"{base / statistics.median(results[n]):.2f}x of 1 replica | batched; 2 cores |"
        for n in results
    ]


def replay_data(folder: Path) -> tuple[Path, Path]:
    shared = ROOT.parent / "shared" / "data" / "gsm8k" / "example_model_solutions.jsonl"
    data = folder / "data.jsonl"
    config = folder / "config.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n    config: {method: flexible}\n")
    with data.open("w") as out:
        if shared.is_file():
            for line in shared.open():
                row = json.loads(line)
                truth = row["ground_truth"].rsplit("A: ", 1)[1].strip().replace(",", "")
                sample = {
                    "prompt": [{"role": "user", "content": row["question"]}],
                    "interaction_kwargs": {"name": "gsm8k", "ground_truth": truth},
                    "responses": [row[k]["solution"] for k in KEYS],
                }
                out.write(json.dumps(sample) + "\n")
        else:
            demo = (ROOT / "examples" / "gsm8k_demo.jsonl").read_text().splitlines()
            for _ in range(1319 // len(demo) + 1):
                out.write("\n".join(demo) + "\n")
    return config, data


def sharded(repeats: int, address: str, plugin: str = "gsm8k", limit: int = 0) -> list[str]:
    folder = Path(tempfile.mkdtemp(prefix="bench-ray-run-"))
    config, data = replay_data(folder)
    if plugin != "gsm8k":
        config.write_text(f"interaction:\n  - name: gsm8k\n    plugin: {plugin}\n")
    base = [sys.executable, "-m", "interactions_core", "run", str(config), "--data", str(data)]
    if limit:
        base += ["--limit", str(limit)]
    base += ["--output", str(folder / "out.jsonl"), "--overwrite", "--json"]
    local: list[float] = []
    remote: list[float] = []
    for _ in range(repeats):
        for cmd, into in ((base, local), ([*base, "--ray", address], remote)):
            started = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ))
            into.append(time.perf_counter() - started)
    episodes = limit or sum(1 for _ in data.open())
    what = "GSM8K replay (µs per turn)" if plugin == "gsm8k" else "2 ms judge, 4 turns each"
    return [
        f"| sharded run, {what} | {statistics.median(remote):.2f} s with "
        f"--ray against {statistics.median(local):.2f} s local | "
        f"{median_ratio(remote, local):.2f}x | {episodes} episodes; 2 workers on 2 cores; "
        "connecting included |"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/ray.md's generated block"
    )
    args = parser.parse_args(argv)
    write_docs = DOCS.wanted(full_run=not args.quick, no_docs=args.no_docs)
    repeats = 3 if args.quick else 7
    calls = 500 if args.quick else 2000

    private_cluster_env()
    judge_site()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        rows = [
            *per_call(repeats, calls),
            *replicas(repeats, 4 if args.quick else 8),
            *sharded(2 if args.quick else 5, address),
            *sharded(2 if args.quick else 3, address, "burn", 300 if args.quick else 1000),
        ]
    finally:
        ray.shutdown()
    text = table(not args.quick, rows)
    print(text)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "ray.md").write_text(text)
    if write_docs:
        DOCS.write(text)
        print(f"[bench] table written to {DOCS.where}", file=sys.stderr)
    return 0


def table(full: bool, rows: list[str]) -> str:
    """The results as the docs show them: a line saying where they were measured, then rows."""
    titles = [row.split(" | ", 1)[0].removeprefix("| ") for row in rows]
    if titles != list(ROWS):
        raise RuntimeError(f"bench_ray measured {titles}, but declares {list(ROWS)}")
    niceness = os.environ["RAY_worker_niceness"]  # noqa: SIM112 - Ray's own spelling
    header = (
        f"Ray benchmark ({'full' if full else 'quick'}), this machine: "
        f"{os.cpu_count()} cores, local cluster of 2 CPUs, Ray workers at nice "
        f"{niceness}, load average {os.getloadavg()[0]:.1f} at the end"
    )
    return "\n".join([header, "", HEADER, "|---|---|---|---|", *rows]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
