"""The pluggy host: hook plugins, imported on first use, and what they register.

A hook plugin is a distribution in the ``interactions_core.plugins`` entry-point
group: a module (or object) with ``@hookimpl`` functions for the hooks of
:class:`~interactions_core.PluginSpec`. :class:`PluginHost` imports
them only when a hook is needed, one at a time and isolated: a plugin that
fails to import, or whose hooks do not match the spec (pluggy's
``PluginValidationError``), is recorded with its error and the others load
normally.

``register_*`` hooks are called once per plugin with a ``register`` callable
bound to that plugin, so every registration is attributed to the distribution
that made it (needed for conflict messages and the allow/deny lists).

The core's own policies are registered the same way: :class:`BuiltinPlugin` is
a hook implementation the host registers first, as llm does with its default
plugins. It registers each policy by its ``module:Class`` target, imported when
the policy is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from ._classes import CORE_DISTRIBUTION, import_target
from ._index import PLUGINS_GROUP, plugin_id
from ._names import Selection
from ._spec import PROJECT_NAME, PluginSpec, hookimpl
from .errors import Interrupted

__all__ = ["BUILTIN_PLUGIN", "BuiltinPlugin", "PluginHost", "Registration", "create_manager"]

#: The plugin id of the core's own hook implementation.
BUILTIN_PLUGIN = f"{CORE_DISTRIBUTION}:builtin"


def create_manager() -> pluggy.PluginManager:
    """A plugin manager that knows the core's hook specs and nothing else."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(PluginSpec)
    return pm


class BuiltinPlugin:
    """The core's own contributions, registered through the hooks like any plugin's."""

    POLICIES = {
        "replay": "interactions_core.runtime.policies.base:ReplayPolicy",
        "openai": "interactions_core.runtime.policies.openai:OpenAIPolicy",
        "human": "interactions_core.runtime.policies.base:HumanPolicy",
    }

    @hookimpl
    def register_policies(self, register: Callable[..., None]) -> None:
        for name, target in self.POLICIES.items():
            register(name, target)


def _text(description: Any) -> str | None:
    """A registration's description as plain text: every listing shows it, and a ``str``
    subclass's own methods (a ``__len__`` that raises) or a value of another type (bytes)
    had failed every listing of every plugin's names."""
    if description is None or type(description) is str:
        return description
    if issubclass(type(description), str):  # not its own __class__: plugin code
        return str.__str__(description)
    from .errors import class_name

    return f"<the description registered is of type {class_name(type(description))}, not text>"


class Registration:
    """One thing a plugin registered through a ``register_*`` hook.

    ``obj`` is the object itself, or a ``module:attr`` string imported on use.
    """

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
        self.description = _text(description)

    @property
    def distribution(self) -> str:
        return self.plugin.split(":", 1)[0]

    @property
    def builtin(self) -> bool:
        return self.plugin == BUILTIN_PLUGIN

    @property
    def target(self) -> str:
        obj = self.obj
        if isinstance(obj, str):
            return obj
        module = getattr(obj, "__module__", "?")
        return f"{module}:{getattr(obj, '__qualname__', type(obj).__name__)}"

    def load(self) -> Any:
        """The registered object (imported now when it was registered by target)."""
        return import_target(self.obj) if isinstance(self.obj, str) else self.obj


class PluginHost:
    """Loads hook plugins lazily and collects what they register."""

    def __init__(
        self,
        records: Iterable[dict[str, Any]],
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
        """The plugin manager with the built-in and every allowed hook plugin registered."""
        if self._pm is None:
            self._pm = create_manager()
            self._pm.register(BuiltinPlugin(), name=BUILTIN_PLUGIN)
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
            self._pm.register(import_target(record["value"]), name=pid)
        except Exception as exc:
            self.errors[pid] = exc

    def error_message(self, pid: str) -> str:
        exc = self.errors[pid]
        from .errors import exception_kind, exception_text

        return f"{exception_kind(exc)}: {exception_text(exc)}".strip()

    def collect(self, hook: str) -> dict[str, list[Registration]]:
        """Call ``hook`` (a ``register_*`` hook) once per plugin; group results by plugin.

        A plugin whose hook raises is recorded in :attr:`errors` and contributes
        nothing; the others are unaffected.
        """
        if hook in self._collected:
            return self._collected[hook]
        out: dict[str, list[Registration]] = {}
        for impl in getattr(self.manager.hook, hook).get_hookimpls():
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
                if issubclass(type(exc), Interrupted):  # (not its own __class__: plugin code)
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
