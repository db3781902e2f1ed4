"""``/schema`` with the reset observation, on every supported OpenEnv release.

OpenEnv 0.10 servers publish, beside the action, observation and state schemas,
``reset_observation``: the model a reset returns (``create_fastapi_app(...,
reset_observation_cls=...)``), so a client can check a reset before it steps.
The older ``openenv-core`` 0.3 has no such argument and its ``/schema`` response
model drops unknown fields, so there the route is replaced by one giving the
same four schemas. A served reset returns an :class:`InteractionObservation`
(the prompt at turn 0), the same model as a step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["publish_reset_schema", "reset_schema_options"]


def reset_schema_options(create_app: Callable[..., Any], reset_cls: type) -> dict[str, Any]:
    """The keyword giving ``create_app`` the reset observation, if this OpenEnv takes it."""
    if "reset_observation_cls" in inspect.signature(create_app).parameters:
        return {"reset_observation_cls": reset_cls}
    return {}


def publish_reset_schema(app: Any, action: type, observation: type, state: type) -> None:
    """Make ``GET /schema`` include ``reset_observation`` when OpenEnv's own does not.

    Does nothing on an OpenEnv whose ``create_app`` took ``reset_observation_cls``
    (see :func:`reset_schema_options`); otherwise replaces its ``/schema`` route.
    """
    from openenv.core.env_server import create_fastapi_app

    if reset_schema_options(create_fastapi_app, observation):
        return
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/schema"]

    @app.get("/schema", tags=["Schema"], summary="Get all JSON schemas")
    async def schema() -> dict[str, Any]:
        """The action, observation, reset observation and state schemas."""
        return {
            "action": action.model_json_schema(),  # type: ignore[attr-defined]
            "observation": observation.model_json_schema(),  # type: ignore[attr-defined]
            "reset_observation": observation.model_json_schema(),  # type: ignore[attr-defined]
            "state": state.model_json_schema(),  # type: ignore[attr-defined]
        }
