"""What ``import verl`` loads from this project: the agent name ``interactions``.

verl 0.9 imports every ``verl.plugins`` entry point while ``import verl`` runs,
in the driver and in every Ray worker it starts. The project's entry point names
this module, so installing the ``[verl]`` extra is all it takes for the agent
name ``interactions`` to exist: ``actor_rollout_ref.rollout.agent.default_agent_loop=interactions``,
or the data's ``agent_name`` column, selects the loop without an agent-loop YAML.

Three constraints shape it:

* **Cheap.** ``import verl`` runs in every process of a job, most of which never
  roll anything out (actor, reference, reward workers). So nothing is imported
  here beyond the standard library: a post-import hook waits for verl's
  agent-loop module (``verl.experimental.agent_loop.agent_loop``) to be imported
  by whoever needs it, and registers the name then. The adapter itself is
  imported at that moment, in the processes that roll out, and only there.
* **Never breaks verl.** verl logs a failing plugin only at DEBUG level, so a
  broken dependency here would be silent. Nothing here raises: if the adapter
  cannot be imported, the name is registered to a placeholder loop that raises
  :class:`~interactions_core.errors.InteractionsError` when verl first builds
  it, saying what failed and what to do, and a warning is logged at once.
* **Opt-in extras.** ``VERL_PLATFORM=cpu`` (verl's own platform override) also
  installs the CPU smoke mode of :mod:`interactions_core.integrations.verl_cpu`
  (see ``docs/verl-on-a-laptop.md``); any other value leaves verl alone.

An agent-loop YAML that names ``interactions`` itself still wins, as verl reads
that file after this registration; it is where per-entry options go
(``interaction_config``, ``ray_check``, ``ray_pool``, ``turn_rewards``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["AGENT_LOOP_MODULE", "PlaceholderAgentLoop", "registration_error"]

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


def install() -> None:
    """Arrange the registration (now, if verl's agent-loop module is already imported)."""
    already = sys.modules.get(AGENT_LOOP_MODULE)
    if already is not None:
        _register(already)
        return
    if not any(isinstance(f, _AfterImport) and f.name == AGENT_LOOP_MODULE for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(AGENT_LOOP_MODULE, _register))


def _cpu_mode() -> None:
    """The CPU smoke mode, when verl's platform override asks for ``cpu``."""
    if os.environ.get("VERL_PLATFORM", "").strip().lower() != "cpu":
        return
    try:
        import importlib

        importlib.import_module(f"{__package__}.verl_cpu").register()
    except Exception as exc:
        logger.error("interactions-core: VERL_PLATFORM=cpu, but the CPU mode failed: %s", exc)


install()
_cpu_mode()
