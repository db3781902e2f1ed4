"""Small output helpers shared by the subcommands."""

from __future__ import annotations

import sys

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A left-aligned plain-text table (no dependency, readable in any terminal)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


#: Where JSON goes while a ``--json`` command runs (see :func:`json_output`).
_json_stream: Any = None


class json_output:
    """While a ``--json`` command runs, ``sys.stdout`` is standard error.

    Plugin code imported or called by the command (a ``print`` at import, a
    chatty hook) then cannot put text before or inside the JSON document, which
    :func:`print_json` writes to the real standard output.
    """

    def __enter__(self) -> None:
        global _json_stream
        self._saved = (_json_stream, sys.stdout)
        _json_stream = sys.stdout
        sys.stdout = sys.stderr

    def __exit__(self, *exc_info: object) -> None:
        global _json_stream
        previous, stdout = self._saved
        if sys.stdout is sys.stderr:
            sys.stdout = stdout
        _json_stream = previous


def print_json(data: Any) -> None:
    """Print ``data`` as ``json.dumps(data, indent=2)`` (unknown types as their ``str``).

    The document is always valid JSON (RFC 8259): a float that is ``NaN`` or
    infinite, which ``json`` would print as the non-standard ``NaN`` or
    ``Infinity``, is printed as ``null``.
    """
    import json

    text = json.dumps(_finite(data), indent=2, default=str, allow_nan=False)
    (_json_stream or sys.stdout).write(text + "\n")


def _finite(data: Any) -> Any:
    """``data`` with every non-finite float replaced by ``None`` (lists, tuples, dicts)."""
    if isinstance(data, float):
        return data if data - data == 0.0 else None  # NaN and ±inf give NaN
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(value) for value in data]
    return data
