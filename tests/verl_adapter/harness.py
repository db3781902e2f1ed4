"""Drive verl's own rollout workers without a GPU or a model hub.

Two workers run the same agent loops: the legacy ``AgentLoopWorker``
(``trainer.use_v1=false``), which returns the padded batch, and verl's default v1
worker ``AgentLoopWorkerTQ``, which returns nothing and writes each trajectory
into TransferQueue. Both are built in the test process (the v1 class is taken
out of its ``@ray.remote`` wrapper), so the scripted server and the test doubles
are the ones the loops call. TransferQueue itself needs Ray: its controller and
storage units are actors on a local cluster, started once for the session.

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
instantiates the loop per trajectory with hydra and runs it; the legacy worker pads
the batch, the v1 worker stores each trajectory, which :func:`rollout` reads back
from TransferQueue as the v1 trainer does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
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


#: verl's rollout workers, as the ``worker_kind`` fixture names them.
WORKER_KINDS = ("legacy", "tq")
#: Set per test by the ``worker_kind`` fixture: the worker :func:`make_worker` builds.
WORKER_KIND = "legacy"


def make_worker(config: Any, server: ScriptedServer) -> Any:
    """verl's rollout worker of :data:`WORKER_KIND`, built in this process (no Ray actor).

    ``tq`` is verl's default v1 worker; it needs TransferQueue, started here on
    first use and kept for the test session.
    """
    if WORKER_KIND == "tq":
        start_transfer_queue()
        return tq_worker_class()(config, llm_client=server)
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    return AgentLoopWorker(config, llm_client=server)


def tq_worker_class() -> type:
    """``AgentLoopWorkerTQ`` as the plain class its ``@ray.remote`` decorator wraps.

    Ray keeps the decorated class as ``__ray_actor_class__``; instantiating it
    directly runs verl's worker code in this process, as the legacy harness does.
    """
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    actor_class: type = AgentLoopWorkerTQ.__ray_actor_class__
    return actor_class


_transfer_queue_started = False


def start_transfer_queue() -> None:
    """A local Ray cluster with TransferQueue's controller and storage (once per process)."""
    global _transfer_queue_started
    if _transfer_queue_started:
        return
    import ray
    import transfer_queue as tq

    # A cluster of its own, even when another one runs on this machine. TransferQueue's
    # controller and each storage unit reserve one (logical) CPU: one unit is plenty.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    _transfer_queue_started = True


def stop_transfer_queue() -> None:
    """Close TransferQueue and its Ray cluster, if :func:`start_transfer_queue` started them."""
    global _transfer_queue_started
    if not _transfer_queue_started:
        return
    import ray
    import transfer_queue as tq

    tq.close()
    ray.shutdown()
    _transfer_queue_started = False


def _columns(rows: Sequence[dict[str, Any]], agent_name: str) -> dict[str, np.ndarray]:
    """The non-tensor columns verl's dataset gives a batch (``raw_prompt``, ``extra_info``, ...)."""
    n = len(rows)

    def column(values: list[Any]) -> np.ndarray:
        array = np.empty(n, dtype=object)
        array[:] = values
        return array

    return {
        "raw_prompt": column([list(row["prompt"]) for row in rows]),
        "extra_info": column([dict(row.get("extra_info") or {}) for row in rows]),
        "agent_name": column([row.get("agent_name", agent_name) for row in rows]),
        "index": column([row.get("index", i) for i, row in enumerate(rows)]),
    }


def make_batch(rows: Sequence[dict[str, Any]], *, agent_name: str = "interactions") -> DataProto:
    """A rollout batch for the legacy worker, as verl's dataset gives it."""
    non_tensor = _columns(rows, agent_name)
    return DataProto(batch=None, non_tensor_batch=non_tensor, meta_info={"global_steps": 1})


@dataclass
class Rollout:
    """A v1 rollout read back from TransferQueue, shaped as the legacy worker's output.

    ``batch`` holds the right-padded ``responses``, ``response_mask``,
    ``rollout_log_probs`` and ``rm_scores``; ``non_tensor_batch`` the
    ``extra_fields`` spread into columns and ``__num_turns__``, one row per
    trajectory in prompt order (then session order), as the legacy worker lays
    them out. ``prompt_status`` is each prompt's final TransferQueue status and
    ``tags`` each trajectory's tag, which the v1 trainer's replay buffer reads.
    """

    batch: dict[str, torch.Tensor]
    non_tensor_batch: dict[str, np.ndarray]
    prompt_status: list[str] = field(default_factory=list)
    tags: list[dict[str, Any]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)


#: The TransferQueue partition of training rollouts.
PARTITION = "train"


