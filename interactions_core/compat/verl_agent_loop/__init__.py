"""The old import path of :mod:`interactions_core.integrations.verl`, kept working.

Agent-loop YAML files name
``_target_: interactions_core.compat.verl_agent_loop.InteractionAgentLoop``; that
line resolves to the very same class as the new path
``interactions_core.integrations.verl.InteractionAgentLoop``. New configs should
name the new path.
"""

from __future__ import annotations

from ...integrations.verl import (
    AGENT_NAME,
    SUPPORTED_VERL,
    InteractionAgentLoop,
    check_cluster_once,
    interactions_for,
)

__all__ = [
    "AGENT_NAME",
    "SUPPORTED_VERL",
    "InteractionAgentLoop",
    "check_cluster_once",
    "interactions_for",
]
