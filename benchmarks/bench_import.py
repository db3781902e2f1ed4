"""Import cost: ``python -c "import interactions_core"`` against ``python -c pass``.

Goal: at most 1.5x. The package's ``__init__`` resolves its public names lazily,
so importing it must not pull in pluggy, yaml, attrs or ``importlib.metadata``
(``tests/test_import_graph.py`` guards that).
"""

from __future__ import annotations

from _common import PYTHON, Row, alternate, clean_env

GOAL = 1.5
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
