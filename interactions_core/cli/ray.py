"""``interactions ray check``: do all nodes of a Ray cluster see the driver's plugins?"""

from __future__ import annotations

from ._command import Arg, Command, flag, wait_seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

_CHECK = Command(
    "check",
    help="compare the plugins every alive node discovers with this machine's",
    description="Run discovery on every alive node of the cluster and compare names, "
    "distributions, versions, targets and status with this process. Prints a table of "
    "the differences; exits 1 when there is any.",
    arguments=[
        Arg(
            "--address",
            default=None,
            metavar="HOST:PORT",
            help="the cluster to check (default: $RAY_ADDRESS, else the cluster started on "
            "this machine with 'ray start --head'; the check never starts a cluster of "
            "its own)",
        ),
        Arg(
            "--timeout",
            type=wait_seconds,
            default=120.0,
            metavar="SECONDS",
            help="how long to wait for each node (default 120)",
        ),
        flag("--json", "print the report as JSON"),
    ],
)

#: ``interactions ray`` only groups its subcommands; ``run`` below runs ``ray check``.
COMMAND = Command(
    "ray",
    help="Ray clusters: check that every node sees the same plugins",
    description="Commands for Ray clusters (needs Ray: pip install 'ray>=2.40', what the "
    "[ray] extra installs). See docs/ray.md.",
    subcommands=[_CHECK],
)


def run(args: argparse.Namespace) -> int:
    import os

    from ..ray.consistency import check_cluster_plugins

    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"
    report = check_cluster_plugins(address, timeout=args.timeout)
    if args.json:
        from ._command import print_json

        print_json(report.as_dict())
    else:
        print(render(report))
    return 1 if report.differences else 0


def render(report: Any) -> str:
    """A cluster report (``ClusterReport``) as text, its differences as a table."""
    if report.consistent:
        return str(report.headline())
    from ._command import table

    return "\n".join([report.headline(), table(report.COLUMNS, report.rows()), report.ADVICE])
