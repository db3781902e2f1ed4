"""``interactions ray check``: do all nodes of a Ray cluster see the driver's plugins?"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ray",
        help="Ray clusters: check that every node sees the same plugins",
        description="Commands for Ray clusters (needs the extra: pip install "
        '"interactions-core[ray]"). See docs/ray.md.',
    )
    ray_sub = p.add_subparsers(dest="ray_command", metavar="SUBCOMMAND")
    check = ray_sub.add_parser(
        "check",
        help="compare the plugins every alive node discovers with this machine's",
        description="Run discovery on every alive node of the cluster and compare names, "
        "distributions, versions, targets and status with this process. Prints a table of "
        "the differences; exits 1 when there is any.",
    )
    check.add_argument(
        "--address",
        default=None,
        metavar="HOST:PORT",
        help="the cluster to check (default: $RAY_ADDRESS, else the cluster started on this "
        "machine with 'ray start --head')",
    )
    check.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for each node (default 120)",
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(run=run)
    p.set_defaults(run=_usage, ray_parser=p)


def _seconds(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def _usage(args: argparse.Namespace) -> int:
    args.ray_parser.print_help()
    return 2


def run(args: argparse.Namespace) -> int:
    import os

    from ..ray.consistency import check_cluster_plugins

    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"
    report = check_cluster_plugins(address, timeout=args.timeout)
    if args.json:
        from ._output import print_json

        print_json(report.as_dict())
    else:
        print(report.format())
    return 1 if report.differences else 0
