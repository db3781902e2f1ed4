"""GSM8K answer extraction and scoring, as pure functions.

These are kept free of any interaction machinery so they can be used (and tested)
on their own, e.g. as a reward function or to re-score recorded rollouts.

Both methods look only at the last :data:`TAIL_CHARS` characters of a response:
the final answer of a GSM8K solution sits at its end, and bounding the search
keeps the cost per turn independent of how long the model rambled.

The extracted answer is compared with the reference answer *as a string*. A
numeric comparison (``"18.0" == "18"``) is deliberately not made: on the GSM8K
test split plain string comparison agrees with the dataset's own correctness
labels on every row, and a stricter check cannot be gamed by odd formatting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from numbers import Integral, Real
from typing import Literal

__all__ = [
    "METHODS",
    "TAIL_CHARS",
    "Method",
    "answer_extractor",
    "compute_score",
    "extract_answer",
    "normalize_ground_truth",
]

#: The extraction methods, as accepted by the ``method`` option.
Method = Literal["strict", "flexible"]
METHODS: tuple[Method, ...] = ("strict", "flexible")

#: Only this many characters at the end of a response are searched for the answer.
TAIL_CHARS = 300

# "#### <number>", GSM8K's own answer marker.
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
# Anything that looks like a number, possibly with thousands separators or a period.
_NUMBER = re.compile(r"\-?[0-9\.\,]+")


def _extract_strict(text: str) -> str | None:
    """The number after the last ``#### `` in the tail of ``text``, without commas."""
    found = _STRICT.findall(text[-TAIL_CHARS:])
    # verl also removed "$", which the pattern cannot capture: only commas remain.
    return found[-1].replace(",", "") if found else None


def _extract_flexible(text: str) -> str | None:
    """The last number in the tail of ``text``, without separators or a trailing period."""
    for token in reversed(_NUMBER.findall(text[-TAIL_CHARS:])):
        # Tokens made of punctuation only ("." ending a sentence, "," or "-.") are
        # not numbers; a token keeps something after stripping iff it has a digit.
        if token.strip("-.,"):
            return token.replace(",", "").rstrip(".")
    return None


#: The extractor for each method; each looks at the tail of a response only.
_EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "strict": _extract_strict,
    "flexible": _extract_flexible,
}


def answer_extractor(method: Method = "strict") -> Callable[[str], str | None]:
    """The function :func:`extract_answer` applies for ``method``, to call directly.

    An interaction's method is fixed by its config, so it looks the extractor up
    once instead of on every turn.
    """
    try:
        return _EXTRACTORS[method]
    except KeyError:
        raise ValueError(
            f"unknown extraction method {method!r}; use one of: {', '.join(METHODS)}"
        ) from None


def extract_answer(text: str, method: Method = "strict") -> str | None:
    """Extract the final answer of ``text`` as a string, or ``None`` when there is none.

    ``strict`` takes the number after the last ``#### `` (the format GSM8K's
    reference solutions use and models are trained to produce), commas and ``$``
    removed. ``flexible`` takes the last number-looking token instead, with commas
    and a trailing period removed, for models that answer in free text.
    """
    return answer_extractor(method)(text)


def normalize_ground_truth(value: str | int | float | None) -> str | None:
    """Turn a reference answer into the string an extracted answer must equal.

    Datasets store the answer as text (``"1,234"``), as an integer, or, after a
    round trip through pandas/parquet, as a float (``18.0``); all are mapped to
    the form extraction produces: stripped, no commas, integral values without a
    fractional part. ``None`` (no reference) stays ``None`` and never matches.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().replace(",", "")
    if isinstance(value, bool):  # a bool is an Integral, but never a GSM8K answer
        raise TypeError("ground_truth must be a str, int or float, got bool")
    if isinstance(value, Integral):  # also numpy integers
        return str(int(value))
    if isinstance(value, Real):  # also numpy floats
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    raise TypeError(f"ground_truth must be a str, int or float, got {type(value).__name__}")


def compute_score(
    text: str, ground_truth: str | int | float | None, method: Method = "strict"
) -> float:
    """Score a response against a reference answer: ``1.0`` when they match, else ``0.0``.

    Always returns a ``float``, so rewards aggregate without surprises.
    """
    expected = normalize_ground_truth(ground_truth)
    if expected is None:
        return 0.0
    return 1.0 if extract_answer(text, method) == expected else 0.0
