"""Ray's error texts, cut down to what our own messages quote.

Ray wraps a remote failure in several lines of traceback; a message that tells
the user what to do quotes only the part that says what went wrong.
"""

from __future__ import annotations

__all__ = ["cause_text", "one_line"]


def cause_text(exc: BaseException) -> str:
    """The last line of an error's text (where Ray puts the cause), at most 300 characters."""
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    short = lines[-1] if lines else type(exc).__name__
    return short if len(short) <= 300 else short[:297] + "..."


def one_line(exc: BaseException) -> str:
    """An error's whole text on one line: its non-blank lines, stripped, joined by spaces."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
