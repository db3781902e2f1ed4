"""Options more than one subcommand takes, and the checks of their values.

``run`` and ``serve`` both take a config, ``--timeout`` and
``--default-interaction``; ``run``, ``serve`` and ``data`` count things that
must be at least 1. Declaring these once keeps the flag, the metavar and the
error a user sees for a bad value the same in every command. The checks are
argparse ``type=`` callables: a bad value becomes argparse's own usage error.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._command import Arg

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    N = TypeVar("N", int, float)

__all__ = [
    "config_file",
    "default_interaction",
    "finite_number",
    "positive_int",
    "positive_seconds",
    "timeout",
    "wait_seconds",
]


def _parsed(text: str, convert: Callable[[str], N], what: str) -> N:
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def positive_int(text: str) -> int:
    """A count: an integer of at least 1 (``--concurrency``, ``--limit``, ...)."""
    value = _parsed(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str, what: str) -> float:
    value = _parsed(text, float, what)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds, more than zero (the ``--timeout`` of a call)."""
    return _seconds(text, "a number")


def wait_seconds(text: str) -> float:
    """Like :func:`positive_seconds`, for a wait (``ray check --timeout``)."""
    return _seconds(text, "a number of seconds")


def finite_number(text: str) -> float:
    """Any finite number (a score threshold): not ``nan``, not ``inf``."""
    import math

    value = _parsed(text, float, "a number")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def config_file(help: str, *, optional: bool = False) -> Arg:
    """The ``CONFIG`` positional: the interactions config (YAML)."""
    if optional:
        return Arg("config", metavar="CONFIG", nargs="?", help=help)
    return Arg("config", metavar="CONFIG", help=help)


def timeout(outcome: str) -> Arg:
    """``--timeout SECONDS``: the bound on each interaction call, and what a timeout does."""
    return Arg(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"bound on each interaction call; {outcome}",
    )


def default_interaction(what: str) -> Arg:
    """``--default-interaction NAME`` for the ``what`` (samples, resets) that name none."""
    return Arg(
        "--default-interaction",
        metavar="NAME",
        help=f"interaction for {what} whose interaction_kwargs has no name (overrides the "
        "config's 'default:')",
    )
