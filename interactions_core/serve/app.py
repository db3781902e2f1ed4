"""The served application: OpenEnv's environment classes for a hub, the FastAPI app
serving them, and running it with uvicorn.

OpenEnv's server builds one :class:`InteractionEnvironment` per WebSocket
connection (and a throw-away one per stateless HTTP call) by calling the
factory with no arguments, so the factory is ``functools.partial`` bound to the
:class:`~interactions_core.serve.hub.Hub`. Each environment plays its
connection's episodes through a :class:`~interactions_core.serve.episode.ServedEpisode`;
:class:`InteractionAction` and :class:`InteractionObservation` are what goes over the wire.

:func:`create_app` is OpenEnv's own ``create_app`` (so ``/ws``, ``/reset``,
``/step``, ``/state``, ``/schema``, ``/metadata`` and ``/health`` behave as every
OpenEnv client expects) plus what serving interactions needs:

* ``GET /interactions``: what is served and the session counters;
* OpenEnv 0.10's Task API under ``/interactions/`` (``splits``, ``num_tasks``,
  ``task``, ``task_range``, ``tasks``) for the rows given with ``--data``; with
  a shared token those routes want ``Authorization: Bearer <token>`` (rows may
  hold ground truths). OpenEnv 0.3 has no Task API: the server says so at
  start-up, and ``reset(split=, index=)`` still plays a row;
* readable client errors: a :class:`~interactions_core.errors.ServeError`
  on the HTTP routes becomes a 4xx (or 503 at capacity) whose ``detail`` is the
  message (on ``/ws`` OpenEnv already sends the message as an error frame);
* a start-up log line naming the served interactions, and at shutdown (SIGTERM,
  Ctrl-C) a drain that finalizes every session still open.

:func:`run` binds the socket itself, so a port in use is a one-line error, and
``--port 0`` picks a free port that the log reports.

Importing this module imports OpenEnv (seconds, many packages): only the
``serve`` command and the server tests do.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openenv.core.env_server import Action, Environment, Observation, State
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import Field, ValidationError, model_validator

from .. import __version__
from ..errors import BadActionError, BadResetError, ServeError
from .episode import ServedEpisode, ServeWatchdog
from .hub import FINALIZE_WAIT, FORCED_WAIT, Hub
from .openenv_app import (
    MAX_TASK_RESPONSES,
    TASK_API_ENV,
    TaskApiGate,
    publish_reset_schema,
    readable_msg,
    reset_schema_options,
    sendable,
    serves_task_api,
    task_api_options,
)

if TYPE_CHECKING:
    from .._stop_signals import StopSignals

__all__ = [
    "InteractionAction",
    "InteractionEnvironment",
    "InteractionObservation",
    "InteractionState",
    "create_app",
    "run",
]

log = logging.getLogger("interactions_core.serve")

#: Seconds a disconnecting client's environment waits for its session to be finalized:
#: less than uvicorn's graceful shutdown (30 s), so a hung ``finalize_interaction`` at
#: shutdown is logged as a warning instead of uvicorn cancelling the connection.
CLOSE_WAIT = 10.0


class InteractionAction(Action):
    """One assistant turn: the message the interaction judges."""

    content: str = Field(description="The assistant's message, appended to the conversation.")

    @model_validator(mode="wrap")
    @classmethod
    def _readable(cls, data: Any, handler: Any) -> Any:
        """Turn pydantic's report into one sentence that shows the expected shape."""
        try:
            return handler(data)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                where = ".".join(str(part) for part in error.get("loc", ())) or "action"
                problems.append(f"{where}: {readable_msg(error)}")
            raise BadActionError(
                "bad action (" + "; ".join(problems) + '): send {"content": "<the assistant\'s '
                'message>"}'
            ) from None


class InteractionObservation(Observation):
    """What the interaction answered; ``reward`` is the turn's score."""

    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The conversation so far: the prompt, then each assistant message and "
        "the feedback that followed it (none after the last turn).",
    )
    feedback: str = Field(default="", description="The interaction's answer to the last turn.")
    turn: int = Field(default=0, description="Assistant turns judged so far (0 after reset).")
    final_score: float | None = Field(
        default=None, description="The episode's score (calculate_score), set once done."
    )
    interaction: str = Field(default="", description="The name of the interaction playing.")


