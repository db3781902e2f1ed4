"""The server's front door: which requests reach OpenEnv's routes at all.

A plain ASGI wrapper, in front of every route, because the checks concern the
connection rather than any one endpoint:

* **Host** (DNS rebinding): a server bound to a loopback address answers only
  requests whose ``Host`` names a loopback address, so a web page whose name was
  re-pointed at 127.0.0.1 cannot reach it.
* **Origin** (cross-site pages): a browser sends ``Origin`` with every
  WebSocket handshake and cross-site request. A request with no ``Origin``
  (every non-browser client) or from the server's own origin passes; any other
  origin is refused unless ``--allow-origin`` names it (``*`` allows all).
* **Connections**: WebSocket connections are counted and limited
  (``--max-connections``) apart from sessions, which are taken only by a reset
  that passed the token check, so idle or unauthenticated connections can
  never keep a token holder out of a session.
* **Idle connections**: a WebSocket that sends nothing for ``idle_timeout``
  seconds is treated as gone: OpenEnv closes its environment, which ends and
  finalizes its episode, and the slot is free again.

Refusals are answered with a status and one readable sentence (an HTTP 403/503
body, or a handshake refused with 403), never a traceback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from ..runtime.watchdog import BLOCKING_ADVICE, LoopWatchdog

__all__ = ["LOG_EVERY", "LOOPBACK_NAMES", "REPORT_AFTER", "Guard", "ServeWatchdog"]

log = logging.getLogger("interactions_core.serve")

#: Seconds between two log lines about refused requests: a flood of refusals (or of
#: connections) must not grow the log without bound.
LOG_EVERY = 5.0
#: Host names that mean "this machine" besides the loopback addresses.
LOOPBACK_NAMES = frozenset({"localhost"})


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _host_name(host_header: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` -> ``::1``)."""
    parsed = urlsplit("//" + host_header)
    return parsed.hostname or ""


