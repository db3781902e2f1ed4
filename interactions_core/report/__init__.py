"""Run reports: one self-contained HTML file from the records of one or more runs.

``interactions report RECORDS... -o report.html`` and ``interactions run ...
--report report.html`` both end here. :mod:`.collect` reads records in one
pass with bounded memory (through the one records reader,
:mod:`interactions_core.runtime.records`); :mod:`.page` lays out the page, its
tables, stylesheet and script; :mod:`.figures` writes every number the one way
and draws the plots as SVG. The page is written whole (never half a report).
See ``docs/report.md``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from .._files import write_atomically
from .collect import RecordsError, RunData, read_records
from .page import render

__all__ = ["RecordsError", "RunData", "read_records", "render", "write_report"]


def write_report(
    runs: Sequence[RunData], path: str | os.PathLike[str], *, title: str | None = None
) -> int:
    """Render ``runs`` and write the page to ``path`` whole; return its size in bytes.

    The page is written under a temporary name and renamed into place, so a
    reader never sees half a report.
    """
    data = render(runs, title=title).encode("utf-8")
    target = os.fspath(path)
    try:
        write_atomically(target, data)
    except OSError as exc:
        raise RecordsError(f"cannot write the report {target}: {exc.strerror or exc}") from None
    return len(data)


def report_from_files(
    paths: Iterable[str], output: str | os.PathLike[str], *, title: str | None = None
) -> int:
    """Read records files and write their report (the ``interactions report`` command)."""
    return write_report(read_records(paths), output, title=title)
