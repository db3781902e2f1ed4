"""Whether a line read back from a records file is an episode record one can count.

A records file is input like any other: edited by hand, produced by another
program, or damaged. ``--resume`` and ``interactions report`` read it through
one reader (:mod:`.records`), and both ask :func:`record_problem` before
counting a record, so one wrong field (``turns: "x"``, ``final_score: 1e400``,
``index: -7``) is reported with its line instead of crashing the reader or
making it allocate without bound. ``--resume`` refuses such a file (it would
continue it); ``interactions report`` skips the line and shows it.

The bounds are generous for real runs and small enough for memory:
:data:`MAX_TURNS` turns per episode (the summary keeps one slot per turn).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_TURNS", "record_problem"]

#: The most assistant (or user) turns a record may claim; more is a damaged record.
MAX_TURNS = 100_000


def _count(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    if value.__class__ is not int or not 0 <= value <= limit:
        return f"'{name}' is {_show(value)}, not a whole number from 0 to {limit:,}"
    return None


def _score(value: Any, name: str) -> str | None:
    if value is None:
        return None
    try:
        finite = value.__class__ in (int, float) and math.isfinite(value)
    except OverflowError:  # an integer beyond any float (10**400)
        finite = False
    return None if finite else f"'{name}' is {_show(value)}, not a finite number"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def record_problem(record: Mapping[str, Any], max_index: int | None = None) -> str | None:
    """What makes ``record`` unusable as an episode record, or ``None`` when it is usable.

    ``max_index``: the number of samples in the dataset (``--resume``); a record
    whose ``index`` is not below it belongs to another dataset.
    """
    index = record.get("index")
    if index is None:
        return "it has no 'index' (not a record of interactions run)"
    problem = _count(index, "index", 1 << 62) or _count(record.get("repeat"), "repeat", 1 << 62)
    if problem:
        return problem
    if max_index is not None and index >= max_index:
        return f"'index' is {index}, outside the dataset's {max_index:,} sample(s)"
    end_reason = record.get("end_reason")
    if end_reason is not None and not isinstance(end_reason, str):
        return f"'end_reason' is {_show(end_reason)}, not a string"
    interaction = record.get("interaction")
    if interaction is not None and not isinstance(interaction, str):
        return f"'interaction' is {_show(interaction)}, not a name"
    sample_id = record.get("sample_id")
    if isinstance(sample_id, float) and not math.isfinite(sample_id):
        return f"'sample_id' is {sample_id!r}"
    problem = (
        _count(record.get("turns"), "turns", MAX_TURNS)
        or _count(record.get("user_turns"), "user_turns", MAX_TURNS)
        or _score(record.get("final_score"), "final_score")
        or _score(record.get("duration_s"), "duration_s")
    )
    if problem:
        return problem
    return _lists_problem(record)


def _lists_problem(record: Mapping[str, Any]) -> str | None:
    scores = record.get("scores")
    if scores is not None:
        if not isinstance(scores, list) or len(scores) > MAX_TURNS:
            return f"'scores' is {_show(scores)}, not a list of at most {MAX_TURNS:,} numbers"
        for score in scores:
            if _score(score, "scores"):
                return f"'scores' holds {_show(score)}, not a finite number"
    errors = record.get("errors")
    if errors is not None and not isinstance(errors, list):
        return f"'errors' is {_show(errors)}, not a list"
    messages = record.get("messages")
    if messages is not None and not isinstance(messages, list):
        return f"'messages' is {_show(messages)}, not a list"
    return None
