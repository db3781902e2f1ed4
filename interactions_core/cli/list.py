"""``interactions list``: what is installed, from metadata alone."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list installed interactions",
        description="List installed interactions. Reads package metadata only and imports no "
        "plugin code unless --check is given.",
    )
    p.add_argument(
        "patterns",
        metavar="PATTERN",
        nargs="*",
        help="show only names matching these shell-style patterns, e.g. 'rg/*' or '*arith*'",
    )
    p.add_argument(
        "--distribution", metavar="DIST", help="show only interactions of this distribution"
    )
    p.add_argument(
        "--all", action="store_true", help="list every name of a suite instead of one line"
    )
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.add_argument(
        "--check",
        action="store_true",
        help="import and validate every interaction; report failures as 'broken' "
        "(exit 1 when any is broken)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..registry import get_registry

    registry = get_registry()
    entries = registry.check() if args.check else registry.entries()
    rows = [e.as_dict() for e in entries] + [e.as_dict() for e in registry.plugin_problems()]
    patterns = getattr(args, "patterns", None) or []
    distribution = getattr(args, "distribution", None)
    if patterns or distribution:
        from ._listing import select

        rows = select(rows, patterns, distribution)
    if args.json:
        from ._output import print_json

        print_json(rows)
    else:
        filtered = bool(patterns or distribution)
        _print_table(rows, expand=bool(getattr(args, "all", False) or patterns), filtered=filtered)
        if not rows and filtered:
            return 1
    return 1 if args.check and any(r["status"] == "broken" for r in rows) else 0


def _print_table(rows: list[dict], *, expand: bool, filtered: bool) -> None:
    import sys

    from ._listing import group_suites, totals
    from ._output import table

    if not rows:
        if filtered:
            sys.stderr.write(
                "interactions: no installed interaction matches; 'interactions list' shows "
                "them all\n"
            )
        else:
            sys.stdout.write(
                "No interactions installed. Install a plugin, e.g. "
                "'pip install ./plugins/interactions-gsm8k'.\n"
            )
        return
    shown = rows if expand else group_suites(rows)
    headers = ("name", "distribution", "version", "target", "status")
    cells = [[_printable(str(r[h] or "")) for h in headers] for r in shown]
    sys.stdout.write(table(headers, cells) + "\n")
    sys.stdout.write(totals(rows, shown) + "\n")
    problems = [r for r in rows if r["error"]]
    if problems:
        sys.stdout.write("\n")
        for r in problems:
            line = f"{r['name']} ({r['distribution']}): {r['status']}: {r['error']}"
            sys.stdout.write(_printable(line) + "\n")


def _printable(text: str) -> str:
    """``text`` with control characters escaped: names from metadata never drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
