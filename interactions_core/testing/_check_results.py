"""The ``results`` and ``scores`` rules: what a turn's result and a score must look like.

The runtime coerces what ``generate_response`` returns and adds up the scores;
a wrongly typed field or an ``int``/NaN score would surface far from the plugin
that caused it. These functions judge one returned value each, wherever a check
got it from (a scripted episode, an odd conversation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._interaction import InteractionResult
from ._context import CheckContext, short

__all__ = ["check_result", "check_score"]

#: The fields of a turn's result the ``results`` check types: (field, type, as said).
_RESULT_FIELDS = (
    ("should_terminate", bool, "a bool"),
    ("content", str, "a str"),
    ("extra", Mapping, "a mapping"),
)


def check_result(ctx: CheckContext, raw: Any, where: str) -> InteractionResult | None:
    """Check one turn's result; return it coerced, or ``None`` when unusable."""
    try:
        result = InteractionResult.coerce(raw)
    except TypeError as exc:
        ctx.add(
            "results",
            f"generate_response returned a wrong result (first seen {where}): {exc}",
            key=f"coerce:{exc}",
        )
        return None
    except ValueError:  # a score that is not finite: the scores rule names it
        check_score(ctx, raw[2], "the turn score of generate_response", where)
        return None
    for field, wanted, described in _RESULT_FIELDS:
        value = getattr(result, field)
        if not isinstance(value, wanted):
            kind = type(value).__name__
            ctx.add(
                "results",
                f"generate_response's {field} must be {described}, got {kind} (first seen {where})",
                key=f"{field}:{kind}",
            )
    # the score as returned: coercion would hide an int or a bool
    score = raw[2] if isinstance(raw, (tuple, list)) and len(raw) == 4 else result.score
    check_score(ctx, score, "the turn score of generate_response", where)
    return result


def check_score(ctx: CheckContext, score: Any, what: str, where: str) -> None:
    """A score must be a finite ``float``: not an ``int``, a ``bool``, NaN or infinity."""
    kind = type(score).__name__
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        problem, fix = f"a {kind}", "return a float"
    elif not isinstance(score, float):
        problem, fix = f"an {kind}", f"return a float ({float(score)!r}, not {score!r})"
    elif not math.isfinite(score):
        problem, fix = "not finite", "scores must be finite floats"
        kind = repr(score)
    else:
        return
    ctx.add(
        "scores",
        f"{what} is {problem} (first seen {where}: {short(score)}); {fix}",
        key=f"{what}:{kind}",
    )
