"""The config's structure: what a config file may say, checked with file and line.

The format is a superset of verl's::

    default: gsm8k                      # optional
    interaction:
      - name: gsm8k                     # alias samples use (interaction_kwargs.name)
        config: {}                      # plugin = name when neither is given
      - name: gsm8k_flexible
        plugin: gsm8k                   # a registered (entry-point) name
        config: {method: flexible}
      - name: legacy
        class_name: my_pkg.mod.MyInteraction   # verl's dotted path
        config: {}
      - name: judge
        replicas: 4                     # served by a pool of 4 Ray actors (docs/ray.md)
        resources: {CPU: 1}             # Ray resources of each replica

``replicas`` and ``resources`` matter only to the Ray integration
(:mod:`interactions_core.ray`); a plain load builds one local instance.

:func:`parse_config` checks the *structure* only (keys, types, names) and reports
every problem with its file and line. Resolving names against the installed
plugins and checking each ``config:`` against its schema is the loader's job
(:mod:`interactions_core.loader`).

Files are read by the project's safe YAML reader (every value with its line).
:func:`load_source` is the one way to read a config source (a path or a mapping)
before its structure is checked; OmegaConf interpolations are resolved as verl
resolves them (by :mod:`interactions_core._yaml`); and verl's dotted paths of its
built-in interactions are mapped to the installed plugins here (:data:`VERL_BUILTINS`).

Config schemas: a plugin's ``config_schema`` (an ``@attrs.define`` class) is what
an entry's ``config:`` is checked against (:func:`check_options`) before anything
is instantiated: unknown keys, missing fields, wrong types (plain data types,
``Literal``, unions, ``list[...]``, ``dict[str, ...]``) and what the field's own
validators refuse, all reported together. :func:`describe` drives ``interactions show``.
"""

from __future__ import annotations

import importlib.util
import os
import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from ._names import suggest
from ._yaml import (
    Lines,
    check_expansion,
    find_interpolation,
    read_config_file,
    resolve_interpolations,
    short_repr,
)
from .errors import ConfigError, InteractionsWarning

__all__ = [
    "VERL_BASE",
    "VERL_BUILTINS",
    "ConfigEntry",
    "FieldInfo",
    "InteractionsConfig",
    "VerlPathWarning",
    "build_settings",
    "check_options",
    "describe",
    "load_source",
    "parse_config",
    "type_name",
    "verl_module_installed",
]


ENTRY_KEYS = ("name", "plugin", "class_name", "config", "replicas", "resources")
TOP_KEYS = ("interaction", "default")


class ConfigEntry:
    """One item of the ``interaction:`` list, structurally valid."""

    __slots__ = (
        "class_name",
        "config",
        "explicit_name",
        "index",
        "line",
        "lines",
        "name",
        "plugin",
        "replicas",
        "resources",
    )

    def __init__(
        self,
        index: int,
        name: str | None,
        plugin: str | None,
        class_name: str | None,
        config: dict[str, Any],
        line: int | None,
        lines: Lines,
        replicas: int | None = None,
        resources: dict[str, float] | None = None,
    ) -> None:
        self.index = index
        self.explicit_name = name
        self.name = name  # filled in from the class or plugin when not explicit
        self.plugin = plugin
        self.class_name = class_name
        self.config = config
        self.line = line
        self.lines = lines  # key path within the entry -> line
        #: Ray pool size and per-replica resources (used by interactions_core.ray only).
        self.replicas = replicas
        self.resources = resources

    def where(self, source: str | None, *key: Any) -> str:
        line = self.lines.get(key) or self.line
        loc = f"{source}:{line}" if source and line else (source or "<config>")
        field = f"interaction[{self.index}]" + "".join(f".{k}" for k in key)
        return f"{loc}: {field}"


class InteractionsConfig:
    """A structurally valid config: its entries and the optional default name."""

    __slots__ = ("default", "default_line", "entries", "problems", "source")

    def __init__(
        self,
        entries: list[ConfigEntry],
        default: str | None,
        source: str | None,
        default_line: int | None = None,
        problems: list[str] | None = None,
    ):
        self.entries = entries
        #: Structural problems of entries left out of ``entries``; the loader adds its own.
        self.problems = problems or []
        self.default = default
        self.source = source
        self.default_line = default_line


