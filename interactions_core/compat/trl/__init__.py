"""The old import path of :mod:`interactions_core.integrations.trl`, kept working.

``from interactions_core.compat.trl import environment_factory`` gives the same
function as ``from interactions_core.integrations.trl import environment_factory``;
new code should import the new path.
"""

from __future__ import annotations

from ...integrations.trl import InteractionsEnvironment, environment_factory

__all__ = ["InteractionsEnvironment", "environment_factory"]
