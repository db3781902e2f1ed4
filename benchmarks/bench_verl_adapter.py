"""The verl agent-loop adapter's overhead over a bare agent loop (``nox -s bench_verl``).

Both sides run inside verl's own ``AgentLoopWorker`` with the same scripted
model (wrong answer, then right: two generations, two interaction calls per
episode) and the same gsm8k plugin instance:

* ``interactions`` -- :class:`InteractionAgentLoop` as the migration guide
  configures it;
* ``bare`` -- the smallest agent loop that makes the same calls, written on
  verl's ``AgentLoopBase`` helpers (``_verl_bare_loop.py``): build the prompt,
  generate, merge the tokens, call ``generate_response``, append the feedback, and
  ``calculate_score`` at the end; no tools, no limits but the turn count, no
  finalize guarantee, no routing.

Batches of each alternate, and the ratio of the median batch times is reported
with the per-turn difference. Needs verl (run it through the nox session); verl
is imported only when it runs, so the docs' tests can read :data:`ROWS`.

    nox -s bench_verl                      # in full, in the newest verl's environment
    python benchmarks/bench_verl_adapter.py [--batch 64] [--repeats 15] [--no-docs]

The table goes to stdout and ``benchmarks/results/verl_adapter.md``; a full run
(the default batch and repeats) also rewrites the generated block of
``docs/migrating-from-verl.md`` (``--no-docs`` leaves it alone).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, DocsBlock

HERE = Path(__file__).resolve().parent
CONFIG_TEXT = "default: gsm8k\ninteraction:\n  - name: gsm8k\n"
BATCH, REPEATS = 64, 15  # a full run's episodes per batch and batches per side
#: The table's rows, in order (tests/test_benchmark_docs.py checks the docs' block against them).
ROWS = ("verl adapter vs bare agent loop",)
HEADER = "| benchmark | measured | detail |"
DOCS = DocsBlock(ROOT / "docs" / "migrating-from-verl.md", "bench_verl_adapter.py", "bench_verl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=BATCH, help="episodes per batch")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="batches per side")
    parser.add_argument(
        "--no-docs",
        action="store_true",
        help="do not rewrite docs/migrating-from-verl.md's generated block",
    )
    args = parser.parse_args(argv)
    full = (args.batch, args.repeats) == (BATCH, REPEATS)
    write_docs = DOCS.wanted(full_run=full, no_docs=args.no_docs)
    # verl and the tests' harness (which imports it), only when the benchmark runs.
    sys.path.insert(0, str(ROOT / "tests" / "verl_adapter"))
    from _verl_bare_loop import TURNS
    from harness import ScriptedServer, build_model_dir, make_batch, make_worker, trainer_config

    logging.disable(logging.WARNING)  # verl's per-trajectory notes would drown the table
    folder = Path(tempfile.mkdtemp(prefix="bench-verl-"))
    model = build_model_dir(folder / "model")
    config = folder / "interactions.yaml"
    config.write_text(CONFIG_TEXT)
    loops = folder / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
        "- name: bare\n"
        "  _target_: _verl_bare_loop.BareLoop\n"
        f"  interaction_config: {config}\n"
    )
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    server = ScriptedServer(tokenizer, lambda prompt, n: "#### 12" if n else "#### 11")
    worker = make_worker(
        trainer_config(model, loops, max_assistant_turns=TURNS, continuous_token=True), server
    )
    rows = [
        {"prompt": [{"role": "user", "content": f"question {i}"}],
         "extra_info": {"interaction_kwargs": {"name": "gsm8k", "ground_truth": "12"}}}
        for i in range(args.batch)
    ]  # fmt: skip
    times: dict[str, list[float]] = {"interactions": [], "bare": []}

    async def one(agent: str) -> float:
        batch = make_batch(rows, agent_name=agent)
        started = time.perf_counter()
        out = await worker.generate_sequences(batch)
        elapsed = time.perf_counter() - started
        rewards = out.batch["rm_scores"].sum(dim=-1).tolist()
        assert rewards == [1.0] * args.batch, (agent, rewards)  # both sides did the work
        return elapsed

    async def run_all() -> None:
        for agent in ("interactions", "bare"):  # warm-up
            await one(agent)
        for _ in range(args.repeats):
            for agent in ("interactions", "bare"):
                times[agent].append(await one(agent))

    asyncio.run(run_all())
    adapter = statistics.median(times["interactions"])
    bare = statistics.median(times["bare"])
    turns = args.batch * TURNS
    per_turn_us = (adapter - bare) / turns * 1e6
    lines = [
        f"verl adapter benchmark ({'full' if full else 'custom'} run), this machine: "
        f"{os.cpu_count()} cores",
        "",
        HEADER,
        "|---|---|---|",
        f"| {ROWS[0]} | {adapter / bare:.2f}x | "
        f"median batch of {args.batch} episodes x {TURNS} turns: {adapter * 1e3:.1f} ms vs "
        f"{bare * 1e3:.1f} ms; {per_turn_us:+.0f} us per turn; {args.repeats} alternating "
        "batches; verl's worker, Continuous Token tokenization, scripted model |",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "verl_adapter.md").write_text(table)
    if write_docs:
        DOCS.write(table)
        print(f"[bench] table written to {DOCS.where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
