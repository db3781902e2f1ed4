"""reasoning-gym's procedurally generated tasks as interactions-core interactions.

Installing this distribution registers ``rg/<dataset>`` for every dataset in
reasoning-gym (``rg/countdown``, ``rg/basic_arithmetic``, ...) through the core's
``register_interactions`` hook, and a dataset builder of the same name, so::

    interactions data rg/countdown --count 200 --output countdown.jsonl
    interactions run rg.yaml --data countdown.jsonl

plays 200 generated countdown problems with no data files to download.

Importing this package is cheap: reasoning-gym (which takes over a second to
import) is imported only when an interaction is built or rows are generated.
"""

from __future__ import annotations

from .data import build_rows, wrong_answer
from .interaction import ReasoningGymConfig, ReasoningGymInteraction, dataset_names

__version__ = "0.1.0"

__all__ = [
    "ReasoningGymConfig",
    "ReasoningGymInteraction",
    "__version__",
    "build_rows",
    "dataset_names",
    "wrong_answer",
]
