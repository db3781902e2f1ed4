"""``interactions report``: one HTML page from the records of one run, or several compared.

See ``docs/report.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._command import Arg, Command, flag, printable

if TYPE_CHECKING:
    import argparse

COMMAND = Command(
    "report",
    help="write an HTML report of a run's records (several files: compared side by side)",
    description="Read the records written by 'interactions run --output' and write one "
    "self-contained HTML page (viewable offline): the summary, plots, the errored and "
    "lowest-scoring episodes and a sample of conversations. Given several files, the "
    "runs are shown side by side.",
    arguments=[
        Arg("records", metavar="RECORDS", nargs="+", help="records file(s) (JSONL)"),
        Arg(
            "-o",
            "--output",
            metavar="FILE",
            help="the HTML file to write (default: the first RECORDS file with .html)",
        ),
        Arg("--title", help="the page title (default: names the records files)"),
        flag("--overwrite", "replace an existing output file"),
    ],
)


def default_output(records: str) -> str:
    """``runs/a.jsonl`` -> ``runs/a.html``."""
    import os

    root, ext = os.path.splitext(records)
    return (root if ext else records) + ".html"


def run(args: argparse.Namespace) -> int:
    import sys

    from .._files import telling_a_wait
    from ..errors import ConfigError
    from ..report import read_records, write_report
    from ..runtime.records import refuse_existing, same_file
    from ._command import pipe_note

    output = args.output or default_output(args.records[0])
    for path in args.records:
        if same_file(output, path):
            raise ConfigError(
                [f"-o {output} is the records file {path}; writing it would destroy the records"]
            )
    refuse_existing(output, args.overwrite)
    runs = read_records(args.records)
    with telling_a_wait(output, pipe_note(output, "-o")):
        size = write_report(runs, output, title=args.title)
    episodes = sum(r.stats.total.episodes for r in runs)
    sys.stderr.write(
        f"wrote {printable(str(output))} ({size / 1024:,.0f} KiB, {episodes:,} episodes"
        f"{f' in {len(runs)} runs' if len(runs) > 1 else ''})\n"
    )
    for r in runs:
        label = printable(r.label)
        if r.bad_lines:
            sys.stderr.write(f"note: {label}: {r.bad_lines} unreadable line(s) skipped\n")
        if len(r.fingerprints) > 1:
            sys.stderr.write(
                f"warning: {label} holds the records of {len(r.fingerprints)} different runs "
                "(their config_hash or data_hash differ), counted here as one run, in which a "
                "later record replaces an earlier one of the same sample and repeat; to "
                "compare runs, give each its own file: interactions report A.jsonl B.jsonl\n"
            )
        if r.superseded:
            sys.stderr.write(
                f"note: {label}: {r.superseded} record(s) replaced by a later record of the "
                "same sample and repeat (--retry-errors); only the last one counts\n"
            )
        if r.torn_line:
            sys.stderr.write(printable(f"note: {r.torn_line}") + "\n")
    return 0
