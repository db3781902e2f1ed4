"""One real verl GRPO step of the ``interactions`` agent loop, on CPU, in about a minute.

    python examples/verl_cpu_smoke.py            # verl's default (v1) trainer
    python examples/verl_cpu_smoke.py --legacy   # the legacy trainer (trainer.use_v1=false)

Needs the ``[verl]`` extra and the ``interactions-gsm8k`` plugin installed. It
runs ``python -m verl.trainer.main_ppo`` (verl's own entry point: config check,
Ray worker groups, FSDP2 over gloo, weight sync, agent-loop rollout, reward,
GRPO advantage, reference log-probs, actor update) with ``VERL_PLATFORM=cpu``,
which makes the project's verl plugin (:mod:`interactions_core.integrations.verl_plugin`)
install the CPU platform and workarounds and the ``hf_cpu`` rollout of
:mod:`interactions_core.integrations.verl_cpu`. Everything it needs is made in
a temporary folder:

* the data: ``interactions data gsm8k --agent-name interactions`` on GSM8K's
  raw JSONL (by default the shared test split, used for training *and*
  validation: it is the only split there), a few rows, as parquet;
* a tiny Qwen2-style model with random weights (2 layers, hidden 64) and a
  byte-level BPE tokenizer trained on those rows, with a ChatML chat template;
* the agent-loop YAML naming the adapter and its interaction config: the
  ``gsm8k`` interaction, ``flexible`` (the last number counts), wrapped by
  :class:`LedgerGsm8k`, which writes a line to a ledger file when a session
  starts and when it is finalized, so the run can prove no session was left open.

The rollout is scripted (see ``docs/verl-on-a-laptop.md``): a random model
always scores 0, so the CPU rollout answers from the data's answer key instead
of sampling. Of the two trajectories of each question, one answers
``#### <answer + 1>`` (wrong: the interaction asks to try again, and the
feedback is appended as a user turn) and then ``The answer is <answer>.``
(right for the ``flexible`` interaction, which ends the episode with 1.0: 4
turns); the other stays wrong until ``max_assistant_turns`` (score 0.0: 6
turns). verl's own GSM8K rule, which wants the last ``#### `` answer, would
score every response 0, so ``critic/score/mean == 0.5`` shows that the
interaction's score is what verl trained on, and GRPO gets non-zero advantages.

The last line printed is JSON: ``{"metrics": {...}, "sessions": {...},
"seconds": ..., "trainer": "v1"|"legacy"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
from interactions_gsm8k.interaction import Gsm8kInteraction

HERE = Path(__file__).resolve().parent
DEFAULT_INPUT = HERE.parent.parent / "shared" / "data" / "gsm8k" / "test.jsonl"

#: Sizes that keep one step at about a minute on two cores.
ROWS = 4
PROMPT_LENGTH = 256
RESPONSE_LENGTH = 128
MAX_ASSISTANT_TURNS = 3


# -- the interaction: gsm8k, plus a ledger of sessions ---------------------------------


@attrs.frozen
class LedgerConfig:
    """``gsm8k``'s option, plus where the ledger goes."""

    ledger: str
    method: str = "flexible"


class LedgerGsm8k(Gsm8kInteraction):
    """The ``gsm8k`` interaction, writing ``start``/``end`` lines to a ledger file.

    It runs in verl's agent-loop workers (other processes); the file is how the
    example sees how many sessions were opened and finalized.
    """

    config_schema = LedgerConfig  # type: ignore[assignment]

    def _write(self, what: str) -> None:
        with open(self.settings.ledger, "a", encoding="utf-8") as handle:
            handle.write(f"{what} {os.getpid()}\n")

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> Any:
        self._write("start")
        return super().new_session(ground_truth, **kwargs)

    def end_session(self, state: Any) -> None:
        self._write("end")


def read_ledger(path: Path) -> dict[str, int]:
    """How many sessions were started and finalized, and how many are still open."""
    lines = path.read_text(encoding="utf-8").split() if path.exists() else []
    started, ended = lines.count("start"), lines.count("end")
    return {"started": started, "finalized": ended, "open": started - ended}


# -- what the run needs, made on the spot ---------------------------------------------


CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_model(folder: Path, texts: list[str]) -> Path:
    """A byte-level BPE tokenizer trained on ``texts`` and a random tiny Qwen2 model."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=PROMPT_LENGTH + RESPONSE_LENGTH + 64,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder


def build_data(source: Path, folder: Path, rows: int) -> tuple[Path, list[dict[str, Any]]]:
    """``interactions data gsm8k`` rows as parquet, and the same rows read back."""
    import pyarrow.parquet as pq

    output = folder / "gsm8k.parquet"
    command = [sys.executable, "-m", "interactions_core", "data", "gsm8k", "--input", str(source)]
    command += ["--agent-name", "interactions", "--limit", str(rows), "--output", str(output)]
    subprocess.run(command, check=True)
    return output, pq.read_table(output).to_pylist()


def write_configs(folder: Path, table: list[dict[str, Any]]) -> dict[str, Path]:
    """The interaction config, the agent-loop YAML and the scripted rollout's answer key."""
    ledger = folder / "sessions.ledger"
    interactions = folder / "interactions.yaml"
    interactions.write_text(
        "default: gsm8k\n"
        "interaction:\n"
        "  - name: gsm8k\n"
        f"    class_name: {Path(__file__).stem}.LedgerGsm8k\n"
        f"    config: {{method: flexible, ledger: {json.dumps(str(ledger))}}}\n"
    )
    loops = folder / "agent_loops.yaml"
    loops.write_text(
        "- name: interactions\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {json.dumps(str(interactions))}\n"
    )
    answers = folder / "answer_key.json"
    key = [
        {"question": row["extra_info"]["question"], "answer": row["reward_model"]["ground_truth"]}
        for row in table
    ]
    answers.write_text(json.dumps(key))
    rollouts = folder / "rollouts"
    return {"ledger": ledger, "agent_loops": loops, "answers": answers, "rollouts": rollouts}


