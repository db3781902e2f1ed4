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
  never keep a token holder out of a session. At the limit, a new connection
  closes the oldest one that has not yet received an observation (no reset
  passed), so such connections cannot keep a token holder out of a connection
  either; only when every open one has played is the new one refused.
* **Idle connections**: a WebSocket that sends nothing for ``idle_timeout``
  seconds is treated as gone: OpenEnv closes its environment, which ends and
  finalizes its episode, and the slot is free again.

* **Half-sent requests** (:class:`ConnectionGate`, below the application): an
  HTTP connection must send a complete request (its head, then its body) within
  ``head_timeout`` seconds of opening (or of its previous response), or it is
  closed; a body over :func:`max_body` is refused (413) before it is read.
  Connections are capped so that they cannot use up the process's file
  descriptors; when the cap is reached the one that has waited longest for its
  request is closed to make room, so a client that sends its request at once
  still gets in.

Refusals are answered with a status and one readable sentence (an HTTP 403/503
body, or a handshake refused with 403), never a traceback; their log lines are
rate-limited (:class:`Throttled`), so a flood cannot grow the log without bound.
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

__all__ = [
    "FD_RESERVE",
    "LOG_EVERY",
    "LOOPBACK_NAMES",
    "REPORT_AFTER",
    "ConnectionGate",
    "Guard",
    "ServeWatchdog",
    "Throttled",
    "gated_h11",
    "http_connection_cap",
    "max_body",
    "peer_key",
    "quiet_accept_errors",
]

log = logging.getLogger("interactions_core.serve")

#: Seconds an evicted WebSocket has to notice before its transport is aborted.
EVICT_GRACE = 1.0
#: Seconds between two log lines about refused requests: a flood of refusals (or of
#: connections) must not grow the log without bound.
LOG_EVERY = 5.0
#: Host names that mean "this machine" besides the loopback addresses.
LOOPBACK_NAMES = frozenset({"localhost"})


class Throttled:
    """A warning logged at most once per ``LOG_EVERY`` seconds, with how many were not."""

    def __init__(self) -> None:
        self._logged_at = float("-inf")
        self._unlogged = 0

    def warning(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._logged_at < LOG_EVERY:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more since the last line)" if self._unlogged else ""
        self._logged_at, self._unlogged = now, 0
        log.warning(message + more, *args)


