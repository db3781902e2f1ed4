"""What the project plugs into verl: the agent name, and on request the CPU platform.

verl 0.9 imports every ``verl.plugins`` entry point while ``import verl`` runs,
in the driver and in every Ray worker it starts. The project's entry point names
this module, so installing the ``[verl]`` extra is all it takes for the agent
name ``interactions`` to exist: ``actor_rollout_ref.rollout.agent.default_agent_loop=interactions``,
or the data's ``agent_name`` column, selects the loop without an agent-loop YAML.
With ``VERL_PLATFORM=cpu`` (verl's own platform override) it also plugs in what
verl needs to run one real GRPO step on a laptop (``docs/verl-on-a-laptop.md``):
a CPU platform and four workarounds. Both live here, and not with the CPU
rollout in :mod:`interactions_core.integrations.verl_cpu`, because both hook
into verl at the same moment and in the same way: while ``import verl`` runs.

Three constraints shape it:

* **Cheap.** ``import verl`` runs in every process of a job, most of which never
  roll anything out (actor, reference, reward workers). So nothing is imported
  at module level beyond the standard library; torch and verl are imported inside
  the functions that need them. Whatever touches a verl module waits for it with
  a post-import hook (:func:`when_imported`): the agent name is registered when
  verl's agent-loop module (``verl.experimental.agent_loop.agent_loop``) is
  imported by whoever needs it, and the adapter is imported then, in the
  processes that roll out, and only there. This also avoids importing verl's
  trainer half-initialized from inside ``import verl``.
* **Never breaks verl.** verl logs a failing plugin only at DEBUG level, so a
  broken dependency here would be silent. Nothing here raises: if the adapter
  cannot be imported, the name is registered to a placeholder loop that raises
  :class:`~interactions_core.errors.InteractionsError` when verl first builds
  it, saying what failed and what to do, and a warning is logged at once; a
  failing CPU mode is logged as an error.
* **Opt-in extras.** Only ``VERL_PLATFORM=cpu`` calls :func:`register`; any
  other value leaves verl alone.

The CPU mode (:func:`register`, idempotent) registers a CPU platform
(``CPUPlatform``) in verl's platform layer under the name ``cpu`` at once
(``verl.plugin.platform`` is already imported by then), and applies each of
:data:`WORKAROUNDS` (a small named patch of one verl module, two of which
register the ``hf_cpu`` rollout) right after that module is imported. Each
workaround first checks that the code it patches still looks as expected and
raises :class:`VerlCPUError`, naming itself and the installed verl, when it does
not: a verl release that fixes or changes one fails loudly instead of running
half patched. Checked against verl :data:`CHECKED_VERL`; other releases are
refused by :func:`register`.

An agent-loop YAML that names ``interactions`` itself still wins, as verl reads
that file after this registration; it is where per-entry options go
(``interaction_config``, ``ray_check``, ``ray_pool``, ``turn_rewards``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = [
    "AGENT_LOOP_MODULE",
    "CHECKED_VERL",
    "PLATFORM_NAME",
    "ROLLOUT_MODULE",
    "ROLLOUT_NAME",
    "WORKAROUNDS",
    "PlaceholderAgentLoop",
    "VerlCPUError",
    "register",
    "registration_error",
    "when_imported",
]

#: verl's module that holds the agent-loop registry and its ``register`` decorator.
AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
#: The adapter, imported when verl's agent-loop module is.
ADAPTER_MODULE = "interactions_core.integrations.verl"

logger = logging.getLogger("interactions_core.integrations.verl")

_error: str | None = None


def registration_error() -> str | None:
    """Why the adapter could not be registered in this process, or ``None``."""
    return _error


class PlaceholderAgentLoop:
    """Registered as ``interactions`` when the adapter cannot be imported.

    verl builds one loop per trajectory; building this one raises the reason, so
    the first batch fails with it instead of verl's "not registered" message.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from ..errors import InteractionsError

        raise InteractionsError(
            "the verl agent loop 'interactions' is unavailable in this worker: "
            f"{_error or 'its module could not be imported'}. Install the adapter's "
            "dependencies on every node (pip install 'interactions-core[verl]' from a "
            'checkout or a built wheel) and check `python -c "import '
            f'{ADAPTER_MODULE}"` there.'
        )


