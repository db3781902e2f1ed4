"""The catalog of named things: interactions, policies and dataset builders, by name.

One :class:`Registry` answers, for every kind of named thing plugins provide,
three questions in increasing cost:

1. *What is there?* :meth:`Registry.entries` (interactions), :meth:`Registry.policies`
   and :meth:`Registry.builders` — each a list of :class:`Contribution` with a
   status (``ok``, ``broken``, ``conflict``, ``disabled``). Interactions come
   from the index (:mod:`interactions_core._index`) and the cached hook
   registrations, so listing them imports nothing on the warm path.
2. *Which one is meant?* :func:`resolve` — plain or qualified
   (``distribution:name``) names, the same rules for every kind: an unknown
   name is the kind's :class:`~interactions_core.errors.UnknownNameError` with
   a did-you-mean, a name claimed by two distributions a
   :class:`~interactions_core.errors.ConflictError` naming both, a disabled one
   a :class:`~interactions_core.errors.DisabledError`.
3. *Give me the class.* :meth:`Registry.load` imports the module the first
   time, validates the class against the spec, and remembers success or the
   failure (a broken plugin stays broken with its original exception as the
   cause); :meth:`Registry.create` builds the instance.

The allow/deny lists apply to every kind alike; the core's own contributions
(its built-in policies, registered through the same hooks as any plugin's) are
trusted like the core itself. :meth:`Registry.from_classes` builds a catalog
from in-memory classes, so plugin authors can test without installing anything.
"""

from __future__ import annotations

import os
import sys

from . import _index
from ._names import (
    CORE_DISTRIBUTION,
    Contribution,
    Selection,
    mark_conflicts,
    normalize,
    resolve,
    unknown_message,
    warn_unmatched,
)

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from ._hooks import PluginHost, Registration
    from .errors import UnknownBuilderError, UnknownPolicyError

__all__ = [
    "MEMORY_DISTRIBUTION",
    "BuilderInfo",
    "Entry",
    "PolicyInfo",
    "Registry",
    "get_registry",
    "reset_registry",
]

MEMORY_DISTRIBUTION = "<memory>"
#: Seconds ``interactions list --check`` waits for one import, unless set otherwise.
IMPORT_TIMEOUT_VAR = "INTERACTIONS_IMPORT_TIMEOUT"


class Entry(Contribution):
    """One interaction the catalog knows about, whether or not it loads."""

    __slots__ = ("_cls", "defaults", "path", "plugin", "version")

    noun = "interaction"
    plural = "interactions"
    listed: tuple[str, ...] = (
        "name",
        "distribution",
        "version",
        "target",
        "status",
        "error",
        "kind",
        "qualified_name",
    )

    def __init__(
        self,
        name: str,
        distribution: str,
        version: str,
        target: str,
        kind: str = "entry-point",
        plugin: str | None = None,
        path: str = "",
        error: str | None = None,
        defaults: dict[str, Any] | None = None,
        description: str | None = None,
        cls: Any = None,
    ) -> None:
        super().__init__(name, distribution, target, kind, error, description)
        self.version = version
        self.plugin = plugin
        self.path = path
        self.defaults = defaults or {}
        self._cls = cls

    @classmethod
    def of_record(
        cls,
        record: dict[str, Any],
        name: str | None = None,
        target: str | None = None,
        kind: str = "entry-point",
        error: str | None = None,
    ) -> Entry:
        """The entry for an index record: its own entry point, or a name a hook plugin registers."""
        plugin = _index.plugin_id(record) if kind != "entry-point" else None
        return cls(
            record["name"] if name is None else name,
            record["dist"],
            record["version"],
            record["value"] if target is None else target,
            kind,
            plugin,
            record["path"],
            error,
        )


