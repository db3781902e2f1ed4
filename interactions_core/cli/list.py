"""``interactions list``: what is installed, from metadata alone.

Reads the index, filters, prints the table (or JSON); imports no plugin code
unless ``--check`` is given. ``cli.main`` declares only the subcommand it runs,
so this module, ``_command`` and ``_output`` are all of the CLI a warm listing
imports; the default path is kept free of ``fnmatch`` and the did-you-mean.

A suite plugin (reasoning-gym registers 106 names as ``rg/<task>``) would
otherwise push everything else off the screen. By default names sharing a
``prefix/`` from one distribution collapse into one ``prefix/*`` row with
their count when there are at least :data:`SUITE_FROM` of them and none is
broken; ``--all`` or a pattern lists them one by one.
"""

from __future__ import annotations

from ._command import Arg, Command, flag, own_stdout, printable

# ``typing`` is imported for type checkers only: this module is on the path of a
# warm ``interactions list``, where importing ``typing`` alone costs about a
# third of a bare interpreter start (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

__all__ = ["COMMAND", "SUITE_FROM", "group_suites", "run", "select", "totals"]

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

#: A ``prefix/`` shared by this many names of one distribution is shown as one row.
SUITE_FROM = 5


def run(args: argparse.Namespace) -> int:
    """List the index's entries (imported and checked with ``--check``); exit 1 on a problem."""
    from ..registry import get_registry

    registry = get_registry()
    patterns = getattr(args, "patterns", None) or []
    distribution = getattr(args, "distribution", None)
    filtered = bool(patterns or distribution)
    if args.check:  # only what is listed is imported: other plugins' code never runs
        rows = [e.as_dict() for e in registry.entries()]
        listed = {(r["name"], r["distribution"]) for r in select(rows, patterns, distribution)}
        entries = registry.check(
            only=(lambda e: (e.name, e.distribution) in listed) if filtered else None
        )
    else:
        entries = registry.entries()
    rows = [e.as_dict() for e in entries] + [e.as_dict() for e in registry.plugin_problems()]
    if filtered:
        rows = select(rows, patterns, distribution)
    if args.json:
        from ._command import print_json

        print_json(rows)
    else:
        own_stdout()  # a plugin imported by --check may have replaced sys.stdout
        _print_table(rows, expand=bool(getattr(args, "all", False) or patterns), filtered=filtered)
        if not rows and filtered:
            return 1
    return 1 if args.check and any(r["status"] == "broken" for r in rows) else 0


def _print_table(rows: list[dict], *, expand: bool, filtered: bool) -> None:
    import sys

    from ._command import table

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
    cells = [[printable(str(r[h] or "")) for h in headers] for r in shown]
    sys.stdout.write(table(headers, cells) + "\n")
    sys.stdout.write(totals(rows, shown) + "\n")
    problems = [r for r in rows if r["error"]]
    if problems:
        sys.stdout.write("\n")
        for r in problems:
            # A disabled one's reason says so itself ("disabled by ...", "not in ...").
            why = r["error"] if r["status"] == "disabled" else f"{r['status']}: {r['error']}"
            line = f"{r['name']} ({r['distribution']}): {why}"
            # A multi-line error (the spec's list of problems) keeps its lines;
            # only the characters inside each line are escaped.
            for part in line.splitlines():
                sys.stdout.write(printable(part) + "\n")


def select(
    rows: list[dict[str, Any]], patterns: Sequence[str], distribution: str | None
) -> list[dict[str, Any]]:
    """The rows whose name (or qualified name) matches a pattern and whose distribution matches.

    Patterns are shell-style (``rg/*``, ``gsm8k``, ``*arith*``); a distribution
    is compared after PEP 503 normalisation (``Interactions_GSM8K`` matches).
    """
    if distribution:
        from .._names import normalize

        wanted = normalize(distribution)
        rows = [r for r in rows if normalize(str(r["distribution"] or "")) == wanted]
    if patterns:
        from fnmatch import fnmatchcase

        rows = [
            r
            for r in rows
            if any(
                fnmatchcase(str(r["name"]), p) or fnmatchcase(str(r.get("qualified_name")), p)
                for p in patterns
            )
        ]
    return rows


def group_suites(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with each large healthy suite replaced by one ``prefix/*`` row (``count`` set)."""
    sizes: dict[tuple[str, str], int] = {}
    unhealthy: set[tuple[str, str]] = set()
    for r in rows:
        prefix, slash, _ = str(r["name"]).partition("/")
        if slash:
            key = (prefix, str(r["distribution"]))
            sizes[key] = sizes.get(key, 0) + 1
            if r["status"] != "ok":
                unhealthy.add(key)
    suites = {k for k, n in sizes.items() if n >= SUITE_FROM and k not in unhealthy}
    out: list[dict[str, Any]] = []
    done: set[tuple[str, str]] = set()
    for r in rows:
        prefix, slash, _ = str(r["name"]).partition("/")
        key = (prefix, str(r["distribution"]))
        if not slash or key not in suites:
            out.append(r)
        elif key not in done:
            done.add(key)
            count = sizes[key]
            out.append(
                {
                    **r,
                    "name": f"{prefix}/*",
                    "target": f"{count} interactions (list them: --all or '{prefix}/*')",
                    "count": count,
                }
            )
    return out


def totals(rows: list[dict[str, Any]], shown: list[dict[str, Any]]) -> str:
    """The closing line: how many names, from how many distributions, and what is hidden."""
    names = len(rows)
    dists = len({r["distribution"] for r in rows})
    broken = sum(1 for r in rows if r["status"] == "broken")
    disabled = sum(1 for r in rows if r["status"] == "disabled")
    line = (
        f"{names} interaction{'s' if names != 1 else ''} from {dists} "
        f"distribution{'s' if dists != 1 else ''}"
    )
    extra = []
    if broken:
        extra.append(f"{broken} broken")
    if disabled:
        extra.append(f"{disabled} disabled")
    grouped = [r for r in shown if "count" in r]
    if grouped:
        inside = sum(r["count"] for r in grouped)
        extra.append(
            f"{inside} in {len(grouped)} suite{'s' if len(grouped) != 1 else ''} shown as one "
            "line; --all lists every name"
        )
    return line + (f" ({'; '.join(extra)})" if extra else "")