class Guard:
    """ASGI middleware: Host and Origin checks, a WebSocket connection limit, idle timeouts."""

    def __init__(
        self,
        app: Any,
        *,
        bind_host: str = "127.0.0.1",
        allowed_origins: Iterable[str] = (),
        max_connections: int = 1024,
        idle_timeout: float | None = 300.0,
    ) -> None:
        self.app = app
        self.loopback_only = _is_loopback(bind_host)
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        #: WebSocket connections open right now.
        self.connections = 0
        self._logged_at = float("-inf")
        self._unlogged = 0

    # -- checks ---------------------------------------------------------------------

    def refusal(self, scope: Any) -> str | None:
        """Why ``scope`` is refused, or ``None`` when it may go on."""
        host = _header(scope, b"host") or ""
        if self.loopback_only and not _is_loopback(_host_name(host)):
            return (
                f"Host {host!r} is not this machine: a server listening on a loopback "
                "address answers only requests to 127.0.0.1, ::1 or localhost"
            )
        origin = _header(scope, b"origin")
        if origin is None or self._origin_allowed(origin, host):
            return None
        return (
            f"Origin {origin!r} is not allowed: web pages from other sites may not drive "
            "this server. Start it with --allow-origin ORIGIN to allow one"
        )

    def _origin_allowed(self, origin: str, host: str) -> bool:
        wanted = origin.rstrip("/").lower()
        if "*" in self.allowed_origins or wanted in self.allowed_origins:
            return True
        parsed = urlsplit(wanted)
        return parsed.scheme in ("http", "https") and parsed.netloc == host.lower()

    # -- ASGI -------------------------------------------------------------------------

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        problem = self.refusal(scope)
        if problem is None and kind == "websocket" and self.connections >= self.max_connections:
            problem = (
                f"too many connections: {self.connections} of {self.max_connections} are open "
                "(--max-connections); retry later"
            )
        if problem is not None:
            await self._refuse(kind, send, problem)
            return
        if kind == "http":
            await self.app(scope, receive, send)
            return
        self.connections += 1
        try:
            await self.app(scope, self._idle_limited(receive), send)
        finally:
            self.connections -= 1

    def _idle_limited(self, receive: Any) -> Any:
        timeout = self.idle_timeout
        if timeout is None:
            return receive

        # asyncio.timeout (Python 3.11+) arms a timer on the connection's own task;
        # wait_for would start a task for every message received.
        timer = getattr(asyncio, "timeout", None)

        async def receive_or_leave() -> Any:
            try:
                if timer is not None:
                    async with timer(timeout):
                        return await receive()
                return await asyncio.wait_for(receive(), timeout)
            except asyncio.TimeoutError:
                log.info("closing a WebSocket idle for %g s", timeout)
                return {"type": "websocket.disconnect", "code": 1001}

        return receive_or_leave

    def _log_refusal(self, kind: str, problem: str) -> None:
        """Log a refusal, at most once per ``LOG_EVERY`` seconds (with how many were not)."""
        now = time.monotonic()
        if now - self._logged_at < LOG_EVERY:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more refused since the last line)" if self._unlogged else ""
        self._logged_at, self._unlogged = now, 0
        what = "WebSocket" if kind == "websocket" else "HTTP"
        log.warning("refused a %s request: %s%s", what, problem, more)

    async def _refuse(self, kind: str, send: Any, problem: str) -> None:
        self._log_refusal(kind, problem)
        if kind == "websocket":
            # Closing before accepting makes the server answer the handshake with 403.
            await send({"type": "websocket.close", "code": 1008, "reason": problem[:120]})
            return
        status = 503 if problem.startswith("too many") else 403
        body = json.dumps({"detail": problem}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# The server's event-loop watchdog: the guarantees ``interactions run`` gives, for serve.
#
# Every served episode runs on the server's one event loop, so a plugin method
# that makes a synchronous call (``time.sleep``, a blocking client) holds up every
# other client and ``/health``. The server runs the same
# :class:`~interactions_core.runtime.watchdog.LoopWatchdog` as ``interactions run``:
#
# * a block longer than ``REPORT_AFTER`` seconds is logged, naming the plugin's
#   method (``module.Class.method``), at most once per block;
# * with ``--timeout S``, a block longer than ``S`` seconds is broken: the call
#   raises inside the plugin, its episode ends with a readable error (the client
#   gets it as the step's error) and its session is finalized; other clients
#   wait at most about ``S`` seconds;
# * once a stop signal arrived, a block is broken after ``REPORT_AFTER`` seconds,
#   so a second signal stops the server at once even while a plugin blocks.
#
# Without ``--timeout`` a blocking call is reported but left to finish. Code that
# never returns to Python (a C extension holding the GIL) cannot be broken.


#: Seconds the loop may be held before the block is logged (and, when stopping, broken).
REPORT_AFTER = 1.0


class ServeWatchdog:
    """Starts and stops a :class:`LoopWatchdog` with the server and logs what it finds."""

    def __init__(self, timeout: float | None, stopping: Callable[[], bool]) -> None:
        self.timeout = timeout
        self.stopping = stopping
        self.watchdog: LoopWatchdog | None = None
        self._logged: dict[str, int] = {}
        self._task: asyncio.Task[Any] | None = None

    async def start(self) -> None:
        """Lifespan start-up (on the loop, in the main thread, so it can break a block)."""
        loop = asyncio.get_running_loop()
        self.watchdog = LoopWatchdog(
            loop, limit=self.timeout, report_after=REPORT_AFTER, should_break=self.stopping
        ).start()
        self._task = loop.create_task(self._report_forever())

    async def stop(self) -> None:
        """Lifespan shutdown: report the last blocks and stop watching."""
        if self._task is not None:
            self._task.cancel()
        if self.watchdog is not None:
            self.report()
            self.watchdog.stop()

    def report(self) -> None:
        """Log each block not logged yet (the loop is free again when this runs)."""
        watchdog = self.watchdog
        if watchdog is None:
            return
        for name, (count, longest) in list(watchdog.blocks.items()):
            if self._logged.get(name, 0) >= count:
                continue
            self._logged[name] = count
            log.warning(
                "%s blocked the event loop for %.1f s (%d time(s) so far): %s",
                name,
                longest,
                count,
                BLOCKING_ADVICE,
            )

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(REPORT_AFTER / 2)
            self.report()
