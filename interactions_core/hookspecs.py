"""The hook specifications: the contract between the core and its plugins.

``PluginSpec`` holds the pluggy hooks that distributions registered under the
``interactions_core.plugins`` entry-point group may implement: registering many
interactions (or policies, or dataset builders) at run time, and observing
sessions. Observer hooks are looked up once per run; when no plugin implements
them the runtime does not call them at all.
"""

from __future__ import annotations

from typing import Any

import pluggy

from .spec import InteractionSpec  # re-exported: the lifecycle is not a pluggy hook

PROJECT_NAME = "interactions_core"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a hook plugin's functions (``@hookimpl def register_interactions(register)``)."""

__all__ = ["PROJECT_NAME", "InteractionSpec", "PluginSpec", "hookimpl", "hookspec"]


class PluginSpec:
    """Hooks a distribution in the ``interactions_core.plugins`` group may implement."""

    @hookspec
    def register_interactions(self, register: Any) -> None:
        """Contribute interactions at run time, e.g. a whole suite of tasks.

        Call ``register(name, cls, *, defaults=None, description=None)`` once per
        interaction. ``cls`` is validated against
        :class:`~interactions_core.spec.InteractionSpec` like an
        entry-point class; ``defaults`` are config values applied before the
        user's ``config:``. Names registered here are cached in the index, so a
        warm ``interactions list`` does not run this hook again.
        """

    @hookspec
    def register_policies(self, register: Any) -> None:
        """Contribute policies (the model side) by name: ``register(name, cls)``."""

    @hookspec
    def register_dataset_builders(self, register: Any) -> None:
        """Contribute dataset builders by name: ``register(name, builder)``."""

    @hookspec
    def on_session_start(
        self, interaction_name: str, instance_id: str, kwargs: dict[str, Any]
    ) -> None:
        """Observe a session that has just started."""

    @hookspec
    def on_turn(
        self,
        interaction_name: str,
        instance_id: str,
        turn: int,
        messages: list[dict[str, Any]],
        result: Any,
    ) -> None:
        """Observe a finished turn: ``result`` is the interaction's answer to turn ``turn``."""

    @hookspec
    def on_session_end(
        self, interaction_name: str, instance_id: str, record: Any, error: BaseException | None
    ) -> None:
        """Observe a finalized session, with its episode record and error if any."""