def overrides(data: Path, model: Path, files: dict[str, Path], *, legacy: bool) -> list[str]:
    """verl's Hydra overrides for one GRPO step on CPU."""
    rollout = "actor_rollout_ref.rollout"
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data}",
        f"data.val_files={data}",
        f"data.train_batch_size={ROWS}",
        f"data.max_prompt_length={PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.model.use_remove_padding=False",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={ROWS}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        f"{rollout}.log_prob_micro_batch_size_per_gpu=2",
        f"{rollout}.name=hf_cpu",
        f"{rollout}.mode=async",
        f"{rollout}.n=2",
        f"{rollout}.tensor_model_parallel_size=1",
        f"{rollout}.load_format=auto",
        f"{rollout}.multi_turn.enable=True",
        f"{rollout}.multi_turn.max_assistant_turns={MAX_ASSISTANT_TURNS}",
        f"{rollout}.agent.agent_loop_config_path={files['agent_loops']}",
        f"{rollout}.agent.default_agent_loop=interactions",
        f"{rollout}.agent.num_workers=1",
        f"+{rollout}.engine_kwargs.hf_cpu.scripted_answers={files['answers']}",
        "reward.num_workers=1",
        "trainer.device=cpu",
        "trainer.nnodes=1",
        "trainer.n_gpus_per_node=1",
        "trainer.total_training_steps=1",
        "trainer.total_epochs=1",
        "trainer.logger=[console]",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=False",
        f"trainer.rollout_data_dir={files['rollouts']}",
        f"trainer.use_v1={'false' if legacy else 'true'}",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "+ray_kwargs.ray_init.num_gpus=1",
        "ray_kwargs.ray_init.num_cpus=8",
    ]


STEP_LINE = re.compile(r"\bstep:1 - (.*)$", re.MULTILINE)
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf")


def step_metrics(output: str) -> dict[str, float]:
    """The metrics of training step 1 from verl's console logger line."""
    found = STEP_LINE.findall(output)
    if not found:
        return {}
    metrics: dict[str, float] = {}
    for item in found[-1].split(" - "):
        key, _, value = item.partition(":")
        match = NUMBER.search(value.rsplit("(", 1)[-1])
        if match:
            metrics[key.strip()] = float(match.group(0))
    return metrics


def unsupported(*, legacy: bool) -> str | None:
    """Why the installed verl cannot run this, or ``None``."""
    from importlib.metadata import version

    if legacy and version("verl") == "0.9.0":
        return (
            "verl 0.9.0's legacy trainer cannot run on CPU: its log-prob step unpads "
            "with flash_attn on every device. Use the v1 trainer (no --legacy) or verl 0.9.1."
        )
    return None


def run_verl(
    command: list[str], env: dict[str, str], folder: Path, sink: Any, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run verl; past ``timeout``, stop it with SIGTERM so its Ray cluster shuts down too."""
    process = subprocess.Popen(command, env=env, cwd=folder, stdout=sink, stderr=subprocess.STDOUT)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        sink.write(f"\nverl did not finish within {timeout:.0f} s: stopped\n")
        code = 124
    return subprocess.CompletedProcess(command, code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="GSM8K raw JSONL")
    parser.add_argument("--legacy", action="store_true", help="the legacy trainer (use_v1=false)")
    parser.add_argument("--keep", type=Path, help="make the files here and keep them")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds verl may take")
    args = parser.parse_args(argv)

    refusal = unsupported(legacy=args.legacy)
    if refusal:
        print(refusal)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="verl-cpu-smoke-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        data, table = build_data(args.input, folder, ROWS)
        texts = [json.dumps(row["prompt"]) for row in table] + [
            "#### The answer is 0123456789. Your response is correct! incorrect! "
            "You need to reflect on your answer and try again. user assistant system"
        ]
        model = build_model(folder / "model", texts * 4)
        files = write_configs(folder, table)
        env = dict(os.environ)
        env["VERL_PLATFORM"] = "cpu"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        env.setdefault("RAY_DEDUP_LOGS", "0")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        command = [sys.executable, "-m", "verl.trainer.main_ppo"]
        command += overrides(data, model, files, legacy=args.legacy)
        log = folder / "verl.log"
        with log.open("w", encoding="utf-8") as sink:
            run = run_verl(command, env, folder, sink, args.timeout)
        output = log.read_text(encoding="utf-8", errors="replace")
        if run.returncode:
            sys.stdout.write(output[-8000:])
        metrics = step_metrics(output)
        sessions = read_ledger(files["ledger"])
    seconds = round(time.monotonic() - started, 1)
    trainer = "legacy" if args.legacy else "v1"
    print(f"verl {trainer} trainer, one GRPO step on CPU: exit {run.returncode}, {seconds} s")
    for key in ("critic/score/mean", "num_turns/min", "num_turns/max", "actor/pg_loss"):
        # verl 0.9.0's v1 trainer logs the turns as training/num_turns/...
        print(f"  {key:20} {metrics.get(key, metrics.get('training/' + key))}")
    print(f"  sessions             {sessions}")
    print(
        json.dumps(
            {
                "metrics": metrics,
                "sessions": sessions,
                "seconds": seconds,
                "trainer": trainer,
                "returncode": run.returncode,
            }
        )
    )
    return run.returncode or (0 if metrics else 1)


if __name__ == "__main__":
    sys.exit(main())