def load_source(source: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[Any, Lines, str]:
    """A config source read but not checked: ``(data, lines, where)``.

    ``source`` is a YAML file's path or an already-parsed mapping; ``lines`` maps
    each value to its line in the file (empty for a mapping) and ``where`` names
    the source in messages.
    """
    if isinstance(source, Mapping):
        return dict(source), {}, "<mapping>"
    return read_config_file(source)


class _Locator:
    """``file:line`` of a value, from its path in the document (``<config>`` for a mapping)."""

    def __init__(self, src: str | None, lines: Lines) -> None:
        self.src = src
        self.lines = lines

    def __call__(self, *path: Any) -> str:
        if self.src is None:
            return "<config>"
        line = self.lines.get(path)
        return f"{self.src}:{line}" if line else self.src


def parse_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> InteractionsConfig:
    """Read and structurally validate a config file path or an in-memory mapping.

    Raises :class:`ConfigError` when the document as a whole is unusable. Problems
    confined to single entries are collected in ``problems`` and those entries left
    out, so the loader can go on checking the others and report everything at once.
    """
    data, lines, where = load_source(source)
    src = None if where == "<mapping>" else where
    loc = _Locator(src, lines)
    problems: list[str] = []
    items, default = _document(data, loc, problems)
    by_entry: dict[int, Lines] = {}  # one pass: grouping per entry would be quadratic
    for p, ln in lines.items():
        if len(p) >= 2 and p[0] == "interaction" and isinstance(p[1], int):
            by_entry.setdefault(p[1], {})[p[2:]] = ln
    entries = []
    for i, item in enumerate(items):
        entry = _entry(i, item, loc, problems, by_entry.get(i, {}))
        if entry is not None:
            entries.append(entry)
    return InteractionsConfig(entries, default, src, lines.get(("default",)), problems)


def _document(data: Any, loc: _Locator, problems: list[str]) -> tuple[list[Any], str | None]:
    """The document's ``interaction:`` items and ``default``; raise when it is unusable."""
    if data is None:
        raise ConfigError(
            [f"{loc()}: the config is empty; it needs an 'interaction:' list (see docs/config.md)"]
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [
                f"{loc()}: the config must be a mapping with an 'interaction:' list, "
                f"not a {type(data).__name__}"
            ]
        )
    for key in data:
        if key not in TOP_KEYS:
            problems.append(
                f"{loc(key)}: unknown top-level key {key!r}; allowed keys: "
                f"{', '.join(TOP_KEYS)}{suggest(str(key), TOP_KEYS, n=1)}"
            )
    default = data.get("default")
    if default is not None and (not isinstance(default, str) or not default.strip()):
        problems.append(f"{loc('default')}: 'default' must be a non-empty interaction name")
        default = None
    if "interaction" not in data:
        problems.append(f"{loc()}: missing the 'interaction:' list")
        raise ConfigError(problems)
    items = data["interaction"]
    if items is None:
        items = []
    if not isinstance(items, list):
        problems.append(
            f"{loc('interaction')}: 'interaction' must be a list of entries, "
            f"not a {type(items).__name__}"
        )
        raise ConfigError(problems)
    check_expansion(items, loc("interaction"))
    # Only what reaches plugins is looked at (other top-level keys are refused anyway,
    # and a 'default' that is not a name was refused above), so the scan is bounded by
    # check_expansion: a top-level alias bomb is never walked.
    used: dict[str, Any] = {"interaction": items}
    if default is not None:
        used["default"] = default
    found = find_interpolation(used)
    if found is not None:  # verl's ${...}: resolved as OmegaConf does, or refused
        data = resolve_interpolations(used, loc(*found[0]))
        items = data.get("interaction") or []
    return items, default


def _entry(
    i: int, item: Any, loc: _Locator, problems: list[str], entry_lines: Lines
) -> ConfigEntry | None:
    """One ``interaction:`` item as a :class:`ConfigEntry`, or ``None`` after recording why not."""
    base = ("interaction", i)
    if not isinstance(item, dict):
        problems.append(
            f"{loc(*base)}: interaction[{i}]: each entry must be a mapping with 'name', "
            f"'plugin', 'class_name' or 'config', not a {type(item).__name__}"
        )
        return None
    before = len(problems)
    for key in item:
        if key not in ENTRY_KEYS:
            problems.append(
                f"{loc(*base, key)}: interaction[{i}]: unknown key {key!r}; "
                f"allowed keys: {', '.join(ENTRY_KEYS)}"
                f"{suggest(str(key), ENTRY_KEYS, n=1)}"
            )
    names = _names(i, item, loc, problems)
    config = _options(i, item, loc, problems)
    replicas, resources = _ray_keys(i, item, loc, problems)
    if len(problems) > before:
        return None
    return ConfigEntry(
        i,
        names["name"],
        names["plugin"],
        names["class_name"],
        config,
        loc.lines.get(base),
        entry_lines,
        replicas,
        resources,
    )


def _names(i: int, item: dict[str, Any], loc: _Locator, problems: list[str]) -> dict[str, Any]:
    """``name``, ``plugin`` and ``class_name``: non-empty strings, a usable combination."""
    base = ("interaction", i)
    values: dict[str, str | None] = {}
    for key in ("name", "plugin", "class_name"):
        value = item.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.append(
                f"{loc(*base, key)}: interaction[{i}].{key} must be a "
                f"non-empty string, not {short_repr(value)}"
            )
            value = None
        values[key] = value.strip() if isinstance(value, str) else None
    if values["plugin"] and values["class_name"]:
        problems.append(
            f"{loc(*base)}: interaction[{i}]: give either 'plugin' (a registered "
            "name) or 'class_name' (a dotted path), not both"
        )
    if not (values["name"] or values["plugin"] or values["class_name"]):
        problems.append(
            f"{loc(*base)}: interaction[{i}]: needs a 'name' (the registered interaction "
            "to use) or a 'plugin' or 'class_name'"
        )
    return values


def _options(i: int, item: dict[str, Any], loc: _Locator, problems: list[str]) -> dict[str, Any]:
    """The entry's ``config:`` mapping (checked against its schema later, by the loader)."""
    config = item.get("config", {})
    if config is None:
        return {}
    if not isinstance(config, dict):
        problems.append(
            f"{loc('interaction', i, 'config')}: interaction[{i}].config must be a mapping, "
            f"not a {type(config).__name__}"
        )
        return {}
    if any(not isinstance(k, str) for k in config):
        problems.append(
            f"{loc('interaction', i, 'config')}: interaction[{i}].config keys must be strings"
        )
    return dict(config)


def _ray_keys(
    i: int, item: dict[str, Any], loc: _Locator, problems: list[str]
) -> tuple[int | None, dict[str, Any] | None]:
    """``replicas`` and ``resources``: what the Ray integration serves the entry with."""
    replicas = item.get("replicas")
    if replicas is not None and (
        isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1
    ):
        problems.append(
            f"{loc('interaction', i, 'replicas')}: interaction[{i}].replicas must be a positive "
            f"integer (the number of Ray actors serving it), not {short_repr(replicas)}"
        )
    resources = item.get("resources")
    if resources is None:
        return replicas, None
    bad = not isinstance(resources, dict) or any(
        not isinstance(k, str)
        or isinstance(v, bool)
        or not isinstance(v, (int, float))
        or not v >= 0
        for k, v in resources.items()
    )
    if bad:
        problems.append(
            f"{loc('interaction', i, 'resources')}: interaction[{i}].resources must map Ray "
            "resource names to non-negative numbers, e.g. {CPU: 1, GPU: 0.5}"
        )
    elif replicas is None:
        problems.append(
            f"{loc('interaction', i, 'resources')}: interaction[{i}].resources needs "
            "'replicas: N' as well: resources are those of each pool replica"
        )
    return replicas, dict(resources) if isinstance(resources, dict) else None


# -- verl's dotted class paths of its built-in interactions, and where they lead now ----
#
# verl's own example configs name ``verl.interactions.gsm8k_interaction.Gsm8kInteraction``
# and ``verl.interactions.weather_interaction.WeatherInteraction``. verl 0.8 removed
# that module, so on a current install those paths cannot be imported, while the
# same interactions are installed here as the ``gsm8k`` and ``weather`` plugins.
#
# The rule, stated once: when verl's module is importable, its class is used (it is
# what the config says), with a note naming the plugin that could replace it; when
# it is not, the path resolves to the installed plugin, with a note saying so and
# how to write the entry by name. ``verl.interactions.base.BaseInteraction`` likewise
# falls back to :class:`interactions_core.BaseInteraction`. Finding out whether
# verl's file exists never imports verl (its package import pulls in torch and Ray).

#: verl's class path -> the registered name of the plugin that replaces it.
VERL_BUILTINS = {
    "verl.interactions.gsm8k_interaction.Gsm8kInteraction": "gsm8k",
    "verl.interactions.weather_interaction.WeatherInteraction": "weather",
}
#: verl's base class path, which falls back to the core's own base class.
VERL_BASE = "verl.interactions.base.BaseInteraction"


class VerlPathWarning(InteractionsWarning):
    """A verl class path was resolved in a way the user should know about."""


def verl_module_installed(class_path: str) -> bool:
    """Whether the module of ``class_path`` (under ``verl.``) exists, without importing verl."""
    module = class_path.rpartition(".")[0]
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    relative = module.split(".")[1:]
    for root in spec.submodule_search_locations:
        base = os.path.join(root, *relative)
        if os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py")):
            return True
    return False


# -- config schemas: an interaction's ``config:`` declared as an attrs class ---------


@attrs.frozen
class FieldInfo:
    """One field of a config schema, as shown to users."""

    name: str
    type: str
    required: bool
    default: Any
    help: str


def _hints(schema: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(schema)
    except Exception:  # unresolvable annotations: fall back to what attrs recorded
        return {f.name: f.type for f in attrs.fields(schema)}


def type_name(tp: Any) -> str:
    """A short name for an annotation in a config author's words (``int``, ``list[str]``).

    Every sequence type is called a list, the only sequence YAML has: a user
    told "must be tuple" cannot write one.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin in _SEQUENCES:  # YAML has lists only: tuple[str, ...] reads list[str]
        inner = ", ".join(dict.fromkeys(type_name(a) for a in args if a is not Ellipsis))
        return f"list[{inner}]" if inner else "list"
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if tp is type(None):
        return "None"
    if tp in _SEQUENCES:
        return "list"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp)


#: Python's sequence types, each of which a config file writes as a YAML list.
_SEQUENCES = (list, tuple, set, frozenset)


def _matches(value: Any, tp: Any) -> bool:
    if tp is Any or (tp is None and value is None):
        return True
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        return not args or all(_matches(v, args[0]) for v in value)
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            return False
        if len(args) == 2:
            return all(_matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items())
        return True
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True  # an annotation we do not interpret: leave it to validators


def _string_choices(tp: Any) -> list[Any]:
    """The values of the ``Literal`` types in ``tp`` (through unions)."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return list(typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return [c for a in typing.get_args(tp) for c in _string_choices(a)]
    return []


def check_options(schema: type, options: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """Check ``options`` against ``schema``; return ``(key, problem)`` pairs.

    ``key`` is the offending option (``None`` for a problem about the whole
    mapping) so the caller can point at its line. An empty list means valid.
    """
    if not (isinstance(schema, type) and attrs.has(schema)):
        return [(None, f"config_schema {schema!r:.100} is not an attrs class (@attrs.define)")]
    fields = {f.name: f for f in attrs.fields(schema)}
    hints = _hints(schema)
    problems: list[tuple[str | None, str]] = []
    allowed = ", ".join(fields) or "(none: this interaction takes no options)"
    for key in options:
        if key not in fields:
            close = suggest(str(key), fields, n=1)
            hint = f" ({close[2:]})" if close else ""  # "; did you mean ...?" -> "(did ...)"
            problems.append((key, f"unknown option {key!r}{hint}; allowed options: {allowed}"))
    for name, field in fields.items():
        if name not in options:
            if field.default is attrs.NOTHING:
                problems.append((None, f"missing required option {name!r}"))
            continue
        tp = hints.get(name)
        if tp is not None and not _matches(options[name], tp):
            value = options[name]
            hint = ""
            if isinstance(value, str):  # a misspelt choice: method: flexibel
                choices = [c for c in _string_choices(tp) if isinstance(c, str)]
                hint = suggest(value, choices, n=1)
            problems.append(
                (
                    name,
                    f"option {name!r} must be {type_name(tp)}, "
                    f"got {type(value).__name__} {value!r}{hint}",
                )
            )
    if not problems:
        try:
            schema(**options)
        except BaseException as exc:  # the plugin's constructor: any class
            problems.append((None, _refused(exc)))
    return problems


def _refused(exc: BaseException) -> str:
    """The config problem of a schema's constructor that raised ``exc``.

    ``TypeError`` and ``ValueError`` are how a schema says an option is wrong; any
    other (an ``assert`` in ``__attrs_post_init__``, a factory that raises) is told
    with its type, as the config's problem, not as a bug of the program's own.
    """
    from .errors import MAX_MESSAGE, cut_text, exception_kind, exception_text, stops_the_program

    if stops_the_program(exc):
        raise exc
    text = cut_text(exception_text(exc), MAX_MESSAGE)
    if issubclass(type(exc), (TypeError, ValueError)):
        return f"invalid options: {text}"
    return f"invalid options: {exception_kind(exc)}: {text}"


def build_settings(schema: type, options: Mapping[str, Any], owner: str = "") -> Any:
    """Validate ``options`` and return the schema instance, or raise :class:`ConfigError`."""
    problems = check_options(schema, options)
    prefix = f"interaction {owner!r}: " if owner else ""
    if problems:
        raise ConfigError([prefix + p for _, p in problems])
    try:
        return schema(**options)
    except BaseException as exc:  # raised this time only: told as the check tells it
        raise ConfigError([prefix + _refused(exc)]) from None


def _default(field: attrs.Attribute) -> Any:
    default: Any = field.default
    if default is attrs.NOTHING:
        return None
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            return None
        try:
            return default.factory()
        except BaseException as exc:  # the plugin's factory: `show` describes the rest
            from .errors import class_name, stops_the_program

            if stops_the_program(exc):
                raise
            return f"<its factory raised {class_name(type(exc))}>"
    return default


def describe(schema: type) -> list[FieldInfo]:
    """The fields of ``schema`` with readable types, defaults and help texts."""
    hints = _hints(schema)
    return [
        FieldInfo(
            name=f.name,
            type=type_name(hints.get(f.name, f.type)),
            required=f.default is attrs.NOTHING,
            default=_default(f),
            help=str(f.metadata.get("help", "")),
        )
        for f in attrs.fields(schema)
    ]
