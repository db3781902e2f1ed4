"""Serving interactions over the OpenEnv protocol (``interactions serve``).

One concept per module:

* :mod:`.hub` — :class:`Hub`: the interactions of a config, routing, limits, counters;
* :mod:`.episode` — :class:`ServedEpisode`: one client's episode, a turn per step;
* :mod:`.app` — the OpenEnv action, observation and environment classes, the
  FastAPI application serving them, and running it with uvicorn.

The errors a client gets back (:class:`ServeError` and its kinds, each saying what
to send instead) are in :mod:`interactions_core.errors`, with every other error.

:mod:`.hub` and :mod:`.episode` need nothing beyond the core, so the in-process
TRL adapter uses them without OpenEnv; :mod:`.app` imports OpenEnv (the
``interactions-core[openenv]`` extra). See ``docs/serve.md``.
"""

from __future__ import annotations

from ..errors import AuthError, BadActionError, BadResetError, CapacityError, ServeError
from .episode import ServedEpisode
from .hub import Hub

__all__ = [
    "AuthError",
    "BadActionError",
    "BadResetError",
    "CapacityError",
    "Hub",
    "ServeError",
    "ServedEpisode",
]
