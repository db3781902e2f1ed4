"""Served-model evaluation: ``interactions run --policy openai`` against a bare asyncio client.

Both send the same 2,000 single-turn GSM8K requests (the 1,319 test questions,
then the first 681 again) to one local server that answers each after 50 ms
(``_chat_server.py``, its own process), with 256 in flight:

* the runtime: ``interactions run gsm8k.yaml --policy openai --concurrency 256
  --max-assistant-turns 1 --json``, the command the docs teach, with no other
  knob; its figure is the summary's ``elapsed_s`` (episodes played, scored,
  recorded and counted);
* the baseline: ``_bare_client.py``, 256 asyncio workers with a kept-alive
  connection each, posting and parsing, nothing else; its figure is its own
  ``elapsed_s`` over the same span (first sample read to last response).

Goal: the runtime at most 1.3x the baseline (medians of alternating runs). The
latency-bound ideal is ``ceil(2000 / 256) * 50 ms = 0.40 s``. Two more rows
give, for information, the whole processes' wall times and CPU times
(interpreter start and imports included): the runtime does more work per
episode than the bare client (it reads and checks rows, scores with gsm8k,
counts), which the server's latency hides on an idle machine and which shows
when other processes compete for the cores.

Needs ``../shared/data/gsm8k/test.jsonl``; the samples are written to a
temporary folder, never into the repository.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PYTHON, ROOT, Row, clean_env, interactions_command, scratch

EPISODES = 2000
CONCURRENCY = 256
LATENCY = 0.05
GOAL = 1.3
HERE = Path(__file__).resolve().parent
GSM8K = ROOT.parent / "shared" / "data" / "gsm8k" / "test.jsonl"
REPRODUCE = "python benchmarks/run.py --only served"
CONFIG = "interaction:\n  - name: gsm8k\n"


def write_samples(folder: Path) -> Path:
    rows = [json.loads(line) for line in GSM8K.read_text(encoding="utf-8").splitlines() if line]
    path = folder / "gsm8k_2000.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(EPISODES):
            row = rows[i % len(rows)]
            truth = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
            sample = {
                "id": i,
                "prompt": [{"role": "user", "content": row["question"]}],
                "interaction_kwargs": {"name": "gsm8k", "ground_truth": truth},
            }
            out.write(json.dumps(sample) + "\n")
    return path


def start_server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [PYTHON, str(HERE / "_chat_server.py"), "--latency", str(LATENCY)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    port = server.stdout.readline().strip()
    if not port.isdigit():
        server.kill()
        raise RuntimeError("the benchmark server did not start")
    return server, f"http://127.0.0.1:{port}/v1"


def timed_json(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, object], float, float]:
    """Run ``cmd``; its JSON output, the process's wall time and its CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout), wall, cpu


def run(repeats: int) -> list[Row]:
    title = "Served model: `run --concurrency 256` (openai, 2,000 x 50 ms) / bare asyncio client"
    if not GSM8K.is_file():
        return [Row.skipped(title, f"<= {GOAL:.2f}x", f"not measured: {GSM8K} missing", REPRODUCE)]
    repeats = max(3, min(repeats, 15))
    folder = scratch("served")
    data = write_samples(folder)
    config = folder / "gsm8k.yaml"
    config.write_text(CONFIG)
    env = clean_env(XDG_CACHE_HOME=str(folder / "cache"))
    server, url = start_server()
    try:
        ours = [
            *interactions_command(),
            "run",
            str(config),
            "--data",
            str(data),
            "--policy",
            "openai",
            "--model",
            "bench",
            "--base-url",
            url,
            "--concurrency",
            str(CONCURRENCY),
            "--max-assistant-turns",
            "1",
            "--json",
            "--no-progress",
        ]
        bare = [PYTHON, str(HERE / "_bare_client.py"), str(data), url, str(CONCURRENCY)]
        runs: dict[str, list[tuple[float, float, float]]] = {"ours": [], "bare": []}
        in_flight: list[object] = []

        def once(which: str) -> None:
            out, wall, cpu = timed_json(ours if which == "ours" else bare, env)
            if which == "ours":
                assert out["episodes"] == EPISODES and not out["errors"], out
                in_flight.append(out["requests_in_flight_max"])
            else:
                assert out["requests"] == EPISODES, out
            runs[which].append((float(out["elapsed_s"]), wall, cpu))  # type: ignore[arg-type]

        once("ours")  # warm-up: the index cache, bytecode, the server's accept queue
        once("bare")
        runs = {"ours": [], "bare": []}
        for i in range(repeats):
            for which in ("bare", "ours") if i % 2 else ("ours", "bare"):
                once(which)
    finally:
        server.kill()
        server.wait()
    ours_run, ours_wall, ours_cpu = (statistics.median(x) for x in zip(*runs["ours"], strict=True))
    bare_run, bare_wall, bare_cpu = (statistics.median(x) for x in zip(*runs["bare"], strict=True))
    return [
        Row.at_most(
            title,
            GOAL,
            ours_run / bare_run,
            f"{ours_run * 1e3:.0f} ms / {bare_run * 1e3:.0f} ms (medians of {repeats}; ideal "
            f"400 ms; at most {max(in_flight, key=lambda v: v or 0)} requests in flight)",
            REPRODUCE,
        ),
        Row(
            "Served model, whole processes (start-up and imports included)",
            "report",
            ours_wall / bare_wall,
            None,
            f"{ours_wall * 1e3:.0f} ms / {bare_wall * 1e3:.0f} ms (medians of {repeats})",
            REPRODUCE,
        ),
        Row(
            "Served model, CPU time of the whole processes (user + system)",
            "report",
            ours_cpu / bare_cpu,
            None,
            f"{ours_cpu * 1e3:.0f} ms / {bare_cpu * 1e3:.0f} ms (medians of {repeats}); the "
            "share of the wall-time ratio that grows when other work loads the machine",
            REPRODUCE,
        ),
    ]


if __name__ == "__main__":
    for row in run(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
        print(row)
