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
3. **Against OpenEnv's own server.** The same job served two ways: 32 clients,
   each on its own WebSocket, all at once play an episode (reset, a wrong answer,
   a right one) against a trivial judge (is the ground truth in the answer?),
   over and over; reported: the wall time of one such round. One server is
   ``interactions serve`` with the judge as an interaction; the other is
   OpenEnv 0.10's ``create_app`` serving a minimal environment written the way
   OpenEnv's template teaches (synchronous ``reset``/``step``, which OpenEnv runs
   in its thread pool) that does the same: keeps the conversation, judges the
   answer, ends the episode on the right one. Then the ratio (goal: at most
   0.8x), and the same rounds with each reset naming a row served with ``--data``
   (``reset(split=, index=)``) instead of bringing its prompt. OpenEnv's server
   compresses WebSocket messages (uvicorn's default) and ``interactions serve``
   does not unless ``--ws-compression`` is given, so the rounds are also played
   against a server with it, and that ratio is reported too.

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
from typing import Any

from _common import ROOT, DocsBlock

CONFIG = "interaction:\n  - name: gsm8k\n"
PROMPT = [{"role": "user", "content": "Janet has 16 eggs; she eats 3 and bakes 4. $2 each?"}]
KWARGS = {"name": "gsm8k", "ground_truth": "18"}
WRONG = "She sells 9 eggs at $2.\n#### 17"
RIGHT = "She sells 9 eggs at $2.\n#### 18"
#: Concurrent clients of the throughput rows.
CONCURRENCY = (1, 16, 64)
#: Concurrent clients of the comparison with OpenEnv's own server.
ROUND_CLIENTS = 32
#: The judge both servers of the comparison serve (``class_name`` of the interaction).
JUDGE_CONFIG = "interaction:\n  - name: judge\n    class_name: bench_serve.EqualsJudge\n"
JUDGE_KWARGS = {"name": "judge", "ground_truth": "18"}
#: Rows served with --data in the comparison (each client plays a row of its own).
JUDGE_ROWS = 64
#: The table's rows, in order (tests/test_benchmark_docs.py checks the docs' block against them).
ROWS = (
    "local gsm8k turn (median)",
    "served gsm8k step (median)",
    "per-step overhead of serving",
    "served / local",
    *(f"episodes/s, {c} concurrent client{'s' if c > 1 else ''}" for c in CONCURRENCY),
    f"round of {ROUND_CLIENTS} episodes at once, OpenEnv create_app (wall)",
    f"round of {ROUND_CLIENTS} episodes at once, interactions serve (wall)",
    "interactions serve / OpenEnv create_app (goal <= 0.8x)",
    f"round of {ROUND_CLIENTS} episodes at once, interactions serve, rows from --data (wall)",
    f"round of {ROUND_CLIENTS} episodes at once, interactions serve --ws-compression (wall)",
    "interactions serve --ws-compression / OpenEnv create_app",
)
HEADER = "| measure | value |"
DOCS = DocsBlock(ROOT / "docs" / "serve.md", "bench_serve.py", "bench_serve")


def _equals_judge() -> type:
    """The comparison's trivial judge: right when the answer holds ``#### <ground truth>``."""
    from interactions_core import BaseInteraction, InteractionResult

    class EqualsJudge(BaseInteraction):
        async def generate_response(
            self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
        ) -> InteractionResult:
            right = f"#### {kwargs['ground_truth']}" in messages[-1]["content"]
            return InteractionResult(right, "right" if right else "wrong, try again", float(right))

    EqualsJudge.__module__ = __name__
    return EqualsJudge


def __getattr__(name: str) -> Any:
    """``bench_serve.EqualsJudge``, the config's ``class_name``, built on first use.

    Built lazily so that importing this script (the docs tests read ``ROWS``)
    imports neither the core nor OpenEnv.
    """
    if name == "EqualsJudge":
        judge = _equals_judge()
        globals()[name] = judge
        return judge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def start_server(
    folder: Path, max_sessions: int, config_text: str = CONFIG, *extra: str
) -> tuple[subprocess.Popen[bytes], str]:
    config = folder / "config.yaml"
    config.write_text(config_text)
    command = [
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
        *extra,
    ]
    return _start(folder, command)


def _start(folder: Path, command: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``python *command`` (a server on 127.0.0.1, any port); its process and URL."""
    log = folder / "server.log"
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent)  # the judge's module, for class_name
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *command], stdout=out, stderr=subprocess.STDOUT, env=env
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


# -- the comparison with OpenEnv's own create_app -----------------------------------------


def serve_openenv_baseline() -> None:
    """OpenEnv's ``create_app`` serving the minimal judge environment, on a free port.

    Run in its own process (``bench_serve.py --openenv-baseline``): the environment
    a user would write with OpenEnv alone, following its template.
    """
    import socket

    import uvicorn
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
    from pydantic import Field

    class JudgeAction(Action):
        content: str = Field(description="the assistant's answer")

    class JudgeObservation(Observation):
        messages: list[dict[str, Any]] = Field(default_factory=list)
        feedback: str = ""
        turn: int = 0

    class JudgeEnvironment(Environment[JudgeAction, JudgeObservation, State]):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.messages: list[dict[str, Any]] = []
            self.truth = ""
            self.turn = 0

        def reset(
            self,
            seed: int | None = None,
            episode_id: str | None = None,
            prompt: list[dict[str, Any]] | None = None,
            ground_truth: str = "",
            **kwargs: Any,
        ) -> JudgeObservation:
            self.messages = list(prompt or [])
            self.truth = ground_truth
            self.turn = 0
            return JudgeObservation(messages=list(self.messages), done=False, reward=None)

        def step(
            self, action: JudgeAction, timeout_s: float | None = None, **kwargs: Any
        ) -> JudgeObservation:
            self.turn += 1
            self.messages.append({"role": "assistant", "content": action.content})
            right = f"#### {self.truth}" in action.content
            feedback = "right" if right else "wrong, try again"
            if not right:
                self.messages.append({"role": "user", "content": feedback})
            return JudgeObservation(
                messages=list(self.messages),
                feedback=feedback,
                turn=self.turn,
                done=right,
                reward=float(right),
            )

        @property
        def state(self) -> State:
            return State(step_count=self.turn)

    app = create_app(
        JudgeEnvironment, JudgeAction, JudgeObservation, max_concurrent_envs=2 * ROUND_CLIENTS
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])


async def rounds(servers: dict[str, tuple[str, Any]], count: int) -> dict[str, float]:
    """Median seconds of one round on each server: ``ROUND_CLIENTS`` episodes at once.

    ``servers`` maps a name to its URL and ``reset(client_number)``, each
    client's reset arguments. Every client keeps its connection across rounds,
    as a trainer's workers do. The servers take turns round by round (in a
    rotating order), so a change in the machine's load weighs on all of them
    alike instead of on whichever ran last.
    """
    from contextlib import AsyncExitStack

    from openenv.core import GenericEnvClient

    async def episode(env: Any, reset: dict[str, Any]) -> None:
        await env.reset(**reset)
        await env.step({"content": WRONG})
        result = await env.step({"content": RIGHT})
        assert result.done and result.reward == 1.0, result

    async def one_round(name: str) -> float:
        reset = servers[name][1]
        t0 = time.perf_counter()
        await asyncio.gather(*(episode(env, reset(i)) for i, env in enumerate(pools[name])))
        return time.perf_counter() - t0

    names = list(servers)
    times: dict[str, list[float]] = {name: [] for name in names}
    async with AsyncExitStack() as stack:
        pools = {
            name: [
                await stack.enter_async_context(GenericEnvClient(base_url=url))
                for _ in range(ROUND_CLIENTS)
            ]
            for name, (url, _) in servers.items()
        }
        for name in names:  # warm up
            await one_round(name)
        for k in range(count):
            for name in names[k % len(names) :] + names[: k % len(names)]:
                times[name].append(await one_round(name))
    return {name: statistics.median(values) for name, values in times.items()}


def compare_with_openenv(folder: Path, count: int) -> dict[str, float]:
    """Round wall times: OpenEnv's create_app, interactions serve, and serve with --data."""
    import json

    base = folder / "openenv"
    served = folder / "judge"
    data = folder / "data"
    deflate = folder / "deflate"
    for where in (base, served, data, deflate):
        where.mkdir()
    rows = data / "judge.jsonl"
    row = json.dumps({"prompt": PROMPT, "interaction_kwargs": JUDGE_KWARGS})
    rows.write_text((row + "\n") * JUDGE_ROWS)
    procs = []
    try:
        proc, openenv_url = _start(base, [str(Path(__file__).resolve()), "--openenv-baseline"])
        procs.append(proc)
        proc, serve_url = start_server(served, 2 * ROUND_CLIENTS, JUDGE_CONFIG)
        procs.append(proc)
        proc, data_url = start_server(data, 2 * ROUND_CLIENTS, JUDGE_CONFIG, "--data", str(rows))
        procs.append(proc)
        compressed = ("--ws-compression",)
        proc, deflate_url = start_server(deflate, 2 * ROUND_CLIENTS, JUDGE_CONFIG, *compressed)
        procs.append(proc)
        judged = {"prompt": PROMPT, "interaction_kwargs": JUDGE_KWARGS}
        servers = {
            "openenv": (openenv_url, lambda i: {"prompt": PROMPT, "ground_truth": "18"}),
            "serve": (serve_url, lambda i: judged),
            "data": (data_url, lambda i: {"split": "judge", "index": i % JUDGE_ROWS}),
            "deflate": (deflate_url, lambda i: judged),
        }
        return asyncio.run(rounds(servers, count))
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def table(
    full: bool,
    steps: int,
    seconds: float,
    local: float,
    served: float,
    rates: dict[int, float],
    compared: dict[str, float],
    count: int,
) -> str:
    """The results as the docs show them: a line saying how they were measured, then rows."""
    values = [
        f"{local * 1e6:.1f} us",
        f"{served * 1e6:.0f} us",
        f"{(served - local) * 1e6:.0f} us",
        f"{served / local:.0f}x",
        *(f"{rates[c]:.0f}" for c in CONCURRENCY),
        f"{compared['openenv'] * 1e3:.1f} ms",
        f"{compared['serve'] * 1e3:.1f} ms",
        f"{compared['serve'] / compared['openenv']:.2f}x",
        f"{compared['data'] * 1e3:.1f} ms",
        f"{compared['deflate'] * 1e3:.1f} ms",
        f"{compared['deflate'] / compared['openenv']:.2f}x",
    ]
    lines = [
        f"interactions serve benchmark ({'full' if full else 'quick'} run), this machine: "
        f"{os.cpu_count()} cores shared by the server and its clients; medians of {steps} "
        f"steps each side, episodes/s over {seconds:.0f} s per client count, rounds: "
        f"medians of {count}",
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
    parser.add_argument("--openenv-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.openenv_baseline:  # the comparison's other server, in its own process
        serve_openenv_baseline()
        return 0
    write_docs = DOCS.wanted(full_run=not args.quick, no_docs=args.no_docs)
    steps = 200 if args.quick else 1000
    seconds = 2.0 if args.quick else 6.0
    count = 20 if args.quick else 150
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
    compared = compare_with_openenv(folder, count)
    text = table(not args.quick, steps, seconds, local, served, rates, compared, count)
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
