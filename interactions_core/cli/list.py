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
    if args.json:
        from ._output import print_json

        print_json(rows)
    else:
        _print_table(rows)
    return 1 if args.check and any(r["status"] == "broken" for r in rows) else 0


def _print_table(rows: list[dict]) -> None:
    import sys

    from ._output import table

    if not rows:
        sys.stdout.write(
            "No interactions installed. Install a plugin, e.g. "
            "'pip install ./plugins/interactions-gsm8k'.\n"
        )
        return
    headers = ("name", "distribution", "version", "target", "status")
    cells = [[_printable(str(r[h] or "")) for h in headers] for r in rows]
    sys.stdout.write(table(headers, cells) + "\n")
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
