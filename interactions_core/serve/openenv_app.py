"""OpenEnv's application, reduced to the routes an interaction server offers.

* The web interface is never mounted. OpenEnv's ``create_app`` mounts its Gradio
  UI when ``ENABLE_WEB_INTERFACE`` is set (Hugging Face Spaces images set it),
  and every route of that UI fails for interactions; the server builds the plain
  application instead (``create_fastapi_app``) and logs a note when the
  variable asked for the UI.
* ``/mcp`` (HTTP and WebSocket) is removed: interactions expose no tools, and
  OpenEnv's ``/mcp`` creates sessions without any token check, so it would let
  anyone hold session slots on a server that requires a token.
* The Task API (the rows given with ``--data``) is behind :class:`TaskApiGate`:
  the shared token when one is set, and a bound on the responses held at once.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import ServeError
from ..errors import sendable as sendable_text

__all__ = [
    "MAX_TASK_RESPONSES",
    "REMOVED_ROUTES",
    "TASK_API_ENV",
    "TaskApiGate",
    "escape_surrogates",
    "plain_openenv_app",
    "publish_reset_schema",
    "readable_msg",
    "reset_schema_options",
    "sendable",
    "serves_task_api",
    "task_api_options",
]

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
    from fastapi.exceptions import RequestValidationError

    app.add_exception_handler(RequestValidationError, _readable_validation_error)
    return app


async def _readable_validation_error(request: Any, exc: Any) -> Any:
    """FastAPI's 422, whatever the refused input holds.

    Its own handler echoes the input in the answer, and an input of ``1e999`` or
    ``NaN`` (valid to Python's JSON reader) cannot be written back as JSON: every
    such request became a 500 and two tracebacks in the log. Non-finite numbers
    are echoed as ``null``.
    """
    from fastapi.encoders import jsonable_encoder
    from fastapi.responses import JSONResponse

    from .._files import json_safe

    # A lone surrogate in the input (valid to Python's JSON reader) has no UTF-8 form:
    # the 422 was a 500 with two tracebacks too. It is echoed as its escape.
    errors = [{**error, "msg": readable_msg(error)} for error in exc.errors()]
    detail = escape_surrogates(json_safe(jsonable_encoder(errors)))
    return JSONResponse(status_code=422, content={"detail": detail})


#: What pydantic's ``string_unicode`` error means here: its own words ("Input should
#: be a valid string, unable to parse raw data as a unicode string") named the wrong
#: problem for a key holding a lone surrogate, the real refusal unseen.
LONE_SURROGATE = (
    "a key or text holds a lone surrogate (such as \\ud800), which UTF-8 cannot "
    "carry: send valid text"
)


def readable_msg(error: Mapping[str, Any]) -> str:
    """The message of one of pydantic's validation errors, said plainly."""
    if error.get("type") == "string_unicode":
        return LONE_SURROGATE
    return str(error.get("msg", "invalid"))


# ``/schema`` with the reset observation, on every supported OpenEnv release.
#
# OpenEnv 0.10 servers publish, beside the action, observation and state schemas,
# ``reset_observation``: the model a reset returns (``create_fastapi_app(...,
# reset_observation_cls=...)``), so a client can check a reset before it steps.
# The older ``openenv-core`` 0.3 has no such argument and its ``/schema`` response
# model drops unknown fields, so there the route is replaced by one giving the
# same four schemas. A served reset returns an :class:`InteractionObservation`
# (the prompt at turn 0), the same model as a step.


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


# OpenEnv 0.10's Task API: routes under ``/{env_name}/`` that call the
# environment's ``list_splits``, ``num_tasks``, ``get_task``, ... on a fresh
# instance. Without ``env_name`` OpenEnv names the environment after the factory
# (``environment`` for a ``functools.partial``), so the server names it.
# ``openenv-core`` 0.3 has neither the argument nor the routes.

#: The environment name in the Task API's paths (``/interactions/splits``, ...).
TASK_API_ENV = "interactions"


#: Task API responses held at once (being built, or waiting for their client to read).
MAX_TASK_RESPONSES = 8


class TaskApiGate:
    """ASGI middleware in front of the Task API routes (``/interactions/...``).

    With a shared token (``check_token`` given), only a request bearing it in
    ``Authorization: Bearer`` is answered. The path checked is the one routing
    uses (``scope["path"]``), never a URL rebuilt from the ``Host`` header, which
    a client writes. And at most ``limit`` responses are held at once (a
    ``503`` beyond): a response stays in memory until its client has read it, so
    clients that ask and never read cannot pile responses up.
    """

    def __init__(
        self, app: Any, *, check_token: Callable[[str | None], None] | None, limit: int
    ) -> None:
        self.app, self.check_token, self.limit = app, check_token, limit
        self.held = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = str(scope.get("path", "")).lower() if scope.get("type") == "http" else ""
        if not path.startswith(f"/{TASK_API_ENV}/") and path != "/list_environments":
            await self.app(scope, receive, send)
            return
        problem = self._refusal(scope)
        if problem is not None:
            status, detail = problem
            body = json.dumps({"detail": detail}).encode("utf-8")
            # A 401 asks for the token (retrying will not help); a 503 for patience.
            headers = [(b"content-type", b"application/json")]
            headers.append(
                (b"www-authenticate", b"Bearer") if status == 401 else (b"retry-after", b"1")
            )
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        self.held += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.held -= 1

    def _refusal(self, scope: Any) -> tuple[int, str] | None:
        if self.check_token is not None:
            found = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
            header = bytes(found[0]).decode("utf-8", "replace") if found else ""  # any token
            scheme, _, value = header.partition(" ")
            try:
                self.check_token(value.strip() if scheme.lower() == "bearer" else None)
            except ServeError:
                return 401, (
                    "this server requires its shared token for the Task API: send the header "
                    "'Authorization: Bearer <token>' (the server reads it from "
                    "INTERACTIONS_SERVE_TOKEN)"
                )
        if self.held >= self.limit:
            return 503, (
                f"the Task API is answering {self.held} requests already (each response is "
                "held until its client has read it); retry in a moment"
            )
        return None


def task_api_options(create_app: Callable[..., Any]) -> dict[str, Any]:
    """The keyword naming the environment in ``create_app``'s Task API, if it has one."""
    if "env_name" in inspect.signature(create_app).parameters:
        return {"env_name": TASK_API_ENV}
    return {}


def serves_task_api(app: Any) -> bool:
    """True when OpenEnv added its Task API routes to ``app``."""
    return any(getattr(r, "path", None) == "/{env_name}/splits" for r in app.router.routes)


# What goes over the wire: an observation every client can decode, or a readable error.
#
# An observation is sent as UTF-8 JSON, which cannot carry a lone surrogate
# (``"\ud800"``, valid in a Python string and in ``json.loads`` input). Such a
# character in the prompt, the feedback or a message is replaced by its escape,
# the six characters ``\ud800`` (the rule ``backslashreplace`` applies when
# encoding UTF-8), so the episode goes on and its reward and score arrive.
#
# An observation that still cannot be serialised (nesting too deep for the
# serialiser) ends its episode, finalizing the session so it no longer counts
# against ``--max-sessions``, and the client gets an error saying why.


def escape_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings written as ``\\udXXX``."""
    if isinstance(value, str):
        return sendable_text(value)
    if isinstance(value, dict):
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_surrogates(item) for item in value]
    return value


async def sendable(
    build: Callable[[dict[str, Any]], Any],
    fields: dict[str, Any],
    end: Callable[[], Awaitable[Any]],
) -> Any:
    """The observation ``build(fields)``, checked to serialise; else end the episode and say so.

    Surrogates are escaped only when the first attempt fails: nearly every
    observation has none, and walking the whole conversation on each step would
    cost more than the step itself.
    """
    try:
        try:
            observation = build(fields)
            observation.model_dump_json()
        except ValueError:  # a lone surrogate (pydantic's error is a ValueError), or worse
            observation = build(escape_surrogates(fields))
            observation.model_dump_json()
    except (RecursionError, ValueError) as exc:
        await end()
        raise ServeError(
            f"the observation cannot be sent as JSON ({type(exc).__name__}: "
            f"{str(exc)[:200]}); the episode is over and its session finalized. Keep prompts "
            "and feedback to plain, moderately nested chat messages, then call reset"
        ) from None
    return observation
