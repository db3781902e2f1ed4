"""Connections below the application: deadlines, caps, and what a client's frames cost.

uvicorn closes a connection idle between requests, but not one that sends
nothing, or its request a byte at a time: each holds a file descriptor, and at
the open-file limit nobody is accepted, ``/health`` included. So:

* :class:`ConnectionGate` gives every request a deadline (head and body), bounds
  request bodies, and caps the connections open at once; :func:`gated_h11` is
  uvicorn's h11 protocol reporting to it, and the
  :class:`~interactions_core.serve.guard.Guard` tells it when a request arrived;
* :func:`http_connection_cap` derives the cap from the open-file limit, and
  :func:`quiet_accept_errors` turns asyncio's flood of accept errors into a line
  every ``LOG_EVERY`` seconds (:class:`Throttled`);
* :func:`websocket_protocol` is the WebSocket protocol the server runs: it parses
  a bounded piece per turn of the loop, answers pings only as fast as the client
  reads, rations frames that carry no message, and closes a connection whose
  message expands too far when decompressed.

Apart from :func:`websocket_protocol`, which says why it subclasses uvicorn's,
only public APIs are used: uvicorn's protocol options, asyncio transports and
the loop's exception handler.
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
    "FEED_FRAMES",
    "FRAME_ALLOWANCE",
    "LOG_EVERY",
    "ConnectionGate",
    "Throttled",
    "gated_h11",
    "http_connection_cap",
    "max_body",
    "peer_key",
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
    """HTTP connections below the application: a deadline for each request, and a cap.

    Told of each connection by :func:`gated_h11` and of each request head by the
    ``Guard``, which sees every request (see the module docstring for why):

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


# The WebSocket protocol the server runs: uvicorn's sans-I/O one, with bounds on
# what a client's frames cost that uvicorn's options do not give (``ws_max_size``
# bounds one message; ``ws_max_queue`` serves only its deprecated legacy protocol;
# ``wsproto`` also parses whole reads and answers pings unread):
#
# * **Pongs wait for a client that reads**: pings sent with nothing read made the
#   server hold 195 MB of pongs in 12 s. When the write buffer is full reading stops.
# * **A read is parsed ``FEED_BYTES`` per turn of the loop** (fewer when its frames
#   are small: ``FEED_FRAMES``), stopping while a
#   message waits for the application (uvicorn's own backpressure). uvicorn parses
#   a whole read (256 KiB) at once: a few compressed frames of zeros cost 230 MB,
#   and a read of empty pongs (43,000 frames) held the loop 0.35 s, every read.
# * **Frames that carry (nearly) nothing are rationed** (``FRAME_ALLOWANCE``):
#   pings, pongs, fragments that are mostly framing; a flood is closed (1008).
# * **A compressed message may not expand past** ``EXPANSION_FLOOR`` and
#   ``EXPANSION`` times its bytes read (1009): uvicorn keeps every fragment until
#   the last, and compressed zeros never finished held 16 MB per 15 KB sent.
#
# It relies on uvicorn 0.35+'s ``read_paused``, ``writable``, ``loop``,
# ``data_received``, ``receive``, ``send``, ``handle_*`` and ``resume_writing``;
# ``tests/serve/test_server_ws_memory.py`` and ``test_server_ws_frames.py`` check
# them on the uvicorn the project pins.

#: How many times its size on the wire a message may grow when decompressed, once
#: past ``EXPANSION_FLOOR``: chat text and JSON compress about 3 to 10 times, while
#: compressed zeros grow about 1,000 times (15 KB on the wire held 16 MB).
EXPANSION = 32
#: Decompressed bytes of one message that are never refused for their expansion.
EXPANSION_FLOOR = 1 << 20

