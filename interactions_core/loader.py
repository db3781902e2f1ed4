"""From a config to interaction instances, all-or-nothing.

:func:`load_config` resolves every entry of a config (registered names through
the registry, verl's dotted ``class_name`` paths through a plain
``importlib.import_module``), derives missing names the way verl does, and checks
each ``config:`` against the plugin's schema. Every problem in every entry is
collected and raised together as one :class:`~interactions_core.errors.ConfigError`
with file and line, before any interaction is instantiated, so a failed load
leaves nothing half-initialised.

:func:`load_interactions` is the one-call version: config in, ordered
``{name: instance}`` out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._classes import instantiate, load_class_path
from ._config import ConfigEntry, InteractionsConfig, parse_config
from ._interaction import derive_name
from .errors import (
    ConfigError,
    InteractionsError,
    Interrupted,
    exception_kind,
    exception_text,
    warn,
)
from .registry import Registry, get_registry

__all__ = ["LoadedConfig", "ResolvedEntry", "class_for_path", "load_config", "load_interactions"]

Source = str | os.PathLike[str] | Mapping[str, Any]


class ResolvedEntry:
    """A config entry with its class found and its options validated."""

    __slots__ = ("cls", "entry", "name", "options", "origin")

    def __init__(
        self, entry: ConfigEntry, name: str, cls: Any, options: dict[str, Any], origin: str
    ) -> None:
        self.entry = entry
        self.name = name
        self.cls = cls
        self.options = options
        self.origin = origin  # qualified registered name or the dotted path


class LoadedConfig:
    """A fully checked config, ready to instantiate."""

    def __init__(self, config: InteractionsConfig, resolved: list[ResolvedEntry]) -> None:
        self.source = config.source
        self.default = config.default
        self.entries = resolved

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.entries]

    def instantiate(self) -> dict[str, Any]:
        """Create every interaction; on any failure none is returned.

        Classes are built the way verl builds them, ``cls(config=...)``, with the
        entry's options and its ``name``; a class whose parameter has another name
        gets the mapping positionally.
        """
        out: dict[str, Any] = {}
        for r in self.entries:
            try:
                out[r.name] = instantiate(r.cls, {**r.options, "name": r.name})
            except BaseException as exc:
                # SystemExit or KeyboardInterrupt from a constructor is the plugin's
                # fault, like any exception; a stop the user asked for goes on.
                kind = type(exc)  # never the exception's own __class__: plugin code
                if issubclass(kind, Interrupted) or not issubclass(
                    kind, (Exception, SystemExit, KeyboardInterrupt)
                ):
                    raise
                raise ConfigError(
                    [
                        f"{r.entry.where(self.source)}: interaction {r.name!r} ({r.origin}) failed "
                        f"to initialise: {exception_kind(exc)}: {exception_text(exc)}"
                    ],
                    self.source,
                ) from exc
        return out


def class_for_path(
    path: str, registry: Registry, where: str, legacy: bool
) -> tuple[Any, str, dict[str, Any]]:
    """The class a ``class_name`` entry names, its origin and its registered defaults.

    verl's built-in paths follow ``VERL_BUILTINS`` in ``_config.py``.
    """
    from ._config import VERL_BASE, VERL_BUILTINS, VerlPathWarning, verl_module_installed

    plugin = VERL_BUILTINS.get(path)
    if (plugin is not None or path == VERL_BASE) and not verl_module_installed(path):
        if plugin is None:
            from ._interaction import BaseInteraction

            warn(
                f"{where}: {path} is verl's base class and verl's interaction module is not "
                "installed (verl 0.8 removed it): interactions_core.BaseInteraction is used",
                VerlPathWarning,
                stacklevel=2,
            )
            return BaseInteraction, "interactions_core.BaseInteraction", {}
        found = registry.resolve(plugin)
        cls = registry.load(found)
        warn(
            f"{where}: {path} is verl's built-in interaction and verl's interaction module is "
            f"not installed (verl 0.8 removed it): the installed plugin {found.qualified} "
            f"{found.version} is used instead; write 'plugin: {plugin}' to say so",
            VerlPathWarning,
            stacklevel=2,
        )
        return cls, found.qualified, dict(found.defaults)
    cls = load_class_path(path, registry, strict=not legacy)
    if plugin is not None:
        warn(
            f"{where}: {path} loaded verl's own class; to use the installed plugin "
            f"instead (same interaction, with verl's bugs fixed), write 'plugin: {plugin}' "
            "in place of class_name",
            VerlPathWarning,
            stacklevel=2,
        )
    return cls, path, {}


def _resolve_entry(
    entry: ConfigEntry,
    registry: Registry,
    source: str | None,
    problems: list[str],
    legacy: bool = False,
    causes: list[BaseException] | None = None,
) -> ResolvedEntry | None:
    defaults: dict[str, Any] = {}
    if entry.class_name:
        key: tuple[str, ...] = ("class_name",)
        try:
            cls, origin, defaults = class_for_path(
                entry.class_name, registry, entry.where(source, *key), legacy
            )
        except InteractionsError as exc:
            problems.append(f"{entry.where(source, *key)}: {exc}")
            if causes is not None:
                causes.append(exc)
            return None
        name = entry.explicit_name or derive_name(entry.class_name)
    else:
        plugin = entry.plugin or entry.explicit_name or ""
        key = ("plugin",) if entry.plugin else ("name",)
        try:
            found = registry.resolve(plugin)
            cls = registry.load(found)
        except InteractionsError as exc:
            problems.append(f"{entry.where(source, *key)}: {exc}")
            if causes is not None:
                causes.append(exc)
            return None
        defaults = dict(found.defaults)
        origin = found.qualified
        name = entry.explicit_name or found.name
    options = {**defaults, **entry.config}
    options.pop("name", None)
    try:
        schema = getattr(cls, "config_schema", None)
    except Exception as exc:  # a property or metaclass that raises: the plugin's fault
        schema = None
        problems.append(f"{entry.where(source)}: reading config_schema raised {exc!r:.200}")
    if schema is not None:
        from ._config import check_options

        for option, problem in check_options(schema, options):
            path = ("config", option) if option else ("config",)
            problems.append(f"{entry.where(source, *path)}: {problem}")
    entry.name = name
    return ResolvedEntry(entry, name, cls, options, origin)


def load_config(
    source: Source,
    *,
    registry: Registry | None = None,
    default: str | None = None,
    legacy: bool = False,
) -> LoadedConfig:
    """Parse, resolve and validate ``source``; raise :class:`ConfigError` listing every problem.

    ``default`` overrides the config's ``default:`` key (the CLI's
    ``--default-interaction``). ``legacy`` (the verl drop-in) accepts dotted-path
    classes that break the spec the way verl tolerated, with a
    :class:`~interactions_core.errors.LegacyInteractionWarning` instead of an error.
    """
    config = parse_config(source)
    if default is not None:
        config.default = default
    registry = registry if registry is not None else get_registry()
    problems: list[str] = list(config.problems)
    resolved: list[ResolvedEntry] = []
    seen: dict[str, ConfigEntry] = {}
    causes: list[BaseException] = []  # the first is chained, so the original is never lost
    for entry in config.entries:
        r = _resolve_entry(entry, registry, config.source, problems, legacy, causes)
        if r is None:
            continue
        if r.name in seen:
            first = seen[r.name]
            problems.append(
                f"{entry.where(config.source)}: Duplicate interaction name {r.name!r} found "
                f"(already used by interaction[{first.index}]); names must be unique"
            )
            continue
        seen[r.name] = entry
        resolved.append(r)
    if config.default is not None and config.default not in seen and not problems:
        from ._names import suggest, summarize

        hint = suggest(config.default, seen, n=1)
        line = f"{config.source}:{config.default_line}" if config.default_line else "<config>"
        problems.append(
            f"{line}: default {config.default!r} is not one of the configured "
            f"interactions ({summarize(seen) or 'none'}){hint}"
        )
    if problems:
        error = ConfigError(problems, config.source)
        if causes:
            raise error from causes[0]
        raise error
    return LoadedConfig(config, resolved)


def load_interactions(source: Source, *, registry: Registry | None = None) -> dict[str, Any]:
    """Load a config (path or mapping) into an ordered ``{name: interaction instance}``."""
    return load_config(source, registry=registry).instantiate()
