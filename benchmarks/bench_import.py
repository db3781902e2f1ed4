"""Import cost: ``python -c "import interactions_core"`` against ``python -c pass``.

Goal: at most 3x, the bound of the warm ``interactions list`` (every command pays
this import first, so it cannot be allowed more than the fastest command).
``tests/test_import_graph.py`` keeps a generous bound on the same ratio, and checks
which parts of the project and which heavy dependencies the fast paths load.
"""

from __future__ import annotations

from _common import PYTHON, Row, alternate, clean_env

GOAL = 3.0
REPRODUCE = "python benchmarks/run.py --only import"
IMPORT = "Import: `import interactions_core` / `python -c pass`"
#: The rows this module reports, in order (the docs' table is checked against them).
ROWS = (IMPORT,)


def run(repeats: int) -> list[Row]:
    env = clean_env()
    timed = alternate(
        [PYTHON, "-c", "import interactions_core"],
        [PYTHON, "-c", "pass"],
        repeats=repeats,
        env_a=env,
    )
    return [
        Row.at_most(
            IMPORT,
            GOAL,
            timed.ratio,
            timed.describe("import", "pass"),
            REPRODUCE,
        )
    ]
