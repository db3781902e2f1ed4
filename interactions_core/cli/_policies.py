"""``interactions run --list-policies``: the policies a run can use, as a table or JSON.

Built-in policies and those plugins register are listed alike; one that cannot
be loaded is listed with its status, and its error is printed below the table.
"""

from __future__ import annotations

__all__ = ["list_policies"]


def list_policies(as_json: bool) -> int:
    """Print every policy (name, distribution, kind, target, status); exit code 0."""
    from ..registry import get_registry
    from ..runtime.policies import list_policies as policies

    rows = [p.as_dict() for p in policies(get_registry())]
    if as_json:
        from ._output import print_json

        print_json(rows)
        return 0
    from ._output import table

    headers = ("name", "distribution", "kind", "target", "status")
    print(table(headers, [[str(r[h] or "") for h in headers] for r in rows]))
    problems = [r for r in rows if r["error"]]
    if problems:
        print()
        for r in problems:
            print(f"{r['name']} ({r['distribution']}): {r['status']}: {r['error']}")
    return 0
