"""Small output helpers shared by the subcommands."""

from __future__ import annotations

import sys

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
    """Print ``data`` exactly as ``json.dumps(data, indent=2)`` would.

    Listing output (lists of flat mappings of plain strings) is encoded here
    directly: the ``json`` module imports ``re`` and ``enum``, which would cost a
    warm ``interactions list --json`` more than everything else it does. Anything
    else goes to ``json`` itself.
    """
    text = _simple_json(data)
    if text is None:
        import json

        text = json.dumps(data, indent=2, default=str)
    (_json_stream or sys.stdout).write(text + "\n")


_SCALARS = {None: "null", True: "true", False: "false"}


def _simple_string(value: str) -> str | None:
    # Printable ASCII without quote or backslash needs no escaping at all.
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return None


def _simple_json(data: Any) -> str | None:
    """``json.dumps(data, indent=2)`` for a list of flat str/None/bool mappings, else None."""
    if type(data) is not list:
        return None
    if not data:
        return "[]"
    items = []
    for row in data:
        if type(row) is not dict:
            return None
        if not row:
            items.append("  {}")
            continue
        fields = []
        for key, value in row.items():
            if type(key) is not str:
                return None
            name = _simple_string(key)
            if type(value) is str:
                text = _simple_string(value)
            elif value is None or type(value) is bool:
                text = _SCALARS[value]
            else:
                return None
            if name is None or text is None:
                return None
            fields.append(f"    {name}: {text}")
        items.append("  {\n" + ",\n".join(fields) + "\n  }")
    return "[\n" + ",\n".join(items) + "\n]"
