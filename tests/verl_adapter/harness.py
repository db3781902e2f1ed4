"""Drive verl's own ``AgentLoopWorker`` without Ray, a GPU or a model hub.

The pieces a real rollout needs, made locally:

* a tokenizer trained in the test (byte-level BPE from the ``tokenizers`` library,
  so any text round-trips) with a ChatML chat template that accepts a ``system``
  role (verl's Continuous Token builder renders appended turns by diffing
  templates against a synthetic system prompt), saved beside a tiny model config;
* verl's generated trainer config, pointed at that folder and at an
  ``agent_loop_config_path`` YAML naming the adapter;
* a scripted server manager standing in for vLLM/SGLang: it returns
  ``TokenOutput`` token ids (and log-probs) chosen by a script, and records every
  request so a test can check what the model was shown.

Everything else is verl's released code: the worker reads the agent-loop YAML,
instantiates the loop per trajectory with hydra, runs it and pads the batch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import verl
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.workers.rollout.replica import TokenOutput

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% endif %}"
    "{% if message.get('tool_calls') %}{% for call in message['tool_calls'] %}"
    "<tool_call>{{ call['function'] | tojson }}</tool_call>{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "The answer is #### 72 and 18 + 54 = 72. Your response is correct! incorrect, try again.",
    "You need to reflect on your answer and try again. Thank you for your weather query!",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
    "user assistant system tool 0123456789 ,.;:!?'\"()[]{}<>#+-*/=",
]


def build_model_dir(folder: Path) -> Path:
    """A tokenizer and a tiny llama config in ``folder`` (what ``model.path`` points at)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    core.train_from_iterator(CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": len(tokenizer),
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def trainer_config(
    model_dir: Path,
    agent_loop_yaml: Path,
    *,
    prompt_length: int = 512,
    response_length: int = 512,
    max_assistant_turns: int | None = None,
    max_user_turns: int | None = None,
    tool_config_path: Path | None = None,
    continuous_token: bool | None = None,
) -> Any:
    """verl's generated PPO trainer config, set up for the scripted rollout."""
    generated = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    config = OmegaConf.load(generated)
    rollout = config.actor_rollout_ref.rollout
    config.actor_rollout_ref.model.path = str(model_dir)
    rollout.name = "vllm"  # mandatory in the config; the scripted server replaces the engine
    rollout.prompt_length = prompt_length
    rollout.response_length = response_length
    rollout.multi_turn.enable = True
    rollout.multi_turn.max_assistant_turns = max_assistant_turns
    rollout.multi_turn.max_user_turns = max_user_turns
    rollout.multi_turn.tool_config_path = str(tool_config_path) if tool_config_path else None
    rollout.agent.agent_loop_config_path = str(agent_loop_yaml)
    rollout.agent.default_agent_loop = "single_turn_agent"
    if continuous_token is None:
        continuous_token = CONTINUOUS_TOKEN
    if continuous_token is not None and "continuous_token" in config.data:
        config.data.continuous_token.enable = continuous_token
    return config


#: Set per test by the ``tokenization`` fixture: verl 0.9.0 renders appended turns
#: either alone (its default) or with Continuous Token; 0.9.1 only with the latter.
CONTINUOUS_TOKEN: bool | None = None


def tokenization_modes() -> list[str]:
    """The ways the installed verl can tokenize appended turns."""
    generated = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    if "continuous_token" in OmegaConf.load(generated).data:
        return ["separate-render", "continuous-token"]
    return ["continuous-token"]


Script = Callable[[str, int], str]
"""Given the decoded prompt and how many times this request id was seen, the reply text."""


class ScriptedServer:
    """Stands in for verl's LLM server client: token ids in, token ids out.

    ``script(prompt_text, call_number)`` returns the reply text; it is encoded
    with the test tokenizer and ended with ``<|im_end|>`` as a chat model would.
    Each returned token gets a distinct log-prob, so alignment can be checked.
    """

    def __init__(self, tokenizer: Any, script: Script) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.calls: dict[str, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.replies: list[list[int]] = []
        self.next_logprob = -0.001

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        **_: Any,
    ) -> TokenOutput:
        await asyncio.sleep(0)
        number = self.calls.get(request_id, 0)
        self.calls[request_id] = number + 1
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        text = self.script(prompt, number)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        logprobs = []
        for _token in ids:
            logprobs.append(self.next_logprob)
            self.next_logprob -= 0.001
        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids)})
        self.replies.append(list(ids))
        return TokenOutput(token_ids=ids, log_probs=logprobs)


def make_worker(config: Any, server: ScriptedServer) -> Any:
    """verl's own ``AgentLoopWorker``, built in this process (no Ray actor)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    return AgentLoopWorker(config, llm_client=server)


def make_batch(rows: Sequence[dict[str, Any]], *, agent_name: str = "interactions") -> DataProto:
    """A rollout batch as verl's dataset gives it (``raw_prompt``, ``extra_info``, ...)."""
    n = len(rows)

    def column(values: list[Any]) -> np.ndarray:
        array = np.empty(n, dtype=object)
        array[:] = values
        return array

    non_tensor = {
        "raw_prompt": column([list(row["prompt"]) for row in rows]),
        "extra_info": column([dict(row.get("extra_info") or {}) for row in rows]),
        "agent_name": column([row.get("agent_name", agent_name) for row in rows]),
        "index": column([row.get("index", i) for i, row in enumerate(rows)]),
    }
    return DataProto(batch=None, non_tensor_batch=non_tensor, meta_info={"global_steps": 1})


def run_batch(worker: Any, rows: Sequence[dict[str, Any]], **kwargs: Any) -> DataProto:
    """Run ``rows`` through the worker's ``generate_sequences`` on a fresh event loop."""
    return asyncio.run(worker.generate_sequences(make_batch(rows, **kwargs)))


def spans(mask: Sequence[int], value: int) -> list[tuple[int, int]]:
    """``[start, end)`` runs of ``value`` in ``mask``."""
    out: list[tuple[int, int]] = []
    start = None
    for i, bit in enumerate([*mask, None]):
        if bit == value and start is None:
            start = i
        elif bit != value and start is not None:
            out.append((start, i))
            start = None
    return out
