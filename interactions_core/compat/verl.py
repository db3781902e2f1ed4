"""verl's interaction loader, as a drop-in.

verl's rollout code calls
``verl.interactions.utils.interaction_registry.initialize_interactions_from_config(path)``
and gets ``{name: interaction}``. Switching to interactions-core is a one-line
import change::

    from interactions_core.compat.verl import initialize_interactions_from_config

The same YAML keeps working (``class_name`` dotted paths included), and it may
now also name installed plugins (``name: gsm8k`` or ``plugin: gsm8k``). Unlike
verl's loader, every entry is checked before any is created, a failed import
leaves no half-initialised module in ``sys.modules``, and errors carry line numbers.
A duplicate name is still a ``ValueError``, as in verl.
"""

from __future__ import annotations

from typing import Any

from ..base import BaseInteraction
from ..loader import load_interactions

__all__ = ["BaseInteraction", "initialize_interactions_from_config"]


def initialize_interactions_from_config(interaction_config_file: str) -> dict[str, Any]:
    """Initialize interactions from a config file; return ``{name: instance}`` (verl's shape)."""
    return load_interactions(interaction_config_file)