class _Failures(logging.Handler):
    """Keeps the exceptions verl's v1 worker logs for prompts it marks as failed."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


async def _tq_rollout(
    worker: Any, rows: Sequence[dict[str, Any]], agent_name: str, raise_failures: bool
) -> Rollout:
    """Feed ``rows`` to the v1 worker as the v1 trainer does and read the results back.

    The trainer registers each prompt (its ``uid``) in TransferQueue as pending and
    calls ``generate_sequences``, which only spawns one task per prompt; here the
    tasks are awaited (and cancelled with the rollout), then every prompt's status
    and trajectories are read and the keys cleared. A prompt whose agent loop
    raised is marked ``failure`` and the error only logged; with
    ``raise_failures`` that logged error is raised, as the legacy worker raises it.
    """
    import transfer_queue as tq
    from verl.utils import tensordict_utils as tu

    # verl splits trajectory keys ``{uid}_{session}_{index}`` on "_": none in the uid.
    uids = [uuid.uuid4().hex for _ in rows]
    columns = _columns(rows, agent_name)
    columns["uid"] = np.array(uids, dtype=object)
    batch = tu.get_tensordict(columns)
    tu.assign_non_tensor_data(batch, "global_steps", 1)
    pending = [{"is_prompt": True, "status": "pending", "global_steps": 1} for _ in uids]
    await tq.async_kv_batch_put(keys=uids, partition_id=PARTITION, tags=pending)

    failures = _Failures()
    verl_logger = logging.getLogger("verl.trainer.ppo.v1.agent_loop_tq")
    verl_logger.addHandler(failures)
    try:
        await worker.generate_sequences(batch)
        prompts = list(worker.background_tasks)
        try:
            await asyncio.gather(*prompts)
        except BaseException:
            # Cancelled: the prompts' agent loops are cancelled and finish first.
            for task in prompts:
                task.cancel()
            await asyncio.gather(*prompts, return_exceptions=True)
            await tq.async_kv_clear(keys=uids, partition_id=PARTITION)
            raise
    finally:
        verl_logger.removeHandler(failures)

    listing = (await tq.async_kv_list(PARTITION)).get(PARTITION, {})
    keys = [
        key
        for uid in uids
        for key in sorted(
            (k for k in listing if k.startswith(f"{uid}_")),
            key=lambda k: [int(part) for part in k.split("_")[1:]],  # session, then output
        )
    ]
    try:
        status = [str(listing[uid].get("status")) for uid in uids]
        if raise_failures and "failure" in status:
            if failures.errors:
                raise failures.errors[0]
            raise RuntimeError(f"a prompt failed without a logged error: {status}")
        data = await tq.async_kv_batch_get(keys=keys, partition_id=PARTITION) if keys else None
    finally:
        await tq.async_kv_clear(keys=uids + keys, partition_id=PARTITION)
    out = _padded(data, worker.tokenizer.pad_token_id) if data is not None else _empty()
    out.prompt_status = status
    out.tags = [dict(listing[key]) for key in keys]
    out.errors = failures.errors
    return out


def _per_row(value: Any) -> list[Any]:
    """One entry per trajectory of a field read back (stacked, jagged or not a tensor)."""
    if isinstance(value, torch.Tensor):
        return list(value.unbind(0))
    if hasattr(value, "tolist"):  # a NonTensorStack
        return list(value.tolist())
    return list(value)  # plain values come back as a list


def _padded(data: Any, pad_token_id: int) -> Rollout:
    """The legacy worker's layout of the stored trajectories: right-padded, extra fields spread."""
    pads = {
        "responses": pad_token_id,
        "response_mask": 0,
        "rollout_log_probs": 0.0,
        "rm_scores": 0.0,
    }
    batch = {
        key: torch.nn.utils.rnn.pad_sequence(
            _per_row(data[key]), batch_first=True, padding_value=pad
        )
        for key, pad in pads.items()
        if key in data.keys()  # noqa: SIM118 - TensorDict has no plain membership test
    }
    extra = [dict(fields) for fields in _per_row(data["extra_fields"])]
    names = sorted({key for fields in extra for key in fields})
    non_tensor: dict[str, np.ndarray] = {}
    for name in names:
        column = np.empty(len(extra), dtype=object)
        column[:] = [fields.get(name) for fields in extra]
        non_tensor[name] = column
    non_tensor["__num_turns__"] = np.array([int(n) for n in _per_row(data["num_turns"])])
    return Rollout(batch=batch, non_tensor_batch=non_tensor)


def _empty() -> Rollout:
    return Rollout(batch={}, non_tensor_batch={})


async def rollout(
    worker: Any,
    rows: Sequence[dict[str, Any]],
    *,
    agent_name: str = "interactions",
    raise_failures: bool = True,
) -> Any:
    """Run ``rows`` through either worker; the legacy ``DataProto`` or a :class:`Rollout`."""
    if _transfer_queue_started and isinstance(worker, tq_worker_class()):
        return await _tq_rollout(worker, rows, agent_name, raise_failures)
    return await worker.generate_sequences(make_batch(rows, agent_name=agent_name))


def run_batch(worker: Any, rows: Sequence[dict[str, Any]], **kwargs: Any) -> Any:
    """Run ``rows`` through the worker on a fresh event loop (see :func:`rollout`)."""
    return asyncio.run(rollout(worker, rows, **kwargs))


# -- setups and rows the tests share ----------------------------------------------------


def write_setup(tmp_path: Path, interactions: str, name: str = "interactions") -> Path:
    """An interactions config and the agent-loop YAML naming the adapter with it."""
    config = tmp_path / "interactions.yaml"
    config.write_text(interactions)
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        f"- name: {name}\n"
        "  _target_: interactions_core.integrations.verl.InteractionAgentLoop\n"
        f"  interaction_config: {config}\n"
    )
    return loops


def row(question: str, **interaction_kwargs: Any) -> dict[str, Any]:
    """A dataset row asking ``question``, with the interaction's kwargs in ``extra_info``."""
    return {
        "prompt": [{"role": "user", "content": question}],
        "extra_info": {"interaction_kwargs": interaction_kwargs},
    }


def column(out: Any, key: str) -> list[Any]:
    """A non-tensor column of either worker's output, as a list."""
    return list(out.non_tensor_batch[key])


#: Two interactions of one plugin, told apart by name: the strict and the flexible extractor.
TWO = """\
default: strict
interaction:
  - name: strict
    plugin: gsm8k
  - name: flexible
    plugin: gsm8k
    config: {method: flexible}
"""


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
