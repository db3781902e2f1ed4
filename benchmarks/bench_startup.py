"""CLI start-up: a warm ``interactions list`` against ``python -c pass``.

Both run with the same interpreter and environment (an isolated, pre-warmed
index cache), alternately. Goal: at most 1.5x a bare interpreter start.
"""

from __future__ import annotations

from _common import PYTHON, Row, alternate, clean_env, interactions_command, run_once, scratch

GOAL = 1.5
REPRODUCE = "python benchmarks/run.py --only startup"


def run(repeats: int) -> list[Row]:
    env = clean_env(XDG_CACHE_HOME=str(scratch("startup")))
    cli = [*interactions_command(), "list"]
    run_once(cli, env)  # writes the index: every timed run below is warm
    timed = alternate(cli, [PYTHON, "-c", "pass"], repeats=repeats, env_a=env)
    return [
        Row.at_most(
            "CLI start-up: warm `interactions list` / `python -c pass`",
            GOAL,
            timed.ratio,
            timed.describe("list", "pass"),
            REPRODUCE,
        )
    ]
