"""The CPU rollout of smoke runs: ``hf_cpu``, a ``transformers`` model in a Ray actor.

verl's rollouts (vLLM, SGLang) need a GPU. For one real GRPO step on a laptop
with a tiny model (see ``docs/verl-on-a-laptop.md`` and
``examples/verl_cpu_smoke.py``) this module is the rollout named ``hf_cpu``
(``actor_rollout_ref.rollout.name=hf_cpu``): a Ray actor that generates with
``transformers`` and answers verl's token-in/token-out ``generate`` with
:class:`TokenOutput` ids and log-probs (:class:`HFCPUServer`), the replica that
starts it (:func:`replica_class`), and the in-worker adapter verl's hybrid engine
pushes the trained weights through (``HFCPUWeightSync``).

It is apart from the rest of the CPU mode, which lives in
:mod:`interactions_core.integrations.verl_plugin` (the CPU platform, the
workarounds, :func:`register`), because that module is imported by every
``import verl`` and must stay small and standard-library only, while this one is
imported only where verl starts or feeds a rollout: verl's registries name it by
dotted path. The CPU mode's public names are re-exported here too.

Scripted answers (opt-in, smoke runs only): a random tiny model always scores 0,
so nothing would show that an interaction's rewards reach verl. With
``actor_rollout_ref.rollout.engine_kwargs.hf_cpu.scripted_answers`` pointing at a
JSON list of ``{"question": ..., "answer": ...}``, the server does not sample: it
finds the prompt's question in that answer key and replies as
:class:`ScriptedAnswers` says (half the trajectories answer wrong, then right;
the other half stay wrong). The tokens are forced, the log-probs are still the
model's own. Everything else (the interaction judging the decoded text, the
feedback turn, verl's reward, advantage and update) is real.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .verl_plugin import (
    CHECKED_VERL,
    PLATFORM_NAME,
    ROLLOUT_NAME,
    WORKAROUNDS,
    VerlCPUError,
    register,
)

__all__ = [
    "CHECKED_VERL",
    "PLATFORM_NAME",
    "ROLLOUT_NAME",
    "WORKAROUNDS",
    "HFCPUServer",
    "ScriptedAnswers",
    "VerlCPUError",
    "register",
    "replica_class",
]


class ScriptedAnswers:
    """The opt-in scripted policy of smoke runs: replies from an answer key.

    For each question of the key, the first trajectory that asks it is a
    *solver*, the next a *stubborn* one, and so on alternately (so with an even
    ``rollout.n`` every GRPO group holds both, and the advantages are not all
    zero). Both answer wrong on their first turn; the solver says
    ``#### <answer + 1>`` and then ``The answer is <answer>.`` (right in words: a
    ``flexible`` GSM8K check accepts it, a ``strict`` one, looking for ``####``,
    does not); the stubborn one says ``#### <answer + 2>`` and then repeats
    ``The answer is <answer + 2>.``. The role of a later turn is read back from
    the first answer in the prompt, since verl gives every turn a new request id.
    """

    def __init__(self, key: Iterable[tuple[str, str]]) -> None:
        self.key = [(question, answer) for question, answer in key if question]
        self.first_turns: dict[str, int] = {}

    def reply(self, prompt: str) -> str | None:
        """The reply to a rendered prompt, or ``None`` if no known question is in it."""
        for question, answer in self.key:
            if question in prompt:
                return self._reply(prompt, question, answer)
        return None

    def _reply(self, prompt: str, question: str, answer: str) -> str:
        try:
            wrong = [str(int(float(answer)) + 1), str(int(float(answer)) + 2)]
        except ValueError:
            wrong = [answer + "1", answer + "2"]
        if prompt.count("<|im_start|>assistant") <= 1:  # only the generation prompt
            seen = self.first_turns.get(question, 0)
            self.first_turns[question] = seen + 1
            return f"#### {wrong[seen % 2]}"
        if f"#### {wrong[1]}" in prompt:
            return f"The answer is {wrong[1]}."
        return f"The answer is {answer}."


def _server_name(replica_rank: int) -> str:
    return f"interactions_hf_cpu_server_{replica_rank}"


class HFCPUServer:
    """One rollout server: a ``transformers`` causal LM in a Ray actor.

    Token ids in, :class:`TokenOutput` out, as verl's vLLM/SGLang servers answer
    its agent loops. Sampling follows ``temperature``/``top_p``/``top_k`` and
    stops at the tokenizer's EOS or the token budget; log-probs are the model's
    own for the returned tokens.
    """

    def __init__(self, model_path: str, max_model_len: int, scripted_answers: str | None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(1)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, torch_dtype=torch.float32, attn_implementation="sdpa"
        )
        self.model.eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.max_model_len = max_model_len
        self.script: ScriptedAnswers | None = None
        if scripted_answers:
            with open(scripted_answers, encoding="utf-8") as handle:
                key = [(str(r["question"]), str(r["answer"])) for r in json.load(handle)]
            self.script = ScriptedAnswers(key)
        self.weight_updates = 0
        #: The trainer step whose weights the model holds (verl tags each output with it).
        self.global_steps: int | None = None

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        **_: Any,
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        budget = self.max_model_len - len(prompt_ids)
        max_tokens = sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens")
        budget = min(budget, int(max_tokens)) if max_tokens else budget
        if budget <= 0:
            return TokenOutput(
                token_ids=[],
                log_probs=[],
                stop_reason="completed",
                extra_fields={"global_steps": self.global_steps},
            )
        ids = self._scripted(prompt_ids) if self.script is not None else None
        if ids is None:
            ids = self._sample(prompt_ids, budget, sampling_params)
        ids = ids[:budget]
        return TokenOutput(
            token_ids=ids,
            log_probs=self._logprobs(prompt_ids, ids),
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def _scripted(self, prompt_ids: list[int]) -> list[int] | None:
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        assert self.script is not None
        reply = self.script.reply(prompt)
        if reply is None:
            return None
        ids = list(self.tokenizer.encode(reply, add_special_tokens=False))
        return [*ids, int(self.tokenizer.eos_token_id)]

    def _sample(self, prompt_ids: list[int], budget: int, params: dict[str, Any]) -> list[int]:
        import torch

        temperature = float(params.get("temperature", 1.0) or 0.0)
        top_p = float(params.get("top_p", 1.0) or 1.0)
        top_k = int(params.get("top_k", -1) or -1)
        eos = self.tokenizer.eos_token_id
        out: list[int] = []
        with torch.no_grad():
            inputs = torch.tensor([prompt_ids])
            past = None
            for _ in range(budget):
                result = self.model(input_ids=inputs, past_key_values=past, use_cache=True)
                past = result.past_key_values
                logits = result.logits[0, -1].float()
                if temperature <= 0:
                    token = int(logits.argmax())
                else:
                    logits = logits / temperature
                    if top_k > 0:
                        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
                        logits[logits < kth] = -float("inf")
                    probs = torch.softmax(logits, dim=-1)
                    if top_p < 1.0:
                        sorted_probs, order = probs.sort(descending=True)
                        drop = sorted_probs.cumsum(0) - sorted_probs > top_p
                        sorted_probs[drop] = 0.0
                        probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
                    token = int(torch.multinomial(probs, 1))
                out.append(token)
                if token == eos:
                    break
                inputs = torch.tensor([[token]])
        return out

    def _logprobs(self, prompt_ids: list[int], ids: list[int]) -> list[float]:
        import torch

        if not ids:
            return []
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([[*prompt_ids, *ids]])).logits[0].float()
        scores = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
        return [float(x) for x in scores.gather(1, torch.tensor(ids)[:, None])[:, 0]]

    def load_weights(self, weights: dict[str, Any], global_steps: int | None = None) -> int:
        """Load the trainer's full weights (names as in the HF checkpoint); how many."""
        if global_steps is not None:
            self.global_steps = global_steps
        result = self.model.load_state_dict(weights, strict=False)
        if result.unexpected_keys:
            raise VerlCPUError(f"hf_cpu: unknown weight names {result.unexpected_keys[:5]}")
        self.weight_updates += 1
        return len(weights)

    def stats(self) -> dict[str, int]:
        return {"weight_updates": self.weight_updates}

    # verl drives every server through these; there is no cache or device memory here.
    async def wake_up(self) -> None: ...
    async def sleep(self) -> None: ...
    async def abort_all_requests(self, reject_request: bool = False) -> None: ...
    async def resume_generation(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...


def replica_class() -> type[Any]:
    """The ``hf_cpu`` replica (a subclass of verl's, built when verl asks for it)."""
    import ray
    from verl.workers.rollout.replica import RolloutReplica

    class HFCPUReplica(RolloutReplica):  # type: ignore[misc]
        """Starts one :class:`HFCPUServer` per replica, as a named Ray actor.

        The name lets the trainer's workers find it to push weights
        (:class:`HFCPUWeightSync`). It takes no Ray resources: the trainer's
        workers hold the CPU slots and the server only runs between their steps.
        """

        async def launch_servers(self) -> None:
            model = self.model_config
            path = getattr(model, "local_path", None) or model.path
            engine_kwargs = dict(self.config.engine_kwargs or {})
            options = dict(engine_kwargs.get(ROLLOUT_NAME) or {})
            max_len = int(self.config.prompt_length) + int(self.config.response_length)
            name = _server_name(self.replica_rank)
            actor = ray.remote(HFCPUServer).options(
                name=name, num_cpus=0, max_concurrency=self.max_concurrency
            )
            self._server_handle = actor.remote(str(path), max_len, options.get("scripted_answers"))
            self._server_address = name
            self.servers = [self._server_handle]
            await self._server_handle.stats.remote()  # wait until the model is loaded

        def rollout_worker_use_gpu(self) -> bool:
            return False

    return HFCPUReplica


def _weight_sync_base() -> type[Any]:
    from verl.workers.rollout.base import BaseRollout

    return BaseRollout  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    # verl imports the adapter by dotted path from ``_ROLLOUT_REGISTRY``; it is a
    # subclass of verl's BaseRollout, built on first access so that importing this
    # module does not import verl's rollout package.
    if name == "HFCPUWeightSync":
        cls = _weight_sync_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def _weight_sync_class() -> type[Any]:
    import ray
    import torch

    class HFCPUWeightSync(_weight_sync_base()):  # type: ignore[misc]
        """In the trainer's worker: pushes the actor's weights to the ``hf_cpu`` server.

        verl's hybrid engine hands every rank a generator of full tensors; every
        rank drains it (the FSDP gathers are collective) and the first rank of
        each rollout replica ships them to its server.
        """

        def __init__(
            self, config: Any, model_config: Any, device_mesh: Any, *args: Any, **kwargs: Any
        ) -> None:
            super().__init__(config, model_config, device_mesh, *args, **kwargs)
            tp = int(self.config.tensor_model_parallel_size) * int(
                self.config.pipeline_model_parallel_size
            )
            rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
            self.replica_rank = rank // max(tp, 1)
            self.leader = rank % max(tp, 1) == 0

        async def resume(self, tags: list[str]) -> None:
            return None

        async def release(self) -> None:
            return None

        async def update_weights(
            self, weights: Any, wire_format: str = "named_tensors", **kwargs: Any
        ) -> None:
            if wire_format != "named_tensors":
                raise VerlCPUError(f"hf_cpu receives full named tensors, not {wire_format!r}")
            state = {}
            for name, tensor in weights:
                full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
                state[name] = full.detach().to("cpu", copy=True)
            if self.leader:
                server = ray.get_actor(_server_name(self.replica_rank))
                await server.load_weights.remote(state, kwargs.get("global_steps"))

    return HFCPUWeightSync
