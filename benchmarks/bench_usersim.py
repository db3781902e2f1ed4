"""A simulated user: ``interactions run`` with ``usersim`` against a bare asyncio client.

1,000 episodes of 3 assistant turns, 256 in flight, against one local server
that answers every request after 50 ms (``_chat_server.py``, its own process,
answering ``SCORE: 8``, which the simulated user never ends on and the judge
reads as 8/10). Each episode is 6 requests: 3 assistant turns (the ``openai``
policy), 2 simulated-user turns and 1 judge call (the ``usersim`` interaction),
6,000 in all:

* the runtime: ``interactions run usersim.yaml --policy openai --concurrency 256
  --json``, the command ``docs/usersim.md`` teaches; its figure is the summary's
  ``elapsed_s``;
* the baseline: ``_usersim_bare.py``, 256 asyncio workers with a kept-alive
  connection each, sending the same requests in the same order and reading the
  judge's score, nothing else.

Goal: the runtime at most 1.3x the baseline (medians of alternating runs). The
latency-bound ideal is ``ceil(1000 / 256) * 6 * 50 ms = 1.2 s``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PYTHON, Row, clean_env, interactions_command, scratch

EPISODES = 1000
TURNS = 3
CONCURRENCY = 256
LATENCY = 0.05
GOAL = 1.3
HERE = Path(__file__).resolve().parent
REPRODUCE = "python benchmarks/run.py --only usersim"
TITLE = (
    "Simulated user: `run --concurrency 256` (usersim, 1,000 x 3 turns, 6,000 x 50 ms) "
    "/ bare asyncio client"
)
#: The rows this module reports, in order (docs/performance.md's table is checked against them).
ROWS = (TITLE,)


def write_files(folder: Path, url: str) -> tuple[Path, Path]:
    """The dataset (a goal per sample) and the config (simulator and judge at ``url``)."""
    data = folder / "support.jsonl"
    with data.open("w", encoding="utf-8") as out:
        for i in range(EPISODES):
            sample = {
                "id": i,
                "prompt": [{"role": "user", "content": f"Hello, I have question {i}."}],
                "interaction_kwargs": {
                    "name": "support",
                    "goal": f"Get an answer to question {i}.",
                },
            }
            out.write(json.dumps(sample) + "\n")
    config = folder / "usersim.yaml"
    config.write_text(
        "interaction:\n  - name: support\n    plugin: usersim\n    config:\n"
        f"      base_url: {url}\n      model: bench\n      max_turns: {TURNS}\n",
        encoding="utf-8",
    )
    return data, config


def start_server() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [PYTHON, str(HERE / "_chat_server.py"), "--latency", str(LATENCY), "--answer", "SCORE: 8"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    port = server.stdout.readline().strip()
    if not port.isdigit():
        server.kill()
        raise RuntimeError("the benchmark server did not start")
    return server, f"http://127.0.0.1:{port}/v1"


def elapsed(cmd: list[str], env: dict[str, str]) -> dict[str, object]:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def run(repeats: int) -> list[Row]:
    repeats = max(3, min(repeats, 9))
    folder = scratch("usersim")
    env = clean_env(XDG_CACHE_HOME=str(folder / "cache"))
    server, url = start_server()
    try:
        data, config = write_files(folder, url)
        ours = [*interactions_command(), "run", str(config), "--data", str(data)]
        ours += ["--policy", "openai", "--model", "bench", "--base-url", url]
        ours += ["--concurrency", str(CONCURRENCY), "--json", "--no-progress"]
        bare = [PYTHON, str(HERE / "_usersim_bare.py"), str(data), url, str(CONCURRENCY), "3"]
        commands = {"ours": ours, "bare": bare}
        times: dict[str, list[float]] = {"ours": [], "bare": []}
        requests: list[object] = []

        def once(which: str) -> float:
            out = elapsed(commands[which], env)
            if which == "ours":
                assert out["episodes"] == EPISODES and not out["errors"], out
                assert out["turns"] == {"3": EPISODES}, out["turns"]
                calls = out["interaction_usage"]
                assert isinstance(calls, dict) and calls["requests"] == 3 * EPISODES, calls
                requests.append(calls["requests"])
            else:
                assert out["requests"] == 2 * TURNS * EPISODES, out
            return float(out["elapsed_s"])  # type: ignore[arg-type]

        for which in commands:  # warm-up: the index cache, bytecode, the server's accept queue
            once(which)
        for i in range(repeats):
            for which in ("bare", "ours") if i % 2 else ("ours", "bare"):
                times[which].append(once(which))
    finally:
        server.kill()
        server.wait()
    ours_s, bare_s = statistics.median(times["ours"]), statistics.median(times["bare"])
    return [
        Row.at_most(
            TITLE,
            GOAL,
            ours_s / bare_s,
            f"{ours_s * 1e3:.0f} ms / {bare_s * 1e3:.0f} ms (medians of {repeats}; ideal 1,200 ms)",
            REPRODUCE,
        )
    ]


if __name__ == "__main__":
    started = time.perf_counter()
    for row in run(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        print(row)
    print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
