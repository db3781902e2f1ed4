"""Reading the judge's reply: one bounded number, or an error that keeps the reply.

A judge that rambles, refuses or answers out of range must not become a reward
of 0 that nobody sees: it is an error of that episode, whose message carries the
judge's whole reply so the prompt can be fixed.
"""

from __future__ import annotations

import math
import re

__all__ = ["JudgeReplyError", "parse_score"]

# "SCORE: 7", "score = 7.5", "Score: 8/10": the last such line wins (a judge may
# quote the instruction, "SCORE: <a number ...>", before answering). A run of
# whitespace is matched by one class, never by two quantifiers in a row, so the
# time is linear in the reply: "\s*\**\s*" was quadratic on a reply of spaces (a
# judge that runs to its token limit), 20,000 of them held the event loop 6 s.
_NUMBER = r"([-+]?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?"
_LABELLED = re.compile(r"score[\s*]*[:=][\s*]*" + _NUMBER, re.IGNORECASE)
_BARE = re.compile(r"\**\s*" + _NUMBER + r"[\s*]*\.?")


class JudgeReplyError(ValueError):
    """The judge's reply holds no score in range; ``reply`` is the reply as received."""

    def __init__(self, message: str, reply: str) -> None:
        super().__init__(message)
        self.reply = reply


def parse_score(reply: str, scale: float, what: str = "the judge") -> float:
    """The score in ``reply`` divided by ``scale``: a float in [0, 1].

    Accepted: a ``SCORE: <number>`` line (the last one counts), or a reply that
    is only a number (``7``, ``7/10``). A number given out of another (``3/5``)
    is read on that scale (0.6). Anything else, or a number outside its range,
    raises :class:`JudgeReplyError` with the reply in the message.
    """
    found = _LABELLED.findall(reply)
    if found:
        text, over = found[-1]
    else:
        bare = _BARE.fullmatch(reply.strip())
        if bare is None:
            raise JudgeReplyError(
                f"usersim: {what} gave no score (expected a line 'SCORE: <0 to {scale:g}>'); "
                f"its reply was: {reply!r}",
                reply,
            )
        text, over = bare.group(1, 2)
    value, out_of = float(text), float(over) if over else scale
    if not math.isfinite(value) or not 0.0 <= value <= out_of or not 0 < out_of < math.inf:
        shown = f"{text}/{over}" if over else text
        raise JudgeReplyError(
            f"usersim: {what} gave the score {shown}, outside [0, {out_of:g}]; "
            f"its reply was: {reply!r}",
            reply,
        )
    return value / out_of