def peer_key(address: Any) -> tuple[str, int] | None:
    """``(host, port)`` of a TCP peer, as a transport and an ASGI scope both give it."""
    if not isinstance(address, (tuple, list)) or len(address) < 2:
        return None
    return str(address[0]), int(address[1])


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
        gate: ConnectionGate | None = None,
    ) -> None:
        self.app = app
        self.loopback_only = _is_loopback(bind_host)
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        #: The HTTP connections below the application, told when a request head arrived.
        self.gate = gate
        #: WebSocket connections open right now.
        self.connections = 0
        #: Those that have not received an observation (no reset passed the token check
        #: yet), oldest first: a new connection beyond the limit closes the oldest.
        self.unproven: dict[asyncio.Future[None], Any] = {}
        self.evicted = 0
        self._refusals = Throttled()

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
        gate, transport, problem, status = self.gate, None, self.refusal(scope), 403
        if gate is not None:
            peer = peer_key(scope.get("client"))
            if kind == "websocket":
                transport = gate.head_arrived(peer, upgraded=True)
            else:
                length = _header(scope, b"content-length")
                chunked = _header(scope, b"transfer-encoding") is not None
                gate.head_arrived(peer, body=chunked or length not in (None, "0"))
                too_big = gate.too_big(length)
                if problem is None and too_big:
                    problem, status = too_big, 413
                receive = gate.watch_body(peer, receive)
                send = gate.watch_response(peer, send)
        full = kind == "websocket" and self.connections >= self.max_connections
        if problem is None and full and not self._make_room():
            problem = (
                f"too many connections: {self.connections} of {self.max_connections} are "
                "open and every one has played an episode (--max-connections); retry later"
            )
        if problem is not None:
            await self._refuse(kind, send, problem, status)
            return
        if kind == "http":
            await self.app(scope, receive, send)
            return
        await _WebSocket(self, receive, send, transport).serve(scope)

    def _make_room(self) -> bool:
        """Close the oldest WebSocket that has not had an observation yet, if any.

        It is told through its ``receive``; one stuck in a ``send`` (a client that
        does not read) never asks, so ``EVICT_GRACE`` seconds later its transport
        is aborted if it is still open.
        """
        for evicted, transport in self.unproven.items():
            del self.unproven[evicted]
            evicted.set_result(None)
            if transport is not None:
                evicted.get_loop().call_later(EVICT_GRACE, _abort_unless_closing, transport)
            self.evicted += 1
            self._refusals.warning(
                "%d WebSocket connections are open (--max-connections): closed the oldest "
                "one that has not reset an episode",
                self.connections,
            )
            return True
        return False

    async def _refuse(self, kind: str, send: Any, problem: str, status: int = 403) -> None:
        what = "WebSocket" if kind == "websocket" else "HTTP"
        self._refusals.warning("refused a %s request: %s", what, problem)
        if kind == "websocket":
            # Closing before accepting makes the server answer the handshake with 403.
            await send({"type": "websocket.close", "code": 1008, "reason": problem[:120]})
            return
        status = 503 if problem.startswith("too many") else status
        body = json.dumps({"detail": problem}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if status == 413:  # the body is not read: the connection cannot serve another request
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _limited(receive: Any, timeout: float | None, gone: str) -> Any:
    """``receive`` that reports the client gone (``gone``) after ``timeout`` s of silence."""
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
            log.info("closing a connection that sent nothing for %g s", timeout)
            return {"type": gone, "code": 1001}

    return receive_or_leave


class _WebSocket:
    """One WebSocket behind the guard: evictable until its first observation, then watched.

    Before an observation (no reset has passed the token check) the connection can
    be closed to make room (:meth:`Guard._make_room`); after it, an
    :class:`_IdleWatch` closes it when the client sends nothing, or reads nothing,
    for ``idle_timeout`` seconds.
    """

    def __init__(self, guard: Guard, receive: Any, send: Any, transport: Any) -> None:
        self.guard = guard
        self.evicted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.limited = _limited(receive, guard.idle_timeout, "websocket.disconnect")
        self.inner_receive = receive
        self.inner_send = send
        self.transport = transport
        self.watch: _IdleWatch | None = None
        self.proven = False

    async def serve(self, scope: Any) -> None:
        guard = self.guard
        guard.unproven[self.evicted] = self.transport
        guard.connections += 1
        try:
            await guard.app(scope, self.receive, self.send)
        finally:
            guard.connections -= 1
            guard.unproven.pop(self.evicted, None)
            if self.watch is not None:
                self.watch.stop()

    async def receive(self) -> Any:
        if self.proven:
            if self.watch is not None:
                return await self.watch.receive_or_leave()
            return await self.limited()
        if not self.evicted.done():
            message = asyncio.ensure_future(self.limited())
            await asyncio.wait((message, self.evicted), return_when=asyncio.FIRST_COMPLETED)
            if message.done():
                return message.result()
            message.cancel()
        return {"type": "websocket.disconnect", "code": 1008}

    async def send(self, message: Any) -> None:
        if self.watch is not None:
            await self.watch.send(self.inner_send, message)
            return
        await self.inner_send(message)
        if not self.proven and message["type"] == "websocket.send":
            text = message.get("text") or ""
            if text.startswith('{"type":"observation"') and self.evicted in self.guard.unproven:
                del self.guard.unproven[self.evicted]
                self.proven = True
                self.watch = _IdleWatch.start(
                    self.inner_receive, self.guard.idle_timeout, self.transport
                )


def _abort_unless_closing(transport: Any) -> None:
    if not transport.is_closing():
        transport.abort()


class _IdleWatch:
    """A WebSocket's idle timeout with one timer per connection, not one per message.

    ``asyncio.timeout`` around each ``receive`` arms and cancels a timer for every
    message, a few microseconds each, on every step of every episode. Here each
    ``receive`` and ``send`` only notes when it started waiting; one timer checks
    the waits. A ``receive`` that has waited ``timeout`` seconds is cancelled
    inside, and reports the client gone (the way ``asyncio.timeout`` does it, with
    ``Task.uncancel``, Python 3.11+). A ``send`` that has waited that long (a
    client that reads nothing) aborts the connection's transport. A wait for a
    long step is neither, so it never counts.
    """

    def __init__(self, receive: Any, timeout: float, task: asyncio.Task[Any], transport: Any):
        self.inner = receive
        self.timeout = timeout
        self.task = task
        self.transport = transport
        self.loop = task.get_loop()
        self.since = self.loop.time()
        self.waiting = False
        self.sending: float | None = None
        self.fired = False
        self.handle = self.loop.call_at(self.since + timeout, self._check)

    @classmethod
    def start(cls, receive: Any, timeout: float | None, transport: Any) -> _IdleWatch | None:
        """Watch the current task's ``receive``; ``None`` where this way is unavailable."""
        task = asyncio.current_task()
        if timeout is None or task is None or not hasattr(task, "uncancel"):
            return None
        return cls(receive, timeout, task, transport)

    def stop(self) -> None:
        self.handle.cancel()

    def _check(self) -> None:
        now, timeout = self.loop.time(), self.timeout
        if self.sending is not None and now >= self.sending + timeout and self.transport:
            log.info("closing a connection that read nothing for %g s", timeout)
            self.transport.abort()
            return
        if self.waiting and now >= self.since + timeout:
            self.fired = True
            self.task.cancel()
            return
        start = self.since if self.waiting else self.sending if self.sending else now
        self.handle = self.loop.call_at(start + timeout, self._check)

    async def send(self, send: Any, message: Any) -> None:
        self.sending = self.loop.time()
        try:
            await send(message)
        finally:
            self.sending = None

    async def receive_or_leave(self) -> Any:
        self.since = self.loop.time()
        self.waiting = True
        try:
            return await self.inner()
        except asyncio.CancelledError:
            if self.fired and self.task.uncancel() == 0:  # type: ignore[attr-defined]
                self.fired = False
                log.info("closing a connection that sent nothing for %g s", self.timeout)
                return {"type": "websocket.disconnect", "code": 1001}
            raise
        finally:
            self.waiting = False


class ConnectionGate:
    """HTTP connections below the application: a deadline for each request head, and a cap.

    uvicorn closes a connection idle between two requests (keep-alive), but not one
    that sends its request head a byte at a time, nor one that opened and sent
    nothing: each holds a file descriptor for as long as the client likes, and at
    the process's limit the server can accept nobody, ``/health`` included, while
    asyncio logs a traceback for every refused accept. The gate is told of each
    connection by :func:`gated_h11` (the HTTP protocol the server runs) and of each
    head that arrived by :class:`Guard`, which sees every request:

    * a connection that has not sent a complete request (head, then body)
      ``head_timeout`` seconds after it opened (or after its previous response) is
      closed, and a body over ``max_body`` bytes ends its request;
    * at most ``max_open`` connections are open before their upgrade to a
      WebSocket (which :class:`Guard` limits apart); a connection beyond that
      closes the one that has waited longest for its request, or, when every open
      one is busy with a request it sent whole, is itself closed.
    """

    def __init__(
        self, head_timeout: float | None, max_open: int, max_body: int | None = None
    ) -> None:
        self.head_timeout = head_timeout
        self.max_open = max_open
        self.max_body = max_body
        #: Open HTTP connections (not upgraded) by peer, with their transports.
        self.live: dict[tuple[str, int], Any] = {}
        #: Those waiting for a request head, oldest first, with their deadline timers.
        self.waiting: dict[tuple[str, int], asyncio.TimerHandle | None] = {}
        #: Connections closed: past the head deadline, to make room, refused when full.
        self.closed_slow = 0
        self.closed_full = 0
        self.refused = 0
        self._log = Throttled()

    def opened(self, peer: tuple[str, int] | None, transport: Any) -> bool:
        """A connection was accepted; ``False`` when it must be closed at once."""
        if peer is None:
            return True
        if len(self.live) >= self.max_open and not self._close_oldest_waiting():
            self.refused += 1
            self._log.warning(
                "closed a new connection: %d HTTP connections are open and all are busy "
                "(the limit follows the open-file limit; raise it with ulimit -n)",
                len(self.live),
            )
            return False
        self.live[peer] = transport
        self._await_head(peer)
        return True

    def closed(self, peer: tuple[str, int] | None) -> None:
        if peer is not None:
            self.live.pop(peer, None)
            self._stop_waiting(peer)

    def head_arrived(
        self, peer: tuple[str, int] | None, *, upgraded: bool = False, body: bool = False
    ) -> Any:
        """A request head reached the application.

        A request with a ``body`` is still waited for until its body is complete
        (:meth:`watch_body`). An upgraded connection leaves the gate (the guard
        counts WebSockets apart), and its transport is returned.
        """
        if peer is None:
            return None
        if upgraded:
            self._stop_waiting(peer)
            return self.live.pop(peer, None)
        if not body:
            self._stop_waiting(peer)
        return None

    def too_big(self, length: str | None) -> str | None:
        """Why a declared ``Content-Length`` is refused, or ``None``."""
        if self.max_body is None or length is None:
            return None
        try:
            declared = int(length)
        except ValueError:
            return None  # the HTTP parser answers a malformed length itself
        if declared <= self.max_body:
            return None
        return (
            f"the request body is {declared:,} bytes, over this server's limit of "
            f"{self.max_body:,} (it follows --max-episode-chars)"
        )

    def watch_body(self, peer: tuple[str, int] | None, receive: Any) -> Any:
        """``receive`` that ends the wait once the body is complete and bounds its size.

        A body sent without a length (chunked) that grows past ``max_body`` ends
        the request: the application is told the client left and the connection
        is closed.
        """
        if peer is None:
            return receive
        received = 0

        async def receive_body() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] != "http.request":
                return message
            received += len(message.get("body", b""))
            if self.max_body is not None and received > self.max_body:
                transport = self.live.pop(peer, None)
                self._stop_waiting(peer)
                self._log.warning(
                    "closed a connection whose request body passed %d bytes", self.max_body
                )
                if transport is not None:
                    transport.abort()
                return {"type": "http.disconnect"}
            if not message.get("more_body"):
                self._stop_waiting(peer)
            return message

        return receive_body

    def watch_response(self, peer: tuple[str, int] | None, send: Any) -> Any:
        """``send`` that starts the wait for the next head once the response is sent."""
        if peer is None:
            return send

        async def send_then_wait(message: Any) -> None:
            await send(message)
            done = message["type"] == "http.response.body" and not message.get("more_body")
            if done and peer in self.live and peer not in self.waiting:
                self._await_head(peer)

        return send_then_wait

    def _await_head(self, peer: tuple[str, int]) -> None:
        timer = None
        if self.head_timeout is not None:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(self.head_timeout, self._too_slow, peer)
        self.waiting[peer] = timer

    def _stop_waiting(self, peer: tuple[str, int]) -> None:
        timer = self.waiting.pop(peer, None)
        if timer is not None:
            timer.cancel()

    def _too_slow(self, peer: tuple[str, int]) -> None:
        self.waiting.pop(peer, None)
        transport = self.live.pop(peer, None)
        if transport is not None:
            self.closed_slow += 1
            self._log.warning(
                "closed a connection that sent no complete request within %g s (--header-timeout)",
                self.head_timeout,
            )
            transport.abort()

    def _close_oldest_waiting(self) -> bool:
        for peer in self.waiting:
            self._stop_waiting(peer)
            transport = self.live.pop(peer, None)
            if transport is not None:
                self.closed_full += 1
                self._log.warning(
                    "%d HTTP connections are open, the most the open-file limit allows: "
                    "closed the one that waited longest for its request",
                    self.max_open,
                )
                transport.abort()
                return True
        return False