class PolicyInfo(Contribution):
    """One policy (the model side of an episode) the catalog knows about."""

    __slots__ = ("loader",)

    noun = "policy"
    plural = "policies"
    listing = "interactions run --list-policies"

    def __init__(
        self, name: str, distribution: str, target: str, kind: str, error: str | None
    ) -> None:
        super().__init__(name, distribution, target, kind, error)
        #: Returns the class: an entry point's target is imported when first asked for.
        self.loader: Callable[[], Any] = self._import_target

    def _import_target(self) -> Any:
        from ._classes import import_target

        return import_target(self.target)

    def load(self) -> Any:
        """The policy class (imported now if needed); :class:`PluginLoadError` when broken."""
        from .errors import PluginLoadError  # here: a listing never needs the error types

        if self.status == "broken":
            raise PluginLoadError(
                f"policy {self.qualified} ({self.target}) is broken: {self.error}"
            )
        from .errors import exception_kind, exception_text, stops_the_program

        try:
            return self.loader()
        except BaseException as exc:  # any class: a module may raise anything at import
            if stops_the_program(exc):
                raise
            told = f"{exception_kind(exc)}: {exception_text(exc)}"  # never its own __str__
            raise PluginLoadError(
                f"policy {self.qualified} ({self.target}) failed to import: {told}"
            ) from exc


class BuilderInfo(Contribution):
    """A dataset builder registered by a hook plugin: its registration, listed."""

    __slots__ = ("builder", "defaults", "plugin")

    noun = "dataset builder"
    plural = "dataset builders"
    listing = "interactions data"
    listed = ("name", "distribution", "plugin", "description", "options")

    def __init__(self, registration: Registration, error: str | None = None) -> None:
        import inspect

        builder = registration.obj
        summary = registration.description
        if not summary:
            doc = inspect.getdoc(builder) or ""
            summary = doc.splitlines()[0] if doc else ""
        kind = "builtin" if registration.builtin else "hook"
        super().__init__(
            registration.name, registration.distribution, registration.target, kind, error, summary
        )
        self.builder = builder
        self.plugin = registration.plugin
        self.defaults = dict(registration.defaults)  # the registration stays as it was

    @property
    def options(self) -> dict[str, Any]:
        """The builder's options with their defaults (``None`` for a required one)."""
        from ._classes import keyword_options

        return {
            name: (None if p.default is p.empty else p.default)
            for name, p in keyword_options(self.builder).items()
        }


def default_import_timeout() -> float:
    """``$INTERACTIONS_IMPORT_TIMEOUT`` seconds, else (or when not a positive number) 60."""
    return _index.seconds_from(IMPORT_TIMEOUT_VAR, 60.0)