class InteractionState(State):
    """``episode_id`` is the session id, ``step_count`` the turn."""

    interaction: str = Field(default="", description="The name of the interaction playing.")
    open: bool = Field(default=False, description="True while the episode is in progress.")


def _observation(fields: dict[str, Any]) -> InteractionObservation:
    return InteractionObservation(**fields)


class InteractionEnvironment(
    Environment[InteractionAction, InteractionObservation, InteractionState]
):
    """One connection's episodes, played on the interactions of a hub."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, hub: Hub) -> None:
        super().__init__()
        self.hub = hub
        self.episode = ServedEpisode(hub)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def reset_async(  # type: ignore[override]
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        prompt: object = None,
        interaction_kwargs: object = None,
        token: object = None,
        split: object = None,
        index: object = None,
        **kwargs: Any,
    ) -> InteractionObservation:
        """Start an episode: ``prompt`` (chat messages) and ``interaction_kwargs`` (name,
        ...), or ``split`` and ``index``, a row served with ``--data``."""
        if kwargs:
            unknown = ", ".join(sorted(kwargs))
            raise BadResetError(
                f"unknown reset argument(s): {unknown}. A reset takes prompt (chat messages) "
                "and interaction_kwargs (the interaction's name and its own arguments, such "
                'as {"name": "gsm8k", "ground_truth": "72"}), or split and index (a row '
                "the server serves from --data)"
            )
        self._loop = asyncio.get_running_loop()
        fields = await self.episode.start(prompt, interaction_kwargs, token, split, index)
        return await sendable(_observation, fields, self.episode.end)

    async def step_async(  # type: ignore[override]
        self, action: InteractionAction, timeout_s: float | None = None, **kwargs: Any
    ) -> InteractionObservation:
        """Judge ``action.content``; the observation's ``reward`` is the turn's score."""
        fields = await self.episode.step(action.content)
        return await sendable(_observation, fields, self.episode.end)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        raise ServeError("this environment is asynchronous: the server calls reset_async")

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        raise ServeError("this environment is asynchronous: the server calls step_async")

    # OpenEnv's Task API (0.10): the rows served with --data. OpenEnv calls these on
    # a fresh environment for each request, so they read only the hub.

    def list_splits(self) -> list[dict[str, Any]]:
        """The served splits: ``name``, ``type`` and ``num_tasks`` of each."""
        return self.hub.tasks.describe()

    def list_tasks(self, split: str) -> list[Any]:
        """The first rows of ``split`` (a preview, bounded; see ``get_task_range``)."""
        return self.hub.tasks.preview(split)

    def num_tasks(self, split: str) -> int:
        """How many rows ``split`` has."""
        return len(self.hub.tasks.rows(split))

    def get_task(self, split: str, index: int) -> Any:
        """Row ``index`` of ``split``, as read from its file."""
        return self.hub.tasks.row(split, index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[Any]:
        """Rows ``start:stop`` of ``split`` (Python slice rules)."""
        return self.hub.tasks.range(split, start, stop)

    @property
    def state(self) -> InteractionState:
        episode = self.episode
        return InteractionState(
            episode_id=episode.instance_id,
            step_count=episode.turn,
            interaction=episode.name,
            open=episode.is_open,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="interactions",
            description=f"interactions-core: {self.hub.summary()}",
            version=__version__,
        )

    def close(self) -> None:
        """End the connection's episode; never blocks the server's event loop.

        OpenEnv calls this from the connection's worker thread when a client
        disconnects (then it waits until the session is finalized), and on the
        event loop itself after a stateless HTTP call (then it schedules it).
        """
        episode = self.episode
        loop = self._loop
        if loop is None or not episode.is_open:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.hub.spawn(episode.end())
        elif loop.is_running():
            future = asyncio.run_coroutine_threadsafe(episode.end(), loop)
            try:
                future.result(timeout=CLOSE_WAIT)
            except Exception as exc:  # the loop is going away or the plugin hangs
                from ..errors import exception_kind, exception_text, printable

                text = exception_text(exc)
                told = exception_kind(exc) + (f": {text}" if text else "")
                log.warning("finalizing session %s: %s", episode.instance_id, printable(told))


# -- the application ---------------------------------------------------------------

#: WebSocket connections allowed per session slot: a client may connect before it
#: resets, and a client over --max-sessions gets the readable capacity error at its
#: reset (beyond this many connections OpenEnv refuses the connection itself).
CONNECTIONS_PER_SESSION = 2
#: Seconds an HTTP connection has to send a complete request head (``--header-timeout``).
HEAD_TIMEOUT = 10.0
#: Seconds a shutdown waits for the steps in flight before closing connections.
DRAIN_WAIT = 30.0
#: Seconds uvicorn gives the connections after the drain before it cancels them: a
#: closed connection's episode gets its ``FINALIZE_WAIT`` to finalize.
GRACE_AFTER_DRAIN = FINALIZE_WAIT + 2.0


# OpenEnv reads the reset method's signature on every reset, to drop the arguments it
# does not take; a signature given once makes that lookup about a quarter as costly.
InteractionEnvironment.reset_async.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    InteractionEnvironment.reset_async
)


def create_app(hub: Hub, **guard: Any) -> Any:
    """The FastAPI app serving every interaction of ``hub`` as one environment; ``guard``:
    the options of :class:`~.guard.Guard` (the application to serve: ``app.state.guard``)."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from openenv.core.env_server import create_fastapi_app

    from .guard import Guard, max_json_values
    from .openenv_app import plain_openenv_app

    guard.setdefault("max_values", max_json_values(hub.max_episode_chars))
    connections = guard.setdefault(
        "max_connections", (hub.max_sessions or 64) * CONNECTIONS_PER_SESSION
    )
    app = plain_openenv_app(
        functools.partial(InteractionEnvironment, hub),
        InteractionAction,
        InteractionObservation,
        # The guard enforces the connection limit; OpenEnv's own must not bite first
        # while a connection closed to make room is still on its way out.
        max_concurrent_envs=2 * connections,
        **reset_schema_options(create_fastapi_app, InteractionObservation),
        **task_api_options(create_fastapi_app),
    )
    publish_reset_schema(app, InteractionAction, InteractionObservation, InteractionState)
    app.state.guard = front = Guard(app, **guard)

    async def serve_error(request: Request, exc: Exception) -> JSONResponse:
        status = getattr(exc, "status", 400)
        return JSONResponse(status_code=status, content={"detail": str(exc)})

    app.add_exception_handler(ServeError, serve_error)
    task_api = serves_task_api(app)
    if task_api:
        check = hub.check_token if hub.token is not None else None
        app.add_middleware(TaskApiGate, check_token=check, limit=MAX_TASK_RESPONSES)

    @app.get("/interactions", tags=["Environment Info"], summary="Served interactions")
    async def interactions() -> dict[str, Any]:
        """The served interactions, the default, the limits and the session counters."""
        described = hub.describe()
        described["connections"] = {"open": front.connections, "max": front.max_connections}
        if front.gate is not None:
            described["connections"]["http"] = len(front.gate.live)
        return described

    async def started() -> None:
        log.info("%s", hub.summary())
        if hub.tasks.splits and not task_api:
            log.warning(
                "this OpenEnv has no Task API (it came with openenv 0.10): the --data rows "
                "are not listed over HTTP, but reset(split=..., index=...) plays them"
            )
        elif hub.tasks.splits:
            log.info("Task API at /%s/splits, /%s/task, ...", TASK_API_ENV, TASK_API_ENV)

    app.router.on_startup.append(started)
    app.router.on_shutdown.append(hub.shut_down)
    return app


