"""Hook plugins: distributions in the ``interactions_core.plugins`` group.

A hook plugin is a module (or object) with pluggy ``@hookimpl`` functions for the
hooks in :class:`~interactions_core.PluginSpec`. :class:`PluginHost`
imports them on first use only, one at a time and isolated: a plugin that fails to
import, or whose hooks do not match the spec (pluggy's ``PluginValidationError``),
is recorded with its error and the others load normally.

``register_*`` hooks are called once per plugin with a ``register`` callable bound
to that plugin, so every registration is attributed to the distribution that made
it (needed for conflict messages and the allow/deny lists).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from typing import Any

import pluggy

from ._discovery import PLUGINS_GROUP
from ._selection import Selection
from ._spec import PROJECT_NAME, PluginSpec

__all__ = ["PluginHost", "Registration", "create_manager", "import_target", "plugin_id"]


def create_manager() -> pluggy.PluginManager:
    """A plugin manager that knows the core's hook specs and nothing else."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(PluginSpec)
    return pm


class ImportAborted(Exception):
    """A plugin module raised ``SystemExit``/``KeyboardInterrupt``/... while being imported."""


def import_target(target: str) -> Any:
    """Import ``module:attr.path`` (or ``module``) with ``importlib.import_module``.

    A failed import leaves nothing behind in ``sys.modules`` (the import system
    removes a module whose body raised), unlike verl's ``exec_module`` loader.
    """
    module_name, _, attr_path = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name.strip())
    except Exception:
        raise
    except BaseException as exc:
        # SystemExit, KeyboardInterrupt or another BaseException raised by the
        # module's code is that plugin's fault, not a reason to stop the program.
        from .errors import Interrupted

        if isinstance(exc, Interrupted):
            raise
        raise ImportAborted(
            f"importing {module_name.strip()} raised {exc.__class__.__name__}"
            + (f": {exc}" if str(exc) else "")
        ) from exc
    for attr in filter(None, attr_path.strip().split(".")):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            if not isinstance(obj, types.ModuleType):
                raise
            from ._fault import MissingAttributeError

            raise MissingAttributeError(obj, attr, target.strip()) from None
    return obj


def plugin_id(record: dict) -> str:
    """The identity of a hook plugin: ``distribution:entry-point-name``."""
    return f"{record['dist']}:{record['name']}"


class Registration:
    """One thing a plugin registered through a ``register_*`` hook."""

    __slots__ = ("defaults", "description", "name", "obj", "plugin")

    def __init__(
        self,
        name: str,
        obj: Any,
        plugin: str,
        defaults: dict[str, Any] | None = None,
        description: str | None = None,
    ) -> None:
        self.name = name
        self.obj = obj
        self.plugin = plugin
        self.defaults = dict(defaults or {})
        self.description = description

    @property
    def target(self) -> str:
        obj = self.obj
        module = getattr(obj, "__module__", "?")
        return f"{module}:{getattr(obj, '__qualname__', type(obj).__name__)}"


class PluginHost:
    """Loads hook plugins lazily and collects what they register."""

    def __init__(
        self,
        records: list[dict],
        selection: Selection,
        provides: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.records = {plugin_id(r): r for r in records if r["group"] == PLUGINS_GROUP}
        self.selection = selection
        #: Names each plugin is known (from the index) to register; see Selection.plugin_excluded.
        self.provides = provides or {}
        self.errors: dict[str, BaseException] = {}
        self._pm: pluggy.PluginManager | None = None
        self._collected: dict[str, dict[str, list[Registration]]] = {}

    def excluded(self, pid: str) -> str | None:
        """Why the hook plugin ``pid`` may not be imported, or ``None``."""
        record = self.records[pid]
        identities = (record["name"], record["dist"], pid)
        return self.selection.plugin_excluded(identities, self.provides.get(pid, ()))

    @property
    def manager(self) -> pluggy.PluginManager:
        """The plugin manager with every allowed hook plugin registered."""
        if self._pm is None:
            self._pm = create_manager()
            for pid in self.records:
                if self.excluded(pid) is None:
                    self._load(pid)
        return self._pm

    def register_object(self, obj: Any, name: str | None = None) -> None:
        """Register an in-process plugin object (tests, notebooks, a trainer's own hooks)."""
        self.manager.register(obj, name=name)
        self._collected.clear()

    def _load(self, pid: str) -> None:
        assert self._pm is not None
        record = self.records[pid]
        if record.get("error"):
            self.errors[pid] = ValueError(record["error"])
            return
        try:
            obj = import_target(record["value"])
            self._pm.register(obj, name=pid)
        except Exception as exc:
            self.errors[pid] = exc

    def error_message(self, pid: str) -> str:
        exc = self.errors[pid]
        return f"{exc.__class__.__name__}: {exc}".strip()

    def collect(self, hook: str) -> dict[str, list[Registration]]:
        """Call ``hook`` (a ``register_*`` hook) once per plugin; group results by plugin.

        A plugin whose hook raises is recorded in :attr:`errors` and contributes
        nothing; the others are unaffected.
        """
        if hook in self._collected:
            return self._collected[hook]
        pm = self.manager
        out: dict[str, list[Registration]] = {}
        caller = getattr(pm.hook, hook)
        for impl in caller.get_hookimpls():
            pid = impl.plugin_name
            items: list[Registration] = []

            def register(
                name: str,
                obj: Any,
                *,
                defaults: dict[str, Any] | None = None,
                description: str | None = None,
                _items: list[Registration] = items,
                _pid: str = pid,
            ) -> None:
                _items.append(Registration(str(name), obj, _pid, defaults, description))

            try:
                impl.function(*[{"register": register}[arg] for arg in impl.argnames])
            except BaseException as exc:
                from .errors import Interrupted

                if isinstance(exc, Interrupted):
                    raise
                self.errors[pid] = exc
                continue
            out.setdefault(pid, []).extend(items)
        self._collected[hook] = out
        return out

    def observer(self, hook: str) -> Callable[..., Any] | None:
        """The hook caller for an observer hook, or ``None`` when nobody implements it.

        The runtime asks once per run, so an unobserved session costs nothing.
        """
        caller = getattr(self.manager.hook, hook)
        return caller if caller.get_hookimpls() else None
