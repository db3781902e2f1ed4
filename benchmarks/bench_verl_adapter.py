"""The verl agent-loop adapter's overhead over a bare agent loop (``nox -s bench_verl``).

Both sides run inside verl's own ``AgentLoopWorker`` with the same scripted
model (wrong answer, then right: two generations, two interaction calls per
episode) and the same gsm8k plugin instance:

* ``interactions`` -- :class:`InteractionAgentLoop` as the migration guide
  configures it;
* ``bare`` -- the smallest agent loop that makes the same calls, written here on
  verl's ``AgentLoopBase`` helpers: build the prompt, generate, merge the tokens,
  call ``generate_response``, append the feedback, and ``calculate_score`` at the
  end; no tools, no limits but the turn count, no finalize guarantee, no routing.

Batches of each alternate, and the ratio of the median batch times is reported
with the per-turn difference. Needs verl (run it through the nox session).

    python benchmarks/bench_verl_adapter.py [--batch 64] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "verl_adapter"))

from harness import (  # noqa: E402
    ScriptedServer,
    build_model_dir,
    make_batch,
    make_worker,
    trainer_config,
)
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput  # noqa: E402

from interactions_core.compat.verl_agent_loop import interactions_for  # noqa: E402

CONFIG_TEXT = "default: gsm8k\ninteraction:\n  - name: gsm8k\n"
TURNS = 2  # assistant turns per episode: wrong, then right


class BareLoop(AgentLoopBase):
    """The same calls as the adapter, written out by hand for one interaction."""

    def __init__(self, *args: Any, interaction_config: str, **kwargs: Any) -> None:
        kwargs.pop("tools", None)
        super().__init__(*args, **kwargs)
        self.interaction = interactions_for(interaction_config).get("gsm8k")[1]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        ikw = dict(kwargs["extra_info"]["interaction_kwargs"])
        request_id = f"bare-{id(self)}"
        await self.interaction.start_interaction(request_id, **ikw)
        ids = await self.ct_build_initial_tokens(messages)
        prompt_len = len(ids)
        mask: list[int] = []
        scores = []
        for _ in range(TURNS):
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=ids, sampling_params=sampling_params
            )
            merged, mask, _ = await self.ct_merge_assistant_token(ids, out.token_ids, mask)
            ids = merged.token_ids
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": text})
            done, feedback, score, _extra = await self.interaction.generate_response(
                request_id, messages, **ikw
            )
            scores.append(score)
            if done:
                break
            previous = list(messages)
            messages.append({"role": "user", "content": feedback})
            merge = getattr(self, "ct_merge_context_msg", None) or self.ct_merge_non_assistant_msg
            merged, mask, _ = await merge(previous, messages, ids, mask)
            ids = merged.token_ids
        reward = await self.interaction.calculate_score(request_id)
        await self.interaction.finalize_interaction(request_id)
        return AgentLoopOutput(
            prompt_ids=ids[:prompt_len],
            response_ids=ids[prompt_len:],
            response_mask=mask,
            reward_score=reward,
            num_turns=1 + 2 * len(scores),
            metrics={},
            extra_fields={"turn_scores": scores},
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="episodes per batch")
    parser.add_argument("--repeats", type=int, default=15, help="batches per side")
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)  # verl's per-trajectory notes would drown the table
    folder = Path(tempfile.mkdtemp(prefix="bench-verl-"))
    model = build_model_dir(folder / "model")
    config = folder / "interactions.yaml"
    config.write_text(CONFIG_TEXT)
    loops = folder / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.compat.verl_agent_loop.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
        "- name: bare\n"
        f"  _target_: {__name__ if __name__ != '__main__' else 'bench_verl_adapter'}.BareLoop\n"
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
        "| benchmark | measured | detail |",
        "|---|---|---|",
        f"| verl adapter vs bare agent loop | {adapter / bare:.2f}x | "
        f"median batch of {args.batch} episodes x {TURNS} turns: {adapter * 1e3:.1f} ms vs "
        f"{bare * 1e3:.1f} ms; {per_turn_us:+.0f} us per turn; {args.repeats} alternating "
        "batches; verl's worker, Continuous Token tokenization, scripted model |",
    ]
    table = "\n".join(lines)
    print(table)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "verl_adapter.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.modules.setdefault("bench_verl_adapter", sys.modules["__main__"])
    raise SystemExit(main())
