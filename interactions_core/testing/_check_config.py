"""The ``config`` check: the class can be built, and a declared schema really applies.

A run builds each interaction from the options in its config. A class that
cannot be built with them stops every other check; a ``config_schema`` that is
declared but never applied (``__init__`` without ``super().__init__(config)``)
lets a misspelt option through silently, which is what the schema is for.
"""

from __future__ import annotations

from typing import Any

from ..errors import InteractionsError
from ._context import CheckContext, describe_exc, short

__all__ = ["UNKNOWN_OPTION", "check_buildable", "check_config"]

#: Option name no schema declares; a class with a schema must refuse it.
UNKNOWN_OPTION = "__conformance_unknown_option__"


def check_config(ctx: CheckContext) -> bool:
    """Build the instance; check the schema. Returns False when nothing else can run."""
    schema = _declared_schema(ctx)
    try:
        ctx.instance()
    except Exception as exc:
        options = {k: v for k, v in ctx.config.items() if k != "name"}
        ctx.add(
            "config",
            f"the class cannot be built with config {options!r}: {describe_exc(exc)}",
        )
        return False
    if ctx.target.shared:
        return True
    if schema is None:
        ctx.report.notes.append(
            "no config_schema declared: config options are passed through unchecked"
        )
        return True
    _check_unknown_option_refused(ctx)
    return True


def check_buildable(ctx: CheckContext) -> bool:
    """With ``config`` skipped: only whether an instance can be had (a ``config`` violation)."""
    try:
        ctx.instance()
    except Exception as exc:
        ctx.add("config", f"the class cannot be built: {describe_exc(exc)}")
        return False
    return True


def _declared_schema(ctx: CheckContext) -> Any:
    """The class's ``config_schema`` when it is an attrs class; anything else is reported."""
    schema = getattr(ctx.target.cls, "config_schema", None)
    if schema is None:
        return None
    import attrs

    if isinstance(schema, type) and attrs.has(schema):
        return schema
    ctx.add(
        "config",
        f"config_schema must be an attrs class (@attrs.define), got {short(schema)}",
    )
    return None


def _check_unknown_option_refused(ctx: CheckContext) -> None:
    """An option the schema does not declare must be refused with an ``InteractionsError``."""
    try:
        ctx.target.cls({**ctx.config, UNKNOWN_OPTION: 1})
    except InteractionsError:
        return
    except Exception as exc:
        ctx.add(
            "config",
            f"an unknown config option made __init__ raise {exc.__class__.__name__} "
            "instead of ConfigError (call super().__init__(config) so the schema is applied)",
        )
        return
    ctx.add(
        "config",
        f"config_schema is declared but the unknown option {UNKNOWN_OPTION!r} was "
        "accepted (call super().__init__(config) so the schema is applied)",
    )
