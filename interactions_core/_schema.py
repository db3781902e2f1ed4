"""Config schemas: an interaction's ``config:`` declared as an attrs class.

A plugin sets ``config_schema = MyConfig`` on its interaction class, where
``MyConfig`` is an ``@attrs.define`` class. The loader then checks a config
entry's ``config:`` mapping against it *before* anything is instantiated: unknown
keys (listing the allowed ones), missing required fields, values of the wrong type
and values the field's own validators refuse are all reported together. The same
description drives ``interactions show``.

Type checking covers what configs contain: ``str``, ``int``, ``float``, ``bool``,
``Literal[...]``, ``Optional``/unions, ``list[...]`` and ``dict[str, ...]``; other
annotations are left to the field's validators.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from ._names import suggest
from .errors import ConfigError

__all__ = ["FieldInfo", "build_settings", "check_options", "describe", "type_name"]


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
    """A short, readable name for an annotation (``'strict' | 'flexible'``, ``int``)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if tp is type(None):
        return "None"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp)


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
        except (TypeError, ValueError) as exc:
            problems.append((None, f"invalid options: {exc}"))
    return problems


def build_settings(schema: type, options: Mapping[str, Any], owner: str = "") -> Any:
    """Validate ``options`` and return the schema instance, or raise :class:`ConfigError`."""
    problems = check_options(schema, options)
    if problems:
        prefix = f"interaction {owner!r}: " if owner else ""
        raise ConfigError([prefix + p for _, p in problems])
    return schema(**options)


def _default(field: attrs.Attribute) -> Any:
    default: Any = field.default
    if default is attrs.NOTHING:
        return None
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return None if default.takes_self else default.factory()
    return default


def describe(schema: type) -> list[FieldInfo]:
    """The fields of ``schema`` with readable types, defaults and help texts."""
    hints = _hints(schema)
    out = []
    for f in attrs.fields(schema):
        out.append(
            FieldInfo(
                name=f.name,
                type=type_name(hints.get(f.name, f.type)),
                required=f.default is attrs.NOTHING,
                default=_default(f),
                help=str(f.metadata.get("help", "")),
            )
        )
    return out
