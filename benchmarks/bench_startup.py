"""CLI start-up: a warm ``interactions list`` against ``python -c pass``.

Both run with the same interpreter and environment (an isolated, pre-warmed
index cache), alternately. Goal: at most 3x a bare interpreter start. That is
well below what a person notices, with the CLI written on the standard libraries
(``argparse``, ``json``, ``packaging``) rather than hand-made replacements of them:
past that point clarity is worth more than milliseconds.

``interactions`` is the console script pip writes. Its imports are not the
project's: pip before 25 wrote a wrapper that imports ``re`` (about half a
bare start-up on its own), current pip writes one that imports only ``sys``.
A second row reports warm ``list`` against that wrapper's own imports run
alone, the share the project's code adds; its detail names them. A third row
reports the standard-library part alone against ``python -c pass``: a script
that imports what the CLI is written with (``argparse``, ``json``),
declares the same ``list`` parser and parses a bare ``list``. The distance
between it and the first row is what the project's own modules and the listing
cost.
"""

from __future__ import annotations

from pathlib import Path

from _common import PYTHON, Row, alternate, clean_env, interactions_command, run_once, scratch

GOAL = 3.0
REPRODUCE = "python benchmarks/run.py --only startup"
WARM = "CLI start-up: warm `interactions list` / `python -c pass`"
OVER_WRAPPER = "CLI start-up: warm `interactions list` / the console script's own imports alone"
STDLIB = (
    "CLI start-up: the standard-library part alone (argparse, json; the same parser) / "
    "`python -c pass`"
)
#: The rows this module reports, in order (the docs' table is checked against them).
ROWS = (WARM, OVER_WRAPPER, STDLIB)
#: What a warm ``interactions list`` does with the standard library, and nothing else.
STDLIB_ALONE = """\
import argparse, json
parser = argparse.ArgumentParser(prog="interactions", description="...")
parser.add_argument("--version", action="version", version="...")
sub = parser.add_subparsers(dest="command", metavar="COMMAND")
command = sub.add_parser("list", help="...", description="...")
command.add_argument("patterns", metavar="PATTERN", nargs="*")
command.add_argument("--distribution", metavar="DIST")
for name in ("--all", "--json", "--check"):
    command.add_argument(name, action="store_true")
parser.parse_args(["list"])
json.loads('{"entries": [], "hooks": {}}')
"""


def wrapper_imports(command: list[str]) -> str:
    """The import lines of the console script that are not the project's (``import sys``)."""
    script = Path(command[0])
    if len(command) > 1 or not script.is_file():
        return "import sys"  # run with ``python -m``: no wrapper
    lines = script.read_text(encoding="utf-8").splitlines()
    return "; ".join(
        line.strip()
        for line in lines
        if line.startswith("import ") and "interactions_core" not in line
    )


def run(repeats: int) -> list[Row]:
    env = clean_env(XDG_CACHE_HOME=str(scratch("startup")))
    command = interactions_command()
    cli = [*command, "list"]
    run_once(cli, env)  # writes the index: every timed run below is warm
    timed = alternate(cli, [PYTHON, "-c", "pass"], repeats=repeats, env_a=env)
    imports = wrapper_imports(command)
    wrapper = alternate(cli, [PYTHON, "-c", imports], repeats=repeats, env_a=env)
    stdlib = alternate(
        [PYTHON, "-c", STDLIB_ALONE], [PYTHON, "-c", "pass"], repeats=repeats, env_a=env
    )
    return [
        Row.at_most(
            WARM,
            GOAL,
            timed.ratio,
            timed.describe("list", "pass"),
            REPRODUCE,
        ),
        Row(
            OVER_WRAPPER,
            "report",
            wrapper.ratio,
            None,
            f"{wrapper.describe('list', 'wrapper')}; the wrapper's imports: `{imports}`",
            REPRODUCE,
        ),
        Row.report(STDLIB, stdlib.ratio, stdlib.describe("stdlib", "pass"), REPRODUCE),
    ]
