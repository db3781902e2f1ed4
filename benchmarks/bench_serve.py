"""What serving costs: a served gsm8k step against a local call, and episodes per second.

    python benchmarks/bench_serve.py           # needs interactions-core[openenv]
    python benchmarks/bench_serve.py --quick   # shorter runs (what `nox -s serve` does)
    nox -s bench_serve                         # in full, in the serve virtualenv

1. **Per-step overhead.** The same gsm8k turn judged two ways in this run: a local
   ``await interaction.generate_response(...)`` (the way docs/concepts.md teaches), and
   a step of OpenEnv's ``GenericEnvClient`` against ``interactions serve`` on
   127.0.0.1 (JSON over a WebSocket, the episode bookkeeping, the round trip).
   Reported: both medians, their difference (the overhead) and their ratio.
2. **Throughput.** ``C`` clients (C = 1, 16, 64), each on its own connection,
   play gsm8k episodes (reset, a wrong answer, a right one) back to back for a
   fixed time; reported: episodes per second over all clients. The clients run
   in one process on the same machine as the server, so on a 2-core machine
   they compete with it for the CPU: the figures are a floor for a remote trainer.

The table goes to stdout; a full run (no ``--quick``) also rewrites the generated
block of ``docs/serve.md`` (``nox -s bench_serve``; ``--no-docs`` leaves it alone).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import ROOT, DocsBlock

CONFIG = "interaction:\n  - name: gsm8k\n"
PROMPT = [{"role": "user", "content": "Janet has 16 eggs; she eats 3 and bakes 4. $2 each?"}]
KWARGS = {"name": "gsm8k", "ground_truth": "18"}
WRONG = "She sells 9 eggs at $2.\n#### 17"
RIGHT = "She sells 9 eggs at $2.\n#### 18"
#: Concurrent clients of the throughput rows.
CONCURRENCY = (1, 16, 64)
#: The table's rows, in order (tests/test_benchmark_docs.py checks the docs' block against them).
ROWS = (
    "local gsm8k turn (median)",
    "served gsm8k step (median)",
    "per-step overhead of serving",
    "served / local",
    *(f"episodes/s, {c} concurrent client{'s' if c > 1 else ''}" for c in CONCURRENCY),
)
HEADER = "| measure | value |"
DOCS = DocsBlock(ROOT / "docs" / "serve.md", "bench_serve.py", "bench_serve")


def start_server(folder: Path, max_sessions: int) -> tuple[subprocess.Popen[bytes], str]:
    config = folder / "config.yaml"
    config.write_text(CONFIG)
    log = folder / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "interactions_core",
                "serve",
                str(config),
                "--port",
                "0",
                "--max-sessions",
                str(max_sessions),
                "--log-level",
                "warning",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    # --log-level warning hides the "listening" line: find the port from /proc instead.
    while time.monotonic() < deadline:
        port = _listening_port(proc.pid)
        if port:
            url = f"http://127.0.0.1:{port}"
            try:
                urllib.request.urlopen(url + "/health", timeout=5).read()
                return proc, url
            except OSError:
                pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text()}")


def _listening_port(pid: int) -> int | None:
    """The TCP port process ``pid`` listens on (Linux), from its socket inodes."""
    try:
        inodes = {
            os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1]
            for fd in os.listdir(f"/proc/{pid}/fd")
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        }
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                return int(fields[1].split(":")[1], 16)
    except OSError:
        return None
    return None


async def local_steps(n: int) -> list[float]:
    """Seconds per judged turn, calling the interaction directly."""
    from interactions_core import load_interactions

    gsm8k = load_interactions({"interaction": [{"name": "gsm8k"}]})["gsm8k"]
    times = []
    for _ in range(n):
        sid = await gsm8k.start_interaction(ground_truth="18")
        messages = [*PROMPT, {"role": "assistant", "content": WRONG}]
        t0 = time.perf_counter()
        await gsm8k.generate_response(sid, messages)
        times.append(time.perf_counter() - t0)
        await gsm8k.finalize_interaction(sid)
    return times


async def served_steps(url: str, n: int) -> list[float]:
    """Seconds per judged turn through OpenEnv's client and the server."""
    from openenv.core import GenericEnvClient

    times = []
    async with GenericEnvClient(base_url=url) as env:
        for _ in range(n):
            await env.reset(prompt=PROMPT, interaction_kwargs=KWARGS)
            t0 = time.perf_counter()
            await env.step({"content": WRONG})
            times.append(time.perf_counter() - t0)
    return times


async def throughput(url: str, clients: int, seconds: float) -> float:
    """Episodes per second with ``clients`` concurrent connections."""
    from openenv.core import GenericEnvClient

    done = 0
    stop = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        async with GenericEnvClient(base_url=url) as env:
            while time.perf_counter() < stop:
                await env.reset(prompt=PROMPT, interaction_kwargs=KWARGS)
                await env.step({"content": WRONG})
                result = await env.step({"content": RIGHT})
                assert result.done and result.observation["final_score"] == 1.0
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return done / (time.perf_counter() - started)


def table(
    full: bool, steps: int, seconds: float, local: float, served: float, rates: dict[int, float]
) -> str:
    """The results as the docs show them: a line saying how they were measured, then rows."""
    values = [
        f"{local * 1e6:.1f} us",
        f"{served * 1e6:.0f} us",
        f"{(served - local) * 1e6:.0f} us",
        f"{served / local:.0f}x",
        *(f"{rates[c]:.0f}" for c in CONCURRENCY),
    ]
    lines = [
        f"interactions serve benchmark ({'full' if full else 'quick'} run), this machine: "
        f"{os.cpu_count()} cores shared by the server and its clients; medians of {steps} "
        f"steps each side, episodes/s over {seconds:.0f} s per client count",
        "",
        HEADER,
        "|---|---|",
        *(f"| {title} | {value} |" for title, value in zip(ROWS, values, strict=True)),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/serve.md's generated block"
    )
    args = parser.parse_args(argv)
    write_docs = DOCS.wanted(full_run=not args.quick, no_docs=args.no_docs)
    steps = 200 if args.quick else 1000
    seconds = 2.0 if args.quick else 6.0
    folder = Path(tempfile.mkdtemp(prefix="interactions-bench-serve-"))
    proc, url = start_server(folder, max(CONCURRENCY))
    try:
        asyncio.run(served_steps(url, 20))  # warm up both sides
        local = statistics.median(asyncio.run(local_steps(steps)))
        served = statistics.median(asyncio.run(served_steps(url, steps)))
        rates = {c: asyncio.run(throughput(url, c, seconds)) for c in CONCURRENCY}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    text = table(not args.quick, steps, seconds, local, served, rates)
    print(text)
    if proc.returncode != 0:
        print(f"the server exited with {proc.returncode}", file=sys.stderr)
        return 1
    if write_docs:
        DOCS.write(text)
        print(f"[bench] table written to {DOCS.where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