#: Bytes of a WebSocket stream parsed per turn of the loop: deflate expands a byte
#: to at most about 1,032, and 4 KiB of the smallest frames is about 680 of them.
FEED_BYTES = 4096
#: Frames parsed per turn that make the next piece smaller, in proportion: a frame
#: costs about the same however small, and compressed ones are small (22 bytes for
#: 128 of text), so 4 KiB of them cost several times what 4 KiB of plain text does.
FEED_FRAMES = 32
#: Frames that complete no message a connection may send in a burst: a ping, a
#: pong, a fragment; one more is allowed each second and for each 64 bytes a frame
#: carries, and a message the application takes restores the whole allowance.
FRAME_ALLOWANCE = 64


class _BoundedReads:
    """The bounds above, mixed into uvicorn's sans-I/O protocol (its ``super()``)."""

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
        self.wire = self.expanded = 0
        #: The next piece's parse, when one is scheduled on the loop.
        self.parse_next: Any = None
        #: Frames that complete no message still allowed, as of ``allowance_at``.
        self.allowance, self.allowance_at = float(FRAME_ALLOWANCE), time.monotonic()
        #: Bytes parsed per turn (``FEED_BYTES``, less after a piece of many frames).
        self.feed = FEED_BYTES
        self.piece_frames = 0

    def data_received(self, data: bytes) -> None:
        if self.unparsed or self.read_paused or self.pongs_held or len(data) > self.feed:
            self.unparsed += data
            self._parse()
        else:  # the usual read: one piece, nothing held back
            self._feed(data)

    def _feed(self, piece: bytes) -> None:
        """Parse ``piece``; size the next one so that it holds about ``FEED_FRAMES`` frames."""
        self.wire += len(piece)
        self.piece_frames = 0
        super().data_received(piece)  # type: ignore[misc]
        frames = self.piece_frames
        if frames > FEED_FRAMES:
            self.feed = max(64, len(piece) * FEED_FRAMES // frames)
        elif self.feed < FEED_BYTES and frames * 2 <= FEED_FRAMES:  # larger frames again
            self.feed = min(FEED_BYTES, self.feed * 2)

    def handle_text(self, event: Any) -> None:
        self.expanded = 0
        if self._keep(event):
            super().handle_text(event)  # type: ignore[misc]

    def handle_bytes(self, event: Any) -> None:
        self.expanded = 0
        if self._keep(event):
            super().handle_bytes(event)  # type: ignore[misc]

    def handle_cont(self, event: Any) -> None:
        if self._keep(event):
            super().handle_cont(event)  # type: ignore[misc]

    def handle_pong(self, event: Any) -> None:
        self.piece_frames += 1
        if self._spend(len(event.data)):
            super().handle_pong(event)  # type: ignore[misc]

    def _spend(self, carried: int) -> bool:
        """Use up one frame of ``FRAME_ALLOWANCE`` (earning one per 64 bytes ``carried``); past
        it the connection is closed (1008) and ``False`` returned, as once closing."""
        if self.close_sent:
            return False
        now = time.monotonic()
        earned = (now - self.allowance_at) + carried / 64 - 1
        self.allowance = min(float(FRAME_ALLOWANCE), self.allowance + earned)
        self.allowance_at = now
        if self.allowance >= 0:
            return True
        _floods.warning("closed a connection that sent a flood of nearly empty frames")
        self._fail(1008, "too many frames that carry little or nothing (pings, pongs, fragments)")
        return False

    def _fail(self, code: int, reason: str) -> None:
        """Close the connection at once, dropping what it sent and did not finish."""
        self.frames = []
        self.unparsed.clear()
        self.conn.fail(code, reason)
        self.handle_parser_exception()  # type: ignore[attr-defined]

    def _keep(self, event: Any) -> bool:
        """Whether a data frame may be kept: within the expansion bound (else close 1009)
        and, unless it ends a message, within the allowance (:meth:`_spend`)."""
        self.piece_frames += 1
        if self.close_sent:
            return False  # closing: uvicorn discards such frames too
        self.expanded += len(event.data)
        if self.expanded <= max(EXPANSION_FLOOR, EXPANSION * self.wire):
            return bool(event.fin) or self._spend(len(event.data))
        text = "closed a connection whose compressed message grew to %d bytes from %d read"
        _expansions.warning(text, self.expanded, self.wire)
        reason = f"compressed message grew over {EXPANSION}x its size; send it uncompressed"
        self._fail(1009, reason)
        return False

    def send_receive_event_to_app(self) -> None:
        self.wire = self.expanded = 0
        self.allowance = float(FRAME_ALLOWANCE)
        super().send_receive_event_to_app()  # type: ignore[misc]

    def _parse(self) -> None:
        """Parse one piece of what was read; the next on a later turn of the loop, so
        that other connections are served in between. Reading waits meanwhile."""
        unparsed = self.unparsed
        if self.parse_next is None and unparsed and not (self.read_paused or self.pongs_held):
            if self.transport.is_closing():
                unparsed.clear()
                return
            piece = bytes(unparsed[: self.feed])
            del unparsed[: self.feed]
            self._feed(piece)
            if unparsed and not (self.read_paused or self.pongs_held):
                self.parse_next = self.loop.call_soon(self._parse_next)  # type: ignore[attr-defined]
        if unparsed and not self.transport.is_closing():
            self.transport.pause_reading()

    def _parse_next(self) -> None:
        self.parse_next = None
        self._parse()
        if not (self.unparsed or self.read_paused or self.pongs_held):
            self.transport.resume_reading()

    def handle_ping(self) -> None:
        self.piece_frames += 1
        if self._spend(0):
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
        if self.close_sent and message.get("type") == "websocket.send":
            # Closed here (a flood, a message grown too large) while the application
            # was still answering: told as a client gone, as it is. uvicorn raised
            # "Unexpected ASGI message" instead, and every such connection left three
            # chained tracebacks in the log.
            from uvicorn.protocols.utils import ClientDisconnected

            raise ClientDisconnected
        await super().send(message)  # type: ignore[misc]
        if self.unparsed and not self.read_paused:
            self._parse()  # after a close, the client's close frame may be waiting

    def connection_lost(self, exc: Exception | None) -> None:
        self.unparsed.clear()
        if self.parse_next is not None:
            self.parse_next.cancel()
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
_floods = Throttled()


#: What uvicorn logs for each refusal a client can repeat at will, and the line it
#: becomes here, at most once per ``LOG_EVERY`` seconds.
_NOISY = {
    "Invalid UTF-8 sequence received from client.": (
        "closed a connection that sent a text message that is not UTF-8 (1007)"
    ),
    "Invalid HTTP request received.": (
        "refused a request that is not valid HTTP/1.1 (400): a bad Content-Length, say"
    ),
}


class _QuietBadText(logging.Filter):
    """uvicorn's lines about refusals a client repeats at will, rate-limited.

    uvicorn closes a connection that sends a text frame that is not UTF-8 (1007)
    and logs the whole traceback each time: 200 connections sending two bad bytes
    each added 120 KB to the log. It answers a request that is not valid HTTP (a
    negative ``Content-Length``) with 400 and a line: 2,000 such requests in half a
    second added 2,000 lines.
    """

    throttled = {message: Throttled() for message in _NOISY}  # one filter is installed

    def filter(self, record: logging.LogRecord) -> bool:
        told = _NOISY.get(record.msg) if isinstance(record.msg, str) else None
        if told is None:
            return True
        self.throttled[record.msg].warning(told)
        return False


def quiet_bad_text() -> None:
    """Install :class:`_QuietBadText` on uvicorn's error log, once."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietBadText) for f in logger.filters):
        logger.addFilter(_QuietBadText())


def websocket_protocol() -> type:
    """uvicorn's ``websockets-sansio`` protocol, with the bounds described above."""
    quiet_bad_text()
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import (
            WebSocketsSansIOProtocol,
        )
    except ImportError as exc:  # before 0.35: none of the bounds would hold
        from ..errors import InteractionsError

        raise InteractionsError(
            "interactions serve needs uvicorn 0.35 or later: pip install -U uvicorn"
        ) from exc
    return type("BoundedWebSocket", (_BoundedReads, WebSocketsSansIOProtocol), {})