class Registry:
    """Interactions, policies and dataset builders by name; see the module docstring."""

    def __init__(
        self,
        index: dict[str, Any],
        selection: Selection | None = None,
        *,
        save_index: bool = True,
    ) -> None:
        self.index = index
        self.selection = selection if selection is not None else Selection.from_env()
        self._save_index = save_index
        self._host: PluginHost | None = None  # created only when a hook plugin is consulted
        self._entries: list[Entry] | None = None
        self._memory: list[Entry] = []

    # -- construction --------------------------------------------------------

    @classmethod
    def from_environment(cls, use_cache: bool = True) -> Registry:
        """The catalog of what is installed for this interpreter."""
        registry = cls({"entries": [], "hooks": {}}, save_index=use_cache)
        # What the allowed hook plugins register is learned while the index is built.
        registry.index = _index.load_index(use_cache, registry._learn_hooks)
        return registry

    @classmethod
    def from_classes(
        cls,
        classes: dict[str, Any],
        *,
        distribution: str = MEMORY_DISTRIBUTION,
        selection: Selection | None = None,
    ) -> Registry:
        """A catalog of in-memory classes (for tests): ``{"name": InteractionClass}``."""
        registry = cls({"entries": [], "hooks": {}}, selection or Selection(), save_index=False)
        for name, klass in classes.items():
            registry.add(name, klass, distribution=distribution)
        return registry

    def add(self, name: str, klass: Any, *, distribution: str = MEMORY_DISTRIBUTION) -> Entry:
        """Register a class in memory under ``name`` (it takes part in conflicts)."""
        target = f"{getattr(klass, '__module__', '?')}:{getattr(klass, '__qualname__', klass)}"
        entry = Entry(name, distribution, "", target, kind="memory", cls=klass)
        self._memory.append(entry)
        self._entries = None
        return entry

    # -- hook plugins --------------------------------------------------------

    def _host_for(self, index: dict[str, Any]) -> PluginHost:
        if self._host is None:
            from ._hooks import PluginHost

            provides = {
                pid: tuple(n[0] for n in known.get("names", []))
                for pid, known in index.get("hooks", {}).items()
            }
            self._host = PluginHost(index["entries"], self.selection, provides)
        return self._host

    @property
    def plugin_host(self) -> PluginHost:
        """The :class:`~interactions_core._hooks.PluginHost` (imports pluggy on first use)."""
        return self._host_for(self.index)

    def _plugin_records(self, index: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        records = (index or self.index)["entries"]
        return [r for r in records if r["group"] == _index.PLUGINS_GROUP]

    def _learn_hooks(self, index: dict[str, Any]) -> bool:
        """Ask the allowed hook plugins not yet known what they register; whether any was."""
        hooks: dict[str, Any] = index.setdefault("hooks", {})
        changed = False
        for record in self._plugin_records(index):
            pid = _index.plugin_id(record)
            if pid in hooks:
                continue
            if self.selection.plugin_excluded((record["name"], record["dist"], pid), ()):
                continue  # disabled and never asked: its names stay unknown
            host = self._host_for(index)
            registrations = host.collect("register_interactions").get(pid, [])
            if pid in host.errors:
                hooks[pid] = {"names": [], "error": host.error_message(pid)}
            else:
                names = [[r.name, r.target, r.description] for r in registrations]
                hooks[pid] = {"names": names, "error": None}
            changed = True
        return changed

    def _hook_entries(self) -> list[Entry]:
        """Interactions registered by hook plugins: cached, or learned and cached now."""
        if self._learn_hooks(self.index) and self._save_index:
            _index.save_hooks(self.index)
        out = []
        for record in self._plugin_records():
            cached = self.index["hooks"].get(_index.plugin_id(record)) or {}
            for name, target, description in cached.get("names", []):
                entry = Entry.of_record(record, name, target, "hook")
                entry.description = description
                out.append(entry)
        return out

    def plugin_problems(self) -> list[Entry]:
        """Hook plugins that failed to load or register, as broken entries."""
        self.entries()  # collects (or reads cached) registrations, recording failures
        out = []
        for record in self._plugin_records():
            pid = _index.plugin_id(record)
            error = record.get("error") or (self.index["hooks"].get(pid) or {}).get("error")
            if self._host is not None and pid in self._host.errors:
                error = self._host.error_message(pid)
            if error:
                out.append(Entry.of_record(record, kind="plugin", error=error))
        return out

    # -- what is there -------------------------------------------------------

    def _exclude(self, items: Iterable[Contribution], *plugin: str) -> None:
        """Mark the items the allow/deny lists exclude (the core's own are trusted)."""
        for item in items:
            if normalize(item.distribution) == CORE_DISTRIBUTION and item.kind == "builtin":
                continue
            extra = getattr(item, "plugin", None) or ""
            reason = self.selection.excluded(item.name, item.qualified, item.distribution, extra)
            if reason is not None:
                item.status, item.error = "disabled", reason

    def entries(self) -> list[Entry]:
        """Every known interaction with its status, sorted by name then distribution."""
        if self._entries is not None:
            return self._entries
        entries = [
            Entry.of_record(r, error=r["error"])
            for r in self.index["entries"]
            if r["group"] == _index.INTERACTIONS_GROUP
        ]
        entries += self._hook_entries() + self._memory
        self._exclude(entries)
        mark_conflicts(entries, "use a qualified name ({qualified})")
        entries.sort(key=lambda e: (e.name, e.distribution))
        self._entries = entries
        if self.selection.active:
            known = [i for e in entries for i in (e.name, e.qualified, e.plugin or "")]
            warn_unmatched(self.index.get("entries", []), known)
        return entries

    def names(self) -> list[str]:
        """Names that can be loaded as they are (ok, or broken and not yet known to be)."""
        return sorted({e.name for e in self.entries() if e.status in ("ok", "broken")})

    def disabled(self) -> list[Entry]:
        """The interactions the allow/deny lists exclude (refused by any route)."""
        return [e for e in self.entries() if e.status == "disabled" and e.target]

    def policies(self) -> list[PolicyInfo]:
        """Every policy: the core's, entry points', and hook plugins'; sorted by name."""
        out = [
            PolicyInfo(r["name"], r["dist"], r["value"], "entry-point", r.get("error"))
            for r in self.index.get("entries", [])
            if r["group"] == _index.POLICIES_GROUP
        ]
        for registrations in self.plugin_host.collect("register_policies").values():
            for reg in registrations:
                kind = "builtin" if reg.builtin else "hook"
                info = PolicyInfo(reg.name, reg.distribution, reg.target, kind, None)
                info.description, info.loader = reg.description, reg.load
                out.append(info)
        self._exclude(out)
        out.sort(key=lambda p: (p.name, p.distribution))
        mark_conflicts(out, "use a qualified name (--policy {qualified})")
        return out

    def hook_failures(self) -> dict[str, str]:
        """Hook plugins that failed to load or whose registration hook raised, each with
        ``Type: message``: what they register is missing from every listing, and the
        listing says why."""
        host = self.plugin_host
        return {pid: host.error_message(pid) for pid in host.errors}

    def builders(self) -> list[BuilderInfo]:
        """Every registered dataset builder, sorted by name (hook plugins are imported)."""
        out = []
        for registrations in self.plugin_host.collect("register_dataset_builders").values():
            for reg in registrations:
                problem = None if callable(reg.obj) else "registered object is not callable"
                out.append(BuilderInfo(reg, problem))
        self._exclude(out)
        out.sort(key=lambda b: (b.name, b.distribution))
        mark_conflicts(out, "use a qualified name ({qualified})")
        return out

    # -- which one is meant ---------------------------------------------------

    def resolve(self, name: str) -> Entry:
        """The interaction entry ``name`` (plain or ``distribution:name``) designates."""
        from .errors import UnknownInteractionError

        return resolve(self.entries(), name, lambda: UnknownInteractionError(self._unknown(name)))

    def policy(self, name: str) -> Any:
        """The policy class called ``name`` (or ``distribution:name``), imported now."""
        from .errors import UnknownPolicyError

        policies = self.policies()

        def unknown() -> UnknownPolicyError:
            return UnknownPolicyError(unknown_message(PolicyInfo, name, policies))

        return resolve(policies, name, unknown).load()

    def builder(self, name: str) -> BuilderInfo:
        """The dataset builder called ``name`` (or ``distribution:name``)."""
        from .errors import PluginLoadError, UnknownBuilderError

        builders = self.builders()

        def unknown() -> UnknownBuilderError:
            failed = self.hook_failures()
            notes = [
                f"{len(failed)} hook plugin(s) failed to load: "
                + "; ".join(f"{pid}: {told}" for pid, told in failed.items())
                + "."
            ]
            return UnknownBuilderError(
                unknown_message(BuilderInfo, name, builders, notes if failed else ())
            )

        found = resolve(builders, name, unknown)
        if found.status == "broken":
            raise PluginLoadError(f"dataset builder {found.describe()} is broken: {found.error}")
        return found

    def _unknown(self, name: str) -> str:
        """Why ``name`` names no interaction, with the hook plugins the lists kept from asking."""
        hooks = self.index.get("hooks", {})
        unasked = {r["dist"] for r in self._plugin_records() if _index.plugin_id(r) not in hooks}
        notes = [
            "Hook plugins not consulted because of the allow/deny lists: "
            f"{', '.join(sorted(unasked))} (allow-list the distribution to use the names it "
            "registers)."
        ]
        return unknown_message(Entry, name, self.entries(), notes if unasked else ())

    # -- give me the class ----------------------------------------------------

    def load(self, name_or_entry: str | Entry) -> Any:
        """The validated class for a name or entry (imported on first use).

        A failure marks the entry broken (with the original exception as the
        cause) so it is not imported again.
        """
        from .errors import PluginLoadError

        entry = self.resolve(name_or_entry) if isinstance(name_or_entry, str) else name_or_entry
        if entry._cls is not None:
            return entry._cls
        if entry.status == "broken" and entry.error and entry.kind != "memory":
            raise PluginLoadError(f"interaction {entry.describe()} is broken: {entry.error}")
        from . import _classes
        from ._spec import validate_interaction_class

        try:
            klass = self._hook_class(entry) if entry.kind == "hook" else self._import(entry)
        except PluginLoadError as exc:
            cause = exc.__cause__
            entry.status, entry.error = "broken", _classes.describe(cause) if cause else str(exc)
            raise
        try:
            validate_interaction_class(klass, f"interaction {entry.describe()}")
        except Exception as exc:
            entry.status, entry.error = "broken", str(exc)
            raise
        entry._cls = klass
        if entry.path:  # a plugin declaring other core versions gets a clear warning
            _classes.warn_if_incompatible(entry.distribution, entry.version, entry.path, entry.name)
        return klass

    def _import(self, entry: Entry) -> Any:
        from ._classes import import_failure, import_target
        from .errors import PluginLoadError

        try:
            return import_target(entry.target)
        except Exception as exc:
            what = f"interaction {entry.describe()}"
            raise PluginLoadError(import_failure(what, exc)) from exc

    def _hook_class(self, entry: Entry) -> Any:
        """The class a hook plugin registers under the entry's name (the plugin imported now)."""
        from .errors import PluginLoadError

        host = self.plugin_host
        registrations = host.collect("register_interactions")
        if entry.plugin in host.errors:
            raise PluginLoadError(
                f"hook plugin {entry.plugin} providing interaction {entry.name!r} failed: "
                f"{host.error_message(entry.plugin)}"
            ) from host.errors[entry.plugin]
        for reg in registrations.get(entry.plugin or "", []):
            if reg.name == entry.name:
                entry.defaults = reg.defaults
                entry.description = reg.description
                return reg.load()
        raise PluginLoadError(
            f"hook plugin {entry.plugin} no longer registers {entry.name!r}; "
            "run 'interactions cache clear' if it was upgraded in place"
        )

    def check(
        self,
        import_timeout: float | None = None,
        only: Callable[[Entry], bool] | None = None,
    ) -> list[Entry]:
        """Import and validate every usable entry (those ``only`` accepts, when given);
        return all entries with updated status.

        Each import is waited for at most ``import_timeout`` seconds (default:
        ``$INTERACTIONS_IMPORT_TIMEOUT``, else 60): a plugin that hangs while
        being imported is reported as broken and the check goes on.
        """
        import threading

        timeout = default_import_timeout() if import_timeout is None else import_timeout
        for entry in self.entries():
            if entry.status != "ok" or (only is not None and not only(entry)):
                continue
            worker = threading.Thread(
                target=self._load_quietly, args=(entry,), name="interactions-check", daemon=True
            )
            worker.start()
            worker.join(min(timeout, threading.TIMEOUT_MAX))  # inf, 1e308: wait, no overflow
            if worker.is_alive():  # left behind, as a daemon thread, to finish or not
                entry.status = "broken"
                entry.error = (
                    f"importing it did not finish within {timeout:g} s (a plugin that "
                    f"hangs at import; set {IMPORT_TIMEOUT_VAR} to wait longer)"
                )
        return self.entries()

    def _load_quietly(self, entry: Entry) -> None:
        try:
            self.load(entry)
        except BaseException:  # recorded on the entry by load()
            pass

    def create(self, name: str, config: dict[str, Any] | None = None) -> Any:
        """Instantiate the interaction ``name`` with ``config`` (``name`` added if absent)."""
        from ._classes import instantiate

        entry = self.resolve(name)
        klass = self.load(entry)
        options = {**entry.defaults, **(config or {})}
        options.setdefault("name", name)
        return instantiate(klass, options)


_current: tuple[tuple[object, ...], Registry] | None = None


def get_registry() -> Registry:
    """The process-wide catalog, rebuilt when ``sys.path`` or the selection changes."""
    global _current
    key = (tuple(sys.path), Selection.from_env().key, os.environ.get(_index.NO_CACHE_VAR))
    if _current is None or _current[0] != key:
        _current = (key, Registry.from_environment())
    return _current[1]


def reset_registry() -> None:
    """Forget the process-wide catalog (after installing something in-process)."""
    global _current
    _current = None
