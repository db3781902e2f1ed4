"""``interactions cache``: where the index cache lives, and emptying it."""

from __future__ import annotations

from ._command import Arg, Command

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

COMMAND = Command(
    "cache",
    help="show or clear the index cache",
    description="The index of installed plugins is cached per interpreter and sys.path and "
    "refreshed automatically after installs; what a hook plugin registers is re-learned "
    "when that plugin's distribution (or one it requires) changes. Set "
    "INTERACTIONS_NO_CACHE=1 to bypass it.",
    arguments=[Arg("action", choices=("path", "clear"), help="print the folder, or empty it")],
)


def run(args: argparse.Namespace) -> int:
    from .. import _index

    if args.action == "path":
        print(_index.cache_dir())
    else:
        removed = _index.clear()
        print(f"removed {removed} cache file{'s' if removed != 1 else ''}")
    return 0
