"""A scoring function in place of the judge model: ``scorer: package.module:function``.

Some rubrics are checked better by code than by a model (was a refund issued for
the right order?). ``function(messages, fields)`` gets the conversation and the
sample's fields (``goal``, ``persona``, ``rubric`` and the rest) and returns a
score in [0, 1], plain or ``async``; it scores whatever the judge would have
(the conversation, and each turn with ``judge_turns``, the turn being the last
assistant message). Anything else it returns is an error of that sample.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from typing import Any

__all__ = ["Scorer", "load_scorer"]


class Scorer:
    """A loaded scoring function, called with the conversation and the sample's fields."""

    def __init__(self, target: str, function: Callable[..., Any]) -> None:
        self.target = target
        self.function = function

    async def score(self, messages: list[dict[str, Any]], fields: dict[str, Any]) -> float:
        value = self.function(list(messages), dict(fields))
        if inspect.isawaitable(value):
            value = await value
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 0.0 <= value <= 1.0
        ):
            raise ValueError(
                f"usersim: scorer {self.target} returned {value!r}, not a score in [0, 1]"
            )
        return float(value)


def load_scorer(target: str) -> Scorer:
    """Import ``package.module:function``; ``ValueError`` that says what is wrong."""
    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise ValueError(f"usersim: scorer must be 'package.module:function', not {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"usersim: cannot import the scorer's module {module_name!r}: {exc}"
        ) from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"usersim: {module_name} has no function {name!r} (scorer: {target})")
    return Scorer(target, function)
