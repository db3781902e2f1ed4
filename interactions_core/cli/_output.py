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


def print_json(data: Any) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