#: File descriptors left for everything but connections: the listening socket, the
#: log, the plugins' own files and sockets.
FD_RESERVE = 64
#: The open-file limit the server asks for when the hard limit allows more.
FD_WANTED = 1 << 20


def http_connection_cap(websockets: int) -> int:
    """How many HTTP connections may be open: what the open-file limit leaves.

    The soft limit is first raised to the hard one (as far as ``FD_WANTED``), which
    any process may do; ``websockets`` (``--max-connections``) and ``FD_RESERVE``
    are kept out of it, so connections waiting for their head cannot take the
    descriptors the sessions need.
    """
    try:
        import resource
    except ImportError:  # not a Unix: no limit to read
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = FD_WANTED if hard == resource.RLIM_INFINITY else min(hard, FD_WANTED)
    if soft == resource.RLIM_INFINITY:
        soft = ceiling
    elif soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (ValueError, OSError):
            pass
    return max(16, soft - websockets - FD_RESERVE)


def max_body(max_episode_chars: int) -> int:
    """The largest HTTP request body the server reads, in bytes.

    A reset brings at most a whole episode's characters; JSON may write each as
    a six-byte ``\\uXXXX`` escape, and the rest of the request is small.
    """
    return 8 * max_episode_chars + (1 << 16)


def gated_h11(gate: ConnectionGate) -> type:
    """uvicorn's h11 HTTP protocol (``--http h11``), reporting its connections to ``gate``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GatedH11Protocol(H11Protocol):  # type: ignore[misc]
        peer: tuple[str, int] | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.peer = peer_key(transport.get_extra_info("peername"))
            if not gate.opened(self.peer, transport):
                self.peer = None
                transport.abort()

        def connection_lost(self, exc: Exception | None) -> None:
            gate.closed(self.peer)
            super().connection_lost(exc)

    return GatedH11Protocol


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log asyncio's "out of system resource" accept errors at most once per ``LOG_EVERY``.

    When file descriptors run out (other open files, a low ``ulimit -n``) asyncio
    reports every failed accept with a traceback, thousands a second; one line
    says the same. Every other error goes to the loop's default handler.
    """
    throttled = Throttled()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if message.startswith("socket.accept() out of system resource"):
            throttled.warning(
                "cannot accept connections: %s (raise the open-file limit, ulimit -n)",
                context.get("exception"),
            )
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


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
