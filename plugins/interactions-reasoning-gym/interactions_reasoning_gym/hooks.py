"""The hook plugin: one interaction and one dataset builder per reasoning-gym dataset.

The core calls these hooks the first time it scans the installed plugins (after an
install or upgrade) and caches the names they register in its index; a warm
``interactions list`` reads the cache and does not import this module, let alone
reasoning-gym.
"""

from __future__ import annotations

from typing import Any

from interactions_core import hookimpl

from .interaction import PREFIX, ReasoningGymInteraction, dataset_description, dataset_names


@hookimpl
def register_interactions(register: Any) -> None:
    """Register ``rg/<dataset>`` for every dataset reasoning-gym provides."""
    for name in dataset_names():
        register(
            PREFIX + name,
            ReasoningGymInteraction,
            defaults={"dataset": name},
            description=dataset_description(name),
        )


@hookimpl
def register_dataset_builders(register: Any) -> None:
    """Register a builder ``rg/<dataset>`` that generates episode rows for that dataset."""
    from .data import build_rows

    for name in dataset_names():
        register(
            PREFIX + name,
            build_rows,
            defaults={"dataset": name},
            description=f"generated reasoning-gym {name} problems as episode rows",
        )
