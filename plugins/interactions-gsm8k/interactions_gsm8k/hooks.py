"""The hook plugin: the dataset builder ``gsm8k``.

Registered under the entry-point group ``interactions_core.plugins``; the
interaction itself is registered separately, as the entry point ``gsm8k`` of
``interactions_core.interactions``.
"""

from __future__ import annotations

from typing import Any

from interactions_core import hookimpl


@hookimpl
def register_dataset_builders(register: Any) -> None:
    """Register ``gsm8k``: GSM8K raw JSONL -> verl multi-turn rows for the interaction."""
    from .dataset import build_gsm8k

    register(
        "gsm8k",
        build_gsm8k,
        description="GSM8K JSONL (question, answer) -> verl multi-turn rows for gsm8k",
    )
