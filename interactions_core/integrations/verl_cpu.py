"""verl on CPU, for a smoke run: one real GRPO step of an agent loop, no GPU.

verl's trainer (``python -m verl.trainer.main_ppo``) assumes an accelerator
everywhere. This module adds what it lacks to run end to end on a laptop with a
tiny model (see ``docs/verl-on-a-laptop.md`` and ``examples/verl_cpu_smoke.py``):

* **a CPU platform** (:class:`CPUPlatform`), registered in verl's platform layer
  under the name ``cpu`` and chosen by verl's own override ``VERL_PLATFORM=cpu``;
* **a CPU rollout** named ``hf_cpu`` (``actor_rollout_ref.rollout.name=hf_cpu``):
  a Ray actor that generates with ``transformers`` and answers verl's
  token-in/token-out ``generate`` with :class:`TokenOutput` ids and log-probs
  (:class:`HFCPUServer`), the replica that starts it (:class:`HFCPUReplica`), and
  the in-worker adapter verl's hybrid engine pushes the trained weights through
  (:class:`HFCPUWeightSync`);
* **four workarounds**, each a small named patch of a verl module, applied right
  after that module is imported (:data:`WORKAROUNDS`). Each first checks that the
  code it patches still looks as expected and raises :class:`VerlCPUError`,
  naming itself and the installed verl, when it does not: a verl release that
  fixes or changes one fails loudly instead of running half patched.

:func:`register` installs all of it; it is idempotent. The project's
``verl.plugins`` entry point calls it in every process when ``VERL_PLATFORM=cpu``
is set. That happens *while* ``import verl`` runs, so only the platform is
registered at once (``verl.plugin.platform`` is already imported by then); every
other part waits for the verl module it touches with a post-import hook
(:class:`_AfterImport`), which avoids importing verl's trainer half-initialized
and costs nothing in processes that never import those modules.

Scripted answers (opt-in, smoke runs only): a random tiny model always scores 0,
so nothing would show that an interaction's rewards reach verl. With
``actor_rollout_ref.rollout.engine_kwargs.hf_cpu.scripted_answers`` pointing at a
JSON list of ``{"question": ..., "answer": ...}``, the server does not sample: it
finds the prompt's question in that answer key and replies as
:class:`ScriptedAnswers` says (half the trajectories answer wrong, then right;
the other half stay wrong). The tokens are forced, the log-probs are still the
model's own. Everything else (the interaction judging the decoded text, the
feedback turn, verl's reward, advantage and update) is real.

Checked against verl :data:`CHECKED_VERL`; other releases are refused by
:func:`register`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import inspect
import json
import logging
import sys
import threading
import types
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "CHECKED_VERL",
    "PLATFORM_NAME",
    "ROLLOUT_NAME",
    "WORKAROUNDS",
    "ScriptedAnswers",
    "VerlCPUError",
    "register",
]

#: The verl releases whose code the workarounds were written against.
CHECKED_VERL = ("0.9.0", "0.9.1")
#: The platform name (``VERL_PLATFORM=cpu``) and the rollout name (``rollout.name``).
PLATFORM_NAME = "cpu"
ROLLOUT_NAME = "hf_cpu"

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_registered = False


class VerlCPUError(RuntimeError):
    """The installed verl does not look as the CPU mode expects."""


def _verl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verl")
    except PackageNotFoundError:  # pragma: no cover - verl is what loads us
        return "unknown"


def _fail(workaround: str, problem: str) -> VerlCPUError:
    return VerlCPUError(
        f"verl CPU mode, workaround '{workaround}': {problem} (installed verl "
        f"{_verl_version()}; written against {', '.join(CHECKED_VERL)}). Update "
        "interactions_core.integrations.verl_cpu for this verl release."
    )


# -- the platform -------------------------------------------------------------------


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _cpu_device_module() -> types.ModuleType:
    """``torch.cpu`` plus the memory and RNG calls verl makes on its device module.

    verl calls ``get_torch_device().empty_cache()``, ``mem_get_info()``,
    ``get_rng_state()`` ... as it would on ``torch.cuda``; on CPU those are
    no-ops, zeros or the global CPU generator.
    """
    import torch
    import torch.cpu

    module = types.ModuleType("interactions_core_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(module, name, getattr(torch.cpu, name))
    for name in (
        "empty_cache",
        "ipc_collect",
        "reset_peak_memory_stats",
        "set_per_process_memory_fraction",
    ):
        setattr(module, name, _noop)
    for name in (
        "memory_allocated",
        "memory_reserved",
        "max_memory_allocated",
        "max_memory_reserved",
    ):
        setattr(module, name, _zero)
    module.mem_get_info = lambda *a, **k: (0, 0)  # type: ignore[attr-defined]
    module.get_rng_state = lambda *a, **k: torch.get_rng_state()  # type: ignore[attr-defined]
    module.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)  # type: ignore[attr-defined]
    module.manual_seed = torch.manual_seed  # type: ignore[attr-defined]
    module.manual_seed_all = torch.manual_seed  # type: ignore[attr-defined]
    module.get_device_name = lambda *a, **k: "cpu"  # type: ignore[attr-defined]
    module.set_device = _noop  # type: ignore[attr-defined]
    module.current_device = lambda: torch.device("cpu")  # type: ignore[attr-defined]
    return module


def _platform_class() -> type[Any]:
    """verl's platform interface, answered for the CPU (built lazily: it subclasses verl's)."""
    import torch
    from verl.plugin.platform import PlatformBase

    device_module = _cpu_device_module()

    class CPUPlatform(PlatformBase):  # type: ignore[misc]
        """The CPU as verl's accelerator: gloo for collectives, no memory to manage.

        Ray schedules verl's workers on ``GPU`` resources whatever the platform
        (its resource-pool check counts only ``GPU``/``NPU``), so this platform
        keeps ``GPU`` as the resource name: on a CPU-only Ray cluster started with
        ``ray_init.num_gpus=N`` those are N scheduling slots, not devices.
        ``current_device`` is ``torch.device("cpu")``: verl moves tensors with
        ``.to(get_device_id())``, which needs a device, not an index.
        """

        @property
        def device_name(self) -> str:
            return "cpu"

        @property
        def vendor_name(self) -> str:
            return "cpu"

        @property
        def device_module(self) -> types.ModuleType:
            return device_module

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            return True

        def current_device(self) -> Any:
            return torch.device("cpu")

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextmanager
        def nvtx_range(self, msg: str) -> Any:
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None

    return CPUPlatform


def _register_platform() -> None:
    from verl.plugin.platform import PlatformRegistry

    if PlatformRegistry.get(PLATFORM_NAME) is None:
        PlatformRegistry.register(platform=PLATFORM_NAME)(_platform_class())


# -- the workarounds ----------------------------------------------------------------


def _source(obj: Any, workaround: str) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError) as exc:
        raise _fail(workaround, f"cannot read the source of {obj!r}: {exc}") from exc


def _gloo_only_backend(module: types.ModuleType) -> None:
    """``verl.utils.distributed``: on CPU the process group is plain ``cpu:gloo``.

    verl builds ``cpu:gloo,{device}:{backend}``; with device ``cpu`` that is
    ``cpu:gloo,cpu:gloo``, which torch refuses ("Duplicate device type cpu").
    """
    name = "gloo-only-backend"
    original = getattr(module, "initialize_global_process_group_ray", None)
    if original is None or getattr(original, "_interactions_cpu", False):
        if original is None:
            raise _fail(name, "verl.utils.distributed.initialize_global_process_group_ray is gone")
        return
    if "backend" not in inspect.signature(original).parameters:
        raise _fail(name, "initialize_global_process_group_ray takes no 'backend' any more")
    if 'f"cpu:gloo,{get_device_name()}' not in _source(original, name):
        raise _fail(name, "the default backend string changed; this workaround may be obsolete")

    def initialize_global_process_group_ray(
        timeout_second: Any = None, backend: str | None = None
    ) -> Any:
        if backend is None and module.get_device_name() == "cpu":
            backend = "cpu:gloo"
        return original(timeout_second=timeout_second, backend=backend)

    initialize_global_process_group_ray._interactions_cpu = True  # type: ignore[attr-defined]
    initialize_global_process_group_ray.__doc__ = original.__doc__
    module.initialize_global_process_group_ray = initialize_global_process_group_ray  # type: ignore[attr-defined]


def _fsdp2_engine_on_cpu(module: types.ModuleType) -> None:
    """``verl.workers.engine.fsdp.transformer_impl``: the FSDP2 engine serves ``cpu`` too.

    verl registers its FSDP engines for ``cuda`` and ``npu`` only ("No engine
    registered for device='cpu'"). FSDP2 (``fully_shard``) runs on CPU over gloo;
    FSDP1 does not (``sync_module_states=True`` needs a GPU), so only ``fsdp2`` is
    added. The reference model's ``CPUOffloadPolicy(pin_memory=True)`` needs an
    accelerator driver to pin memory, so the offload policy the engine builds
    does not pin on CPU.
    """
    name = "fsdp2-engine-on-cpu"
    from verl.workers.engine.base import EngineRegistry

    engines = getattr(EngineRegistry, "_engines", None)
    registry = (engines or {}).get("language_model", {}).get("fsdp2")
    if not isinstance(registry, dict) or "cuda" not in registry:
        raise _fail(name, "EngineRegistry no longer holds an fsdp2 'cuda' language-model engine")
    registry.setdefault("cpu", registry["cuda"])

    policy = getattr(module, "CPUOffloadPolicy", None)
    if getattr(policy, "_interactions_cpu", False):
        return
    if policy is None:
        raise _fail(name, "transformer_impl no longer imports CPUOffloadPolicy")
    if "CPUOffloadPolicy(pin_memory=True)" not in _source(module, name):
        raise _fail(name, "the reference model no longer pins its offloaded memory")

    def unpinned_offload_policy(*args: Any, **kwargs: Any) -> Any:
        kwargs["pin_memory"] = False
        return policy(*args, **kwargs)

    unpinned_offload_policy._interactions_cpu = True  # type: ignore[attr-defined]
    module.CPUOffloadPolicy = unpinned_offload_policy  # type: ignore[attr-defined]


def _hf_cpu_replica(module: types.ModuleType) -> None:
    """``verl.workers.rollout.replica``: the ``hf_cpu`` rollout replica exists."""
    name = "hf-cpu-replica"
    registry = getattr(module, "RolloutReplicaRegistry", None)
    if registry is None or not callable(getattr(registry, "register", None)):
        raise _fail(name, "verl.workers.rollout.replica.RolloutReplicaRegistry.register is gone")
    if ROLLOUT_NAME not in getattr(registry, "_registry", {}):
        registry.register(ROLLOUT_NAME, _replica_class)


def _hf_cpu_weight_sync(module: types.ModuleType) -> None:
    """``verl.workers.rollout.base``: the in-worker adapter of ``hf_cpu`` exists.

    verl's hybrid worker builds its rollout adapter by name from the module-level
    ``_ROLLOUT_REGISTRY`` (there is no public registration for it).
    """
    name = "hf-cpu-weight-sync"
    table = getattr(module, "_ROLLOUT_REGISTRY", None)
    if not isinstance(table, dict) or ("vllm", "async") not in table:
        raise _fail(name, "verl.workers.rollout.base._ROLLOUT_REGISTRY is gone or changed shape")
    table.setdefault((ROLLOUT_NAME, "async"), f"{__name__}.HFCPUWeightSync")


#: Each workaround: its name, the verl module it patches, the patch.
WORKAROUNDS: tuple[tuple[str, str, Callable[[types.ModuleType], None]], ...] = (
    ("gloo-only-backend", "verl.utils.distributed", _gloo_only_backend),
    ("fsdp2-engine-on-cpu", "verl.workers.engine.fsdp.transformer_impl", _fsdp2_engine_on_cpu),
    ("hf-cpu-replica", "verl.workers.rollout.replica", _hf_cpu_replica),
    ("hf-cpu-weight-sync", "verl.workers.rollout.base", _hf_cpu_weight_sync),
)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs ``then(module)`` right after the module ``name`` finishes importing.

    It wraps the loader the other finders return, so the module is imported
    exactly as it would be otherwise and patched before anyone else sees it.
    """

    def __init__(self, name: str, then: Callable[[types.ModuleType], None]) -> None:
        self.name = name
        self.then = then
        self.loader: importlib.abc.Loader | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.loader is not None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                self.loader = spec.loader
                spec.loader = self
                return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        assert self.loader is not None
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        assert self.loader is not None
        module.__spec__.loader = self.loader  # type: ignore[union-attr]
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        self.then(module)


def _when_imported(name: str, then: Callable[[types.ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


def register() -> None:
    """Install the CPU platform, the ``hf_cpu`` rollout and the workarounds (idempotent).

    Raises :class:`VerlCPUError` on a verl release the workarounds were not
    checked against.
    """
    global _registered
    with _lock:
        if _registered:
            return
        version = _verl_version()
        if version not in CHECKED_VERL:
            raise VerlCPUError(
                f"verl CPU mode supports verl {', '.join(CHECKED_VERL)}, not {version}: "
                "see docs/verl-on-a-laptop.md"
            )
        _register_platform()
        for _name, module, patch in WORKAROUNDS:
            _when_imported(module, patch)
        _registered = True


# -- the rollout ----------------------------------------------------------------------


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


def _replica_class() -> type[Any]:
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
