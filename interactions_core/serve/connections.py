"""HTTP connections below the application: deadlines, a cap within the open-file limit.

uvicorn closes a connection idle *between* requests (keep-alive), but not one
that opened and sent nothing, sends its request head a byte at a time, or never
finishes its body: each holds a file descriptor for as long as the client likes,
and at the process's open-file limit the server can accept nobody, ``/health``
included, while asyncio logs a traceback for every refused accept. This module
is what the server runs under its application to prevent that:

* :class:`ConnectionGate` gives every request a deadline (head and body), bounds
  request bodies, and caps the connections open at once, closing the one that
  has waited longest for its request when the cap is reached;
* :func:`gated_h11` is uvicorn's own h11 protocol (``--http h11``) reporting its
  connections to the gate; :class:`~interactions_core.serve.guard.Guard`, which
  sees every request reach the application, tells the gate when a request
  arrived whole;
* :func:`http_connection_cap` derives the cap from the open-file limit, and
  :func:`quiet_accept_errors` turns asyncio's flood of accept errors into a line
  every ``LOG_EVERY`` seconds (:class:`Throttled`);
* :func:`websocket_protocol` is the WebSocket protocol the server runs: it
  answers pings only as fast as the client reads, decompresses one message
  ahead of the application, not a whole read of them, and closes a connection
  whose message expands too far when decompressed;

Apart from :func:`websocket_protocol`, which says why it subclasses uvicorn's
WebSocket protocol, only public APIs are used: uvicorn's protocol class options,
asyncio transports (``abort``) and the loop's exception handler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = [
    "EXPANSION",
    "EXPANSION_FLOOR",
    "FD_RESERVE",
    "FEED_BYTES",
    "LOG_EVERY",
    "ConnectionGate",
    "Throttled",
    "gated_h11",
    "http_connection_cap",
    "max_body",
    "peer_key",
    "quiet_accept_errors",
    "quiet_bad_text",
    "websocket_protocol",
]

log = logging.getLogger("interactions_core.serve")

#: Seconds between two log lines about refused requests or closed connections: a
#: flood of them must not grow the log without bound.
LOG_EVERY = 5.0


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
        """``send`` that starts the wait for the next head once the response is sent.

        A part of the response that the client does not take within
        ``head_timeout`` seconds (it reads nothing, perhaps after pipelining
        thousands of requests) closes the connection: the response would
        otherwise be held in memory for as long as the client likes.
        """
        if peer is None:
            return send
        timeout = self.head_timeout

        async def send_then_wait(message: Any) -> None:
            transport = self.live.get(peer)
            unread = None
            if timeout is not None and transport is not None:
                loop = asyncio.get_running_loop()
                unread = loop.call_later(timeout, self._unread, peer, transport)
            try:
                await send(message)
            finally:
                if unread is not None:
                    unread.cancel()
            done = message["type"] == "http.response.body" and not message.get("more_body")
            if done and peer in self.live and peer not in self.waiting:
                self._await_head(peer)

        return send_then_wait

    def _unread(self, peer: tuple[str, int], transport: Any) -> None:
        current: Any = self.live.get(peer)
        if current is None or current is not transport:
            return  # that connection is gone already
        self.closed_slow += 1
        self.closed(peer)
        self._log.warning(
            "closed a connection that took no response for %g s (--header-timeout)",
            self.head_timeout,
        )
        current.abort()

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


# The WebSocket protocol the server runs: uvicorn's sans-I/O one, with two bounds.
#
# * **Pongs wait for a client that reads.** uvicorn answers every ping at once,
#   whether or not the client reads the pongs, and keeps reading: a client that
#   sends pings and reads nothing made the server hold every pong, about as many
#   bytes as it sent (195 MB in 12 s on one connection, until --idle-timeout). When
#   the transport's buffer is full (``pause_writing``) reading stops until it drains.
# * **Compressed messages are decompressed one ahead of the application.** uvicorn
#   parses every frame of a read (up to 256 KiB) before it pauses reading, and with
#   permessage-deflate each frame may decompress to ``ws_max_size``: a few
#   compressed frames of zeros (240 KB) cost the server 230 MB at once. Here what
#   was read is kept and parsed ``FEED_BYTES`` at a time, stopping as soon as a
#   message waits for the application (uvicorn has then paused reading: its own
#   backpressure); the rest is parsed when the application takes that message.
#
# uvicorn's public options cannot do either: ``ws_max_size`` bounds one message
# only, ``ws_max_queue`` is read only by the legacy ``websockets`` protocol, which
# uvicorn deprecates and will point at the sans-I/O one, and ``wsproto`` also parses
# a whole read and answers pings unread. So this is a subclass, relying on uvicorn
# 0.35+'s ``read_paused`` and ``writable`` and its ``data_received``, ``receive``,
# ``send``, ``handle_ping`` and ``resume_writing`` methods;
# ``tests/serve/test_server_ws_memory.py`` checks both bounds on the uvicorn the
# project pins.

#: How many times its size on the wire a message may grow when decompressed, once
#: past ``EXPANSION_FLOOR``: chat text and JSON compress about 3 to 10 times, while
#: compressed zeros grow about 1,000 times (15 KB on the wire held 16 MB).
EXPANSION = 32
#: Decompressed bytes of one message that are never refused for their expansion.
EXPANSION_FLOOR = 1 << 20

#: Bytes of a compressed WebSocket stream parsed at a time: deflate expands a byte to
#: at most about 1,032, so the messages beyond the first that one such piece holds
#: come to a few megabytes at most. Uncompressed streams are parsed a read at a time.
FEED_BYTES = 4096


class _BoundedReads:
    """The bounds above, mixed into uvicorn's sans-I/O protocol (its ``super()``).

    Besides, a message is refused (close 1009) once its decompressed frames pass
    ``EXPANSION_FLOOR`` bytes and ``EXPANSION`` times the bytes read since the
    previous message: uvicorn keeps every frame of a message until its last, so a
    client sending compressed fragments of zeros and never the last one made the
    server hold 16 MB per connection for 15 KB sent.
    """

    piece: int
    read_paused: bool
    transport: Any
    writable: asyncio.Event
    conn: Any
    close_sent: bool
    frames: list[bytes]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Bytes read from the client and not parsed yet.
        self.unparsed = bytearray()
        #: Reading stopped until the client takes what was written to it.
        self.pongs_held = False
        #: Bytes parsed since the last whole message, and its frames' decompressed bytes.
        self.wire = 0
        self.expanded = 0

    def data_received(self, data: bytes) -> None:
        if self.unparsed or self.read_paused or self.pongs_held or len(data) > self.piece:
            self.unparsed += data
            self._parse()
        else:  # the usual read: one piece, nothing held back
            self.wire += len(data)
            super().data_received(data)  # type: ignore[misc]

    def handle_text(self, event: Any) -> None:
        self.expanded = 0
        if self._within_expansion(event):
            super().handle_text(event)  # type: ignore[misc]

    def handle_bytes(self, event: Any) -> None:
        self.expanded = 0
        if self._within_expansion(event):
            super().handle_bytes(event)  # type: ignore[misc]

    def handle_cont(self, event: Any) -> None:
        if self._within_expansion(event):
            super().handle_cont(event)  # type: ignore[misc]

    def _within_expansion(self, event: Any) -> bool:
        """Whether a data frame may be kept; if not, the connection is closed (1009)."""
        if self.close_sent:
            return False  # closing: uvicorn discards such frames too
        self.expanded += len(event.data)
        if self.expanded <= max(EXPANSION_FLOOR, EXPANSION * self.wire):
            return True
        _expansions.warning(
            "closed a connection whose compressed message grew to %d bytes from %d read",
            self.expanded,
            self.wire,
        )
        self.frames = []
        self.unparsed.clear()
        self.conn.fail(
            1009, f"compressed message grew over {EXPANSION}x its size; send it uncompressed"
        )
        self.handle_parser_exception()  # type: ignore[attr-defined]
        return False

    def send_receive_event_to_app(self) -> None:
        self.wire = self.expanded = 0
        super().send_receive_event_to_app()  # type: ignore[misc]

    def _parse(self) -> None:
        """Parse what was read until a message waits for the application."""
        unparsed = self.unparsed
        while unparsed and not (self.read_paused or self.pongs_held):
            if self.transport.is_closing():
                unparsed.clear()
                return
            piece = bytes(unparsed[: self.piece])
            del unparsed[: self.piece]
            self.wire += len(piece)
            super().data_received(piece)  # type: ignore[misc]

    def handle_ping(self) -> None:
        super().handle_ping()  # type: ignore[misc]
        if not self.writable.is_set():  # the client reads none of what is written
            self.pongs_held = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()  # type: ignore[misc]
        if self.pongs_held:
            self.pongs_held = False
            if not self.read_paused:
                self.transport.resume_reading()
                self._parse()

    async def receive(self) -> Any:
        message = await super().receive()  # type: ignore[misc]  # resumes reading if none waits
        if self.pongs_held:
            self.transport.pause_reading()
        self._parse()
        return message

    async def send(self, message: Any) -> None:
        await super().send(message)  # type: ignore[misc]
        if self.unparsed and not self.read_paused:
            self._parse()  # after a close, the client's close frame may be waiting

    def connection_lost(self, exc: Exception | None) -> None:
        self.unparsed.clear()
        super().connection_lost(exc)  # type: ignore[misc]

    def shutdown(self) -> None:
        """Closing at shutdown; a client that reads nothing is cut off, not waited for.

        Its close frame could not reach it, and the application's own close would
        wait for the send buffer to drain until uvicorn's graceful timeout (30 s)
        cancelled it with a traceback.
        """
        super().shutdown()  # type: ignore[misc]
        if not self.writable.is_set():
            self.transport.abort()


_expansions = Throttled()


class _QuietBadText(logging.Filter):
    """uvicorn's traceback for a text frame that is not UTF-8, as a rate-limited line.

    uvicorn closes such a connection (1007) and logs the whole traceback each time:
    200 connections sending two bad bytes each added 120 KB to the log.
    """

    def __init__(self) -> None:
        super().__init__()
        self.throttled = Throttled()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != "Invalid UTF-8 sequence received from client.":
            return True
        self.throttled.warning(
            "closed a connection that sent a text message that is not UTF-8 (1007)"
        )
        return False


def quiet_bad_text() -> None:
    """Install :class:`_QuietBadText` on uvicorn's error log, once."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietBadText) for f in logger.filters):
        logger.addFilter(_QuietBadText())


def websocket_protocol(compress: bool) -> type | str:
    """uvicorn's ``websockets-sansio`` protocol, with the bounds described above."""
    quiet_bad_text()
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import (
            WebSocketsSansIOProtocol,
        )
    except ImportError as exc:  # uvicorn before 0.35: its legacy protocol drains pongs
        if not compress:
            return "auto"
        from ..errors import InteractionsError

        raise InteractionsError(
            "--ws-compression needs uvicorn 0.35 or later (pip install -U uvicorn); "
            "or serve without compression"
        ) from exc
    piece = FEED_BYTES if compress else 1 << 20
    return type("BoundedWebSocket", (_BoundedReads, WebSocketsSansIOProtocol), {"piece": piece})


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
