"""``interactions list``: what is installed, from metadata alone.

This module declares the command; the listing itself is :func:`._listing.run`,
which ``cli.main`` calls directly for a bare ``list`` or ``list --json``, without
argparse or this declaration.
"""

from __future__ import annotations

from ._command import Arg, Command, flag
from ._listing import run

__all__ = ["COMMAND", "run"]

COMMAND = Command(
    "list",
    help="list installed interactions",
    description="List installed interactions. Reads package metadata only and imports no "
    "plugin code unless --check is given.",
    arguments=[
        Arg(
            "patterns",
            metavar="PATTERN",
            nargs="*",
            help="show only names matching these shell-style patterns, e.g. 'rg/*' or '*arith*'",
        ),
        Arg("--distribution", metavar="DIST", help="show only interactions of this distribution"),
        flag("--all", "list every name of a suite instead of one line"),
        flag("--json", "print a JSON array"),
        flag(
            "--check",
            "import and validate every interaction; report failures as 'broken' "
            "(exit 1 when any is broken)",
        ),
    ],
)