def _register(agent_loop: ModuleType) -> None:
    """Register the adapter under its name with verl's own ``register``; never raise."""
    global _error
    try:
        __import__(ADAPTER_MODULE)  # the adapter registers itself on import
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        _error = f"importing {ADAPTER_MODULE} failed: {type(exc).__name__}: {exc}"
        logger.warning("interactions-core: %s", _error)
        try:
            agent_loop.register("interactions")(PlaceholderAgentLoop)
        except Exception as again:
            logger.warning("interactions-core: cannot register a placeholder: %s", again)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs ``then(module)`` right after one named module finishes importing.

    It finds the module's real spec with the remaining finders and wraps its
    loader, so the module is imported exactly as it would be otherwise.
    """

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then
        self.loader: importlib.abc.Loader | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
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

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        assert self.loader is not None
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        assert self.loader is not None
        module.__spec__.loader = self.loader  # type: ignore[union-attr]
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        _remove(self)
        self.then(module)


def _remove(finder: object) -> None:
    try:
        sys.meta_path.remove(finder)  # type: ignore[arg-type]
    except ValueError:
        pass


def when_imported(name: str, then: Callable[[ModuleType], None]) -> None:
    """Run ``then(module)`` right after module ``name`` finishes importing, or now if it has.

    The module is patched before anyone else sees it, and processes that never
    import it pay nothing. Asking twice for the same ``then`` on a module that is
    still to come arranges it once.
    """
    already = sys.modules.get(name)
    if already is not None:
        then(already)
        return
    if not any(
        isinstance(f, _AfterImport) and f.name == name and f.then is then for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _AfterImport(name, then))


def install() -> None:
    """Arrange the registration (now, if verl's agent-loop module is already imported)."""
    when_imported(AGENT_LOOP_MODULE, _register)


# -- the CPU mode: platform and workarounds -------------------------------------------

#: The verl releases whose code the workarounds were written against.
CHECKED_VERL = ("0.9.0", "0.9.1")
#: The platform name (``VERL_PLATFORM=cpu``) and the rollout name (``rollout.name``).
PLATFORM_NAME = "cpu"
ROLLOUT_NAME = "hf_cpu"
#: The module of the ``hf_cpu`` rollout; named, not imported: only rollout processes need it.
ROLLOUT_MODULE = "interactions_core.integrations.verl_cpu"

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
        "interactions_core.integrations.verl_plugin for this verl release."
    )


# -- the platform -------------------------------------------------------------------


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _cpu_device_module() -> ModuleType:
    """``torch.cpu`` plus the memory and RNG calls verl makes on its device module.

    verl calls ``get_torch_device().empty_cache()``, ``mem_get_info()``,
    ``get_rng_state()`` ... as it would on ``torch.cuda``; on CPU those are
    no-ops, zeros or the global CPU generator.
    """
    import torch
    import torch.cpu

    module = ModuleType("interactions_core_cpu_device")
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


class _CPUAnswers:
    """The CPU as verl's accelerator: gloo for collectives, no memory to manage.

    Ray schedules verl's workers on ``GPU`` resources whatever the platform
    (its resource-pool check counts only ``GPU``/``NPU``), so this platform
    keeps ``GPU`` as the resource name: on a CPU-only Ray cluster started with
    ``ray_init.num_gpus=N`` those are N scheduling slots, not devices.
    ``current_device`` is ``torch.device("cpu")``: verl moves tensors with
    ``.to(get_device_id())``, which needs a device, not an index.

    Kept apart from verl's base class so that this module imports only the
    standard library: :func:`_platform_class` joins the two when verl is there.
    """

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _cpu_device_module()

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return True

    def current_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        self.manual_seed(seed)

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

    @contextlib.contextmanager
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


