"""OpenEnv's application, reduced to the routes an interaction server offers.

* The web interface is never mounted. OpenEnv's ``create_app`` mounts its Gradio
  UI when ``ENABLE_WEB_INTERFACE`` is set (Hugging Face Spaces images set it),
  and every route of that UI fails for interactions; the server builds the plain
  application instead (``create_fastapi_app``) and logs a note when the
  variable asked for the UI.
* ``/mcp`` (HTTP and WebSocket) is removed: interactions expose no tools, and
  OpenEnv's ``/mcp`` creates sessions without any token check, so it would let
  anyone hold session slots on a server that requires a token.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

__all__ = ["REMOVED_ROUTES", "plain_openenv_app"]

log = logging.getLogger("interactions_core.serve")

#: Paths of OpenEnv routes the server does not offer.
REMOVED_ROUTES = frozenset({"/mcp"})
#: OpenEnv's switch for its web interface.
WEB_INTERFACE_VAR = "ENABLE_WEB_INTERFACE"


def plain_openenv_app(
    factory: Callable[[], Any],
    action_cls: type,
    observation_cls: type,
    *,
    max_concurrent_envs: int,
    **options: Any,
) -> Any:
    """OpenEnv's FastAPI application without its web interface and without ``/mcp``."""
    from openenv.core.env_server import create_fastapi_app

    if os.environ.get(WEB_INTERFACE_VAR, "").strip().lower() in ("true", "1", "yes"):
        log.warning(
            "%s is set, but interactions serve does not offer OpenEnv's web interface "
            "(its routes do not apply to interactions); serving the API only",
            WEB_INTERFACE_VAR,
        )
    app = create_fastapi_app(
        factory, action_cls, observation_cls, max_concurrent_envs=max_concurrent_envs, **options
    )
    app.router.routes[:] = [
        route for route in app.router.routes if getattr(route, "path", None) not in REMOVED_ROUTES
    ]
    return app
