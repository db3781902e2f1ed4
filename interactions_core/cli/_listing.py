"""What ``interactions list`` shows: filtering by pattern and distribution, suites as one line.

A suite plugin (reasoning-gym registers 106 names as ``rg/<task>``) would
otherwise push everything else off the screen. By default names sharing a
``prefix/`` from one distribution collapse into one ``prefix/*`` row with
their count when there are at least :data:`SUITE_FROM` of them and none is
broken; ``--all`` or a pattern lists them one by one. Kept free of ``re`` and
``fnmatch`` on the default path: the warm ``interactions list`` imports neither.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: A ``prefix/`` shared by this many names of one distribution is shown as one row.
SUITE_FROM = 5


def select(
    rows: list[dict[str, Any]], patterns: Sequence[str], distribution: str | None
) -> list[dict[str, Any]]:
    """The rows whose name (or qualified name) matches a pattern and whose distribution matches.

    Patterns are shell-style (``rg/*``, ``gsm8k``, ``*arith*``); a distribution
    is compared after PEP 503 normalisation (``Interactions_GSM8K`` matches).
    """
    if distribution:
        from ..selection import normalize

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
