"""Serving interactions over the OpenEnv protocol (``interactions serve``).

One concept per module:

* :mod:`.hub` — :class:`Hub`: the interactions of a config, routing, limits, counters;
* :mod:`.episode` — :class:`ServedEpisode`: one client's episode, a turn per step;
* :mod:`.errors` — the errors a client gets back, each saying what to send instead;
* :mod:`.environment` — the OpenEnv action, observation and environment classes;
* :mod:`.app` — the FastAPI application and running it with uvicorn.

:mod:`.hub`, :mod:`.episode` and :mod:`.errors` need nothing beyond the core, so
the in-process TRL adapter uses them without OpenEnv; :mod:`.environment` and
:mod:`.app` import OpenEnv (the ``interactions-core[openenv]`` extra). See
``docs/serve.md``.
"""

from __future__ import annotations

from .episode import ServedEpisode
from .errors import AuthError, BadActionError, BadResetError, CapacityError, ServeError
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