def _platform_class() -> type[Any]:
    """verl's platform interface, answered for the CPU (built lazily: it subclasses verl's)."""
    from verl.plugin.platform import PlatformBase

    _cpu_device_module()  # fails here, with its workaround, if torch cannot serve

    class CPUPlatform(_CPUAnswers, PlatformBase):  # type: ignore[misc]
        """The CPU as verl's accelerator (see :class:`_CPUAnswers`)."""

    return CPUPlatform


def _register_platform() -> None:
    from verl.plugin.platform import PlatformRegistry

    if PlatformRegistry.get(PLATFORM_NAME) is None:
        PlatformRegistry.register(platform=PLATFORM_NAME)(_platform_class())


# -- the workarounds ----------------------------------------------------------------


def _source(obj: Any, workaround: str) -> str:
    import inspect

    try:
        return inspect.getsource(obj)
    except (OSError, TypeError) as exc:
        raise _fail(workaround, f"cannot read the source of {obj!r}: {exc}") from exc


def _gloo_only_backend(module: ModuleType) -> None:
    """``verl.utils.distributed``: on CPU the process group is plain ``cpu:gloo``.

    verl builds ``cpu:gloo,{device}:{backend}``; with device ``cpu`` that is
    ``cpu:gloo,cpu:gloo``, which torch refuses ("Duplicate device type cpu").
    """
    import inspect

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


def _fsdp2_engine_on_cpu(module: ModuleType) -> None:
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


def _rollout_replica_class() -> type[Any]:
    """The ``hf_cpu`` replica class, imported when verl first asks for it."""
    replica_class: Callable[[], type[Any]] = importlib.import_module(ROLLOUT_MODULE).replica_class
    return replica_class()


def _hf_cpu_replica(module: ModuleType) -> None:
    """``verl.workers.rollout.replica``: the ``hf_cpu`` rollout replica exists."""
    name = "hf-cpu-replica"
    registry = getattr(module, "RolloutReplicaRegistry", None)
    if registry is None or not callable(getattr(registry, "register", None)):
        raise _fail(name, "verl.workers.rollout.replica.RolloutReplicaRegistry.register is gone")
    if ROLLOUT_NAME not in getattr(registry, "_registry", {}):
        registry.register(ROLLOUT_NAME, _rollout_replica_class)


def _hf_cpu_weight_sync(module: ModuleType) -> None:
    """``verl.workers.rollout.base``: the in-worker adapter of ``hf_cpu`` exists.

    verl's hybrid worker builds its rollout adapter by name from the module-level
    ``_ROLLOUT_REGISTRY`` (there is no public registration for it).
    """
    name = "hf-cpu-weight-sync"
    table = getattr(module, "_ROLLOUT_REGISTRY", None)
    if not isinstance(table, dict) or ("vllm", "async") not in table:
        raise _fail(name, "verl.workers.rollout.base._ROLLOUT_REGISTRY is gone or changed shape")
    table.setdefault((ROLLOUT_NAME, "async"), f"{ROLLOUT_MODULE}.HFCPUWeightSync")


#: Each workaround: its name, the verl module it patches, the patch.
WORKAROUNDS: tuple[tuple[str, str, Callable[[ModuleType], None]], ...] = (
    ("gloo-only-backend", "verl.utils.distributed", _gloo_only_backend),
    ("fsdp2-engine-on-cpu", "verl.workers.engine.fsdp.transformer_impl", _fsdp2_engine_on_cpu),
    ("hf-cpu-replica", "verl.workers.rollout.replica", _hf_cpu_replica),
    ("hf-cpu-weight-sync", "verl.workers.rollout.base", _hf_cpu_weight_sync),
)


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
            when_imported(module, patch)
        _registered = True


def _cpu_mode() -> None:
    """The CPU smoke mode, when verl's platform override asks for ``cpu``."""
    if os.environ.get("VERL_PLATFORM", "").strip().lower() != "cpu":
        return
    try:
        register()
    except Exception as exc:
        logger.error("interactions-core: VERL_PLATFORM=cpu, but the CPU mode failed: %s", exc)


install()
_cpu_mode()