def _bind(host: str, port: int) -> socket.socket:
    from ..errors import InteractionsError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise InteractionsError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}. Choose another --port "
            "(0 picks a free one) or stop the process using it."
        ) from exc
    sock.listen(2048)  # not inheritable (Python's default): a plugin's child never holds it
    return sock


def _configure_logging(level: str) -> None:
    logger = logging.getLogger("interactions_core")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:  %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level.upper())


class _QuietClose:
    """ASGI wrapper: a WebSocket that is already closed when OpenEnv closes it is no error,
    and neither is work the watchdog broke outside any plugin call.

    At shutdown uvicorn closes every WebSocket (code 1012) and OpenEnv's handler
    then closes it again, which Starlette reports as a disconnect; without this
    every open connection would print a traceback while the server drains. A
    stop signal during a long block of the server's own work (checking a huge
    reset) has the watchdog raise ``LoopBlocked`` there, which no plugin call
    turns into an episode error; the watchdog logs the block, so here the
    connection just ends, with one line instead of an ASGI traceback.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        #: Whether a second stop signal forced the shutdown (set once the server exists).
        self.forced: Callable[[], bool] = lambda: False
        #: Whether the drain gave up waiting: what still runs is cancelled, as asked.
        self.gave_up: Callable[[], bool] = lambda: False

    def _lifespan_send(self, send: Any) -> Any:
        """``send`` for the lifespan: a shutdown a second signal cut short (its task cancelled)
        is the shutdown asked for, not a failure whose traceback to log."""

        async def quietly(message: Any) -> None:
            if message.get("type") == "lifespan.shutdown.failed" and self.forced():
                message = {"type": "lifespan.shutdown.complete"}
            await send(message)

        return quietly

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from ..runtime.watchdog import LoopBlocked

        try:
            await self._serve(scope, receive, send)
        except LoopBlocked:
            log.info("ended a connection whose work blocked the event loop and was broken")
        except asyncio.CancelledError:
            if not (self.forced() or self.gave_up()):
                raise
            # A second stop signal, or the drain's time is up: uvicorn cancels what still
            # runs, the shutdown asked for (the drain's warning has said how many).

    async def _serve(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "websocket":
            await self._http(scope, receive, send)
            return
        from starlette import websockets

        # Starlette 1.x raises WebSocketDisconnected (a RuntimeError) when the
        # handler sends after the connection was closed under it (the guard cut
        # off a client that read nothing); older releases have only the first.
        gone: tuple[type[BaseException], ...] = (websockets.WebSocketDisconnect,)
        if hasattr(websockets, "WebSocketDisconnected"):
            gone += (websockets.WebSocketDisconnected,)
        try:
            await self.app(scope, receive, send)
        except gone:
            pass

    async def _http(self, scope: Any, receive: Any, send: Any) -> None:
        """An HTTP request; one the shutdown cancels before its answer began (a reset whose
        ``start_interaction`` outlasts the drain) is answered 503, saying so: uvicorn had
        answered a bare 500 and logged "ASGI callable returned without starting response"."""
        started = False

        async def noting(message: Any) -> None:
            nonlocal started
            started = started or message.get("type") == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, noting)
        except asyncio.CancelledError:
            if started or not (self.forced() or self.gave_up()):
                raise
            body = json.dumps({"detail": SHUT_DOWN_ANSWER}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})


#: The answer to an HTTP request the shutdown stopped before it was answered.
SHUT_DOWN_ANSWER = (
    "the server is shutting down and stopped this request before its answer (a start "
    "or step that outlasted the drain); retry on another server, or later"
)


class _Drain:
    """A drain in front of uvicorn's graceful shutdown, started by the first stop signal.

    On the first SIGTERM/SIGINT the hub stops admitting episodes and the steps in
    flight are answered (up to ``DRAIN_WAIT`` seconds); then the server is asked
    to exit (``should_exit``, uvicorn's public switch), it closes the connections
    and the lifespan shutdown finalizes the sessions still open. A second signal
    shuts down at once (``force_exit``). A drained server exits 0.
    """

    def __init__(self, hub: Hub, server: Any) -> None:
        self.hub = hub
        self.server = server
        self.loop: asyncio.AbstractEventLoop | None = None
        self.draining = False
        self.signals: StopSignals | None = None
        #: Set when the drain's ``DRAIN_WAIT`` ran out with work still in flight.
        self.gave_up = False

    async def take_signals(self) -> None:
        """Lifespan start-up: from now on the stop signals drain (see :func:`_on_stop_signals`)."""
        self.loop = asyncio.get_running_loop()
        self.signals = _on_stop_signals(self.stop)

    async def let_go(self) -> None:
        """Lifespan shutdown, last: stop reclaiming the handlers uvicorn is about to restore."""
        if self.signals is not None:
            self.signals.stop_keeping()

    def stop(self) -> None:
        """A stop signal arrived (called in the main thread, between two bytecodes)."""
        loop = self.loop
        if self.draining or loop is None:
            self.hub.exiting(forced=self.draining)
            self.server.force_exit = self.draining
            if self.draining and self.signals is not None:  # the end: see let_go
                self.signals.stop_keeping()
            self.server.should_exit = True
            return
        self.draining = True
        log.info(
            "shutting down: refusing new episodes, finishing %d step(s) or start(s) in flight",
            self.hub.busy,
        )
        loop.call_soon_threadsafe(lambda: self.hub.spawn(self._drain_then_exit()))

    async def _drain_then_exit(self) -> None:
        if not await self.hub.wait_idle(DRAIN_WAIT):
            self.gave_up = True
            log.warning(
                "%d step(s) or start(s) still in flight after %g s: they are cancelled "
                "(an HTTP request's within %g s more, answered 503)",
                self.hub.busy,
                DRAIN_WAIT,
                GRACE_AFTER_DRAIN,
            )
        self.hub.exiting()
        self.server.should_exit = True


# -- stop signals ------------------------------------------------------------


def _on_stop_signals(stop: Callable[[], None]) -> StopSignals:
    """Call ``stop()`` on SIGINT and SIGTERM, through the one stop-signal handler.

    Installed once the server has started, so these handlers take over from the
    ones ``uvicorn.Server.serve`` sets up for its own run; uvicorn puts back the
    handlers from before the run when it returns. The drain tells a first signal
    from a second itself (:meth:`_Drain.stop`), so both call ``stop``.
    """
    from .._stop_signals import StopSignals

    signals = StopSignals(lambda signum: stop(), lambda signum: stop(), exit_after=5.0).install()
    return signals.keep(asyncio.get_running_loop())  # a plugin's handler must not take them


# ---------------------------------------------------------------------------


def _websocket_options(compress: bool, largest: int) -> dict[str, Any]:
    """uvicorn's WebSocket options: messages of at most ``largest`` bytes, compressed or not.

    A WebSocket message, like an HTTP body, is at most what a reset may bring;
    websockets enforces it while decompressing, and a larger message closes the
    connection (1009). What a client's frames may cost is bounded by the protocol
    (:func:`~interactions_core.serve.connections.websocket_protocol`).
    """
    from .connections import websocket_protocol

    return {
        "ws": websocket_protocol(),
        "ws_max_size": largest,
        "ws_per_message_deflate": compress,
    }


async def _quiet_accept_errors() -> None:
    from .guard import quiet_accept_errors

    quiet_accept_errors(asyncio.get_running_loop())


def run(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    *,
    compress: bool = False,
    **guard: Any,
) -> None:
    """Serve ``hub`` until SIGTERM or Ctrl-C; open sessions are finalized on the way out.

    ``guard`` are the options of :class:`~interactions_core.serve.guard.Guard`.
    ``compress`` turns on WebSocket compression (permessage-deflate), which is off
    by default: a trainer usually runs beside the server, where compressing every
    observation costs more CPU than the bytes it saves (docs/serve.md measures both).
    """
    import uvicorn

    from .connections import ConnectionGate, gated_h11, http_connection_cap, max_body

    _configure_logging(log_level)
    sock = _bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    log.info("listening on http://%s:%d (OpenEnv WebSocket at /ws)", shown, sock.getsockname()[1])
    websockets = guard.setdefault(
        "max_connections", (hub.max_sessions or 64) * CONNECTIONS_PER_SESSION
    )
    head_timeout, largest = guard.pop("head_timeout", HEAD_TIMEOUT), max_body(hub.max_episode_chars)
    gate = ConnectionGate(head_timeout, http_connection_cap(websockets), max_body=largest)
    app = create_app(hub, bind_host=host, gate=gate, **guard)
    app.router.on_startup.append(_quiet_accept_errors)
    front = _QuietClose(app.state.guard)
    config = uvicorn.Config(
        front,
        http=gated_h11(gate),
        **_websocket_options(compress, largest),
        log_level=log_level,
        lifespan="on",
        # The drain has waited for the steps already: what is left is cancelled soon after.
        timeout_graceful_shutdown=GRACE_AFTER_DRAIN,
        proxy_headers=False,  # the gate keys each connection by its own peer, not XFF
        loop="asyncio",  # the loop _serve makes: asyncio's own
    )
    server = uvicorn.Server(config)
    front.forced = lambda: bool(server.force_exit)
    drain = _Drain(hub, server)
    front.gave_up = lambda: drain.gave_up
    app.router.on_startup.append(drain.take_signals)
    app.router.on_shutdown.append(drain.let_go)
    watch = ServeWatchdog(hub.timeout, lambda: drain.draining)
    app.router.on_startup.append(watch.start)
    app.router.on_shutdown.insert(0, watch.stop)
    try:
        _serve(server, sock, lambda: drain.signals is not None)
    finally:
        sock.close()


def _serve(server: Any, sock: socket.socket, ours: Callable[[], bool]) -> None:
    """``server.serve()`` on an asyncio loop of its own, as ``uvicorn.Server.run`` runs it,
    except that the server outlives plugin code that ends the loop outside any call.

    asyncio lets ``SystemExit`` and ``KeyboardInterrupt`` raised in a task or a
    callback leave the loop (a plugin's upload task calling ``sys.exit``, a
    library raising ``KeyboardInterrupt`` in a timer), and ``loop.stop()`` ends
    it where it stands: each ended the server with every client's episode and a
    page of tracebacks. A call's are its episode's error already (``Session``).
    Once the server's own stop-signal handlers are in (``ours()``), no signal
    raises either, so one that leaves the loop is plugin code's: it is told (one
    line, at most one every few seconds) and the loop runs on, the task that
    raised it ended and the rest untouched. The loop is asyncio's own (uvicorn's
    ``loop="asyncio"``): the watchdog reads its frames.
    """
    from ..errors import raised_at, stop_text
    from ..runtime.runner import UnwaitedExecutor
    from .connections import Throttled

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.set_default_executor(UnwaitedExecutor(thread_name_prefix="serve-executor"))
    told = Throttled()
    try:
        main = loop.create_task(server.serve(sockets=[sock]))
        while True:
            try:
                loop.run_until_complete(main)
                return
            except (SystemExit, KeyboardInterrupt, RuntimeError) as exc:
                if main.done() or not ours():
                    raise
                if issubclass(type(exc), RuntimeError):  # no trace of who stopped it
                    what = "stopped the event loop (loop.stop())"
                else:
                    what = (
                        f"raised {stop_text(exc)} in a task or callback of its own, "
                        f"outside any call ({raised_at(exc)})"
                    )
                told.warning(
                    "plugin code %s; ignored: the server goes on. A plugin must not end "
                    "the process that serves it",
                    what,
                )
    finally:
        try:
            _cancel_the_rest(loop)
        finally:
            asyncio.set_event_loop(None)
            loop.close()


#: Seconds the tasks left at the end get to finish once cancelled (a plugin's that
#: catches the cancellation and goes on is left behind, named): more than a forced
#: shutdown's wait for the finalizes, which a cancelled lifespan still logs.
_TASKS_GRACE = FORCED_WAIT + 1.0


def _cancel_the_rest(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does on its way out, bounded: cancel the tasks left and give
    them :data:`_TASKS_GRACE` seconds, close the async generators. The default
    executor's jobs are not waited for (a plugin's blocking call in
    ``asyncio.to_thread`` would hold the exit for as long as it blocks, after a
    SIGTERM the server had answered); the command's exit names the threads left."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    steps: list[Any] = [asyncio.wait(left, timeout=_TASKS_GRACE)] if left else []
    for step in [*steps, loop.shutdown_asyncgens()]:
        try:
            loop.run_until_complete(step)
        except (Exception, SystemExit, KeyboardInterrupt):  # plugin code's, at the end: let go
            pass
    stuck = [task for task in left if not task.done()]
    if stuck:
        log.warning(
            "%d task(s) still running %g s after they were cancelled at shutdown (plugin "
            "code still awaiting in a finalize or cleanup, or catching the cancellation); "
            "the server exits without them",
            len(stuck),
            _TASKS_GRACE,
        )
