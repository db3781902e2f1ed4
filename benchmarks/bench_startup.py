"""CLI start-up: a warm ``interactions list`` against ``python -c pass``.

Both run with the same interpreter and environment (an isolated, pre-warmed
index cache), alternately. Goal: at most 1.5x a bare interpreter start.

``interactions`` is the console script pip writes, and pip's script imports
``re`` before it calls the CLI; that import alone is a fixed part of every
``interactions`` command that the project does not control. A second row
reports warm ``list`` against that wrapper doing nothing (``import re, sys``),
which is the share the project's own code adds.
"""

from __future__ import annotations

from _common import PYTHON, Row, alternate, clean_env, interactions_command, run_once, scratch

GOAL = 1.5
REPRODUCE = "python benchmarks/run.py --only startup"
WRAPPER_ALONE = "import re, sys"
WARM = "CLI start-up: warm `interactions list` / `python -c pass`"
OVER_WRAPPER = (
    "CLI start-up: warm `interactions list` / pip's console-script wrapper alone "
    f"(`python -c '{WRAPPER_ALONE}'`)"
)
#: The rows this module reports, in order (the docs' table is checked against them).
ROWS = (WARM, OVER_WRAPPER)


def run(repeats: int) -> list[Row]:
    env = clean_env(XDG_CACHE_HOME=str(scratch("startup")))
    cli = [*interactions_command(), "list"]
    run_once(cli, env)  # writes the index: every timed run below is warm
    timed = alternate(cli, [PYTHON, "-c", "pass"], repeats=repeats, env_a=env)
    wrapper = alternate(cli, [PYTHON, "-c", WRAPPER_ALONE], repeats=repeats, env_a=env)
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
            wrapper.describe("list", "wrapper"),
            REPRODUCE,
        ),
    ]
