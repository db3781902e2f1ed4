"""The server's front door: which requests reach OpenEnv's routes at all.

A plain ASGI wrapper, in front of every route, because the checks concern the
connection rather than any one endpoint:

* **Host** (DNS rebinding): a ``Host`` must be a host name or address with an
  optional port, nothing else; a server bound to a loopback address answers only
  requests whose ``Host`` names a loopback address, so a web page whose name was
  re-pointed at 127.0.0.1 cannot reach it.
* **Origin** (cross-site pages): a browser sends ``Origin`` with every
  WebSocket handshake and cross-site request. A request with no ``Origin``
  (every non-browser client) passes, and so does the server's own origin when
  it cannot have been re-pointed (a loopback bind, or an address rather than a
  name); any other origin is refused unless ``--allow-origin`` names it.
* **Connections**: WebSockets are limited (``--max-connections``) apart from
  sessions, taken only by a reset that passed the token check, so unauthenticated
  connections never keep a token holder out. At the limit, a new connection closes
  the oldest one no reset of which has taken a session (passed the token check and
  found room: :data:`PASSED_TOKEN`); only when every open one has is the new one refused.
* **Idle connections**: a WebSocket whose client sends or reads nothing for
  ``idle_timeout`` seconds is gone: its episode is finalized, its slot free.
* **What a message costs to parse**: a WebSocket message or HTTP body holding
  more JSON values than ``max_values`` (:func:`max_json_values`) or a number of
  over ``MAX_NUMBER_DIGITS`` digits is refused unparsed (1009, or HTTP 413).
* **HTTP requests**: heads and bodies are reported to the gate below (``ConnectionGate``).

Refusals get a status and one readable sentence, never a traceback; their log is rate-limited.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .._files import MAX_NESTING
from .connections import ConnectionGate, Throttled, peer_key

__all__ = [
    "EVICT_GRACE",
    "LOOPBACK_NAMES",
    "MAX_NUMBER_DIGITS",
    "MIN_JSON_VALUES",
    "PASSED_TOKEN",
    "Guard",
    "has_long_number",
    "json_values",
    "max_json_values",
    "quiet_accept_errors",
]

log = logging.getLogger("interactions_core.serve")

#: Seconds an evicted WebSocket has to notice before its transport is aborted.
EVICT_GRACE = 1.0
#: Host names that mean "this machine" besides the loopback addresses.
LOOPBACK_NAMES = frozenset({"localhost"})
#: What a ``Host`` header may be: a name or an address, in brackets for IPv6, and a port.
_HOST_SYNTAX = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*)(:[0-9]{0,5})?")


# What parsing one message may cost, decided before it is parsed.
#
# OpenEnv parses every message (``json.loads``) on the event loop before any check of
# ours: 5,000,000 empty lists (14 KiB compressed) held the loop 2.9 s and 380 MB. The
# cost is the number of values outside strings (an empty list, about 1 us and 70 bytes),
# so that is bounded: the brackets and commas outside strings, counted at C speed.

#: The fewest JSON values a message may hold, whatever ``--max-episode-chars``.
MIN_JSON_VALUES = 16_384
#: One JSON value a message may hold per this many characters of ``--max-episode-chars``.
CHARS_PER_JSON_VALUE = 32

# Strings are taken out at C speed: escaped backslashes, then escaped quotes, deleted, a
# string is a quote, no quote, a quote (or the end); patterns that handled escapes were
# quadratic (a run of \", 100 KB: 9 s) or kept state per escape (+230 MB).
_STRING = re.compile(r'"[^"]*"?')
_STRING_BYTES = re.compile(rb'"[^"]*"?')
#: The most digits (a decimal point counted as one) a JSON number may have: a float
#: needs 17, and longer ones cost the reader time (60,000 floats of 200 digits: 1 s; an
#: integer of 4,299 digits, quadratic). Runs are found at C speed, digits and points
#: made 1 and other bytes 0 (a regular expression took 0.5 to 3 s).
MAX_NUMBER_DIGITS = 40
_DIGITS_TO_ONES = bytes(49 if 48 <= byte <= 57 or byte == 46 else 48 for byte in range(256))
_LONG_RUN = b"1" * (MAX_NUMBER_DIGITS + 1)


def _strings_out(text: str | bytes, most: int = 0) -> tuple[str | bytes, int]:
    """``text`` without its strings, and how many there were (at most ``most``; 0: all)."""
    if isinstance(text, str):
        plain = text.replace("\\\\", "").replace('\\"', "")
        return _STRING.subn("", plain, count=most)
    plain_bytes = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    return _STRING_BYTES.subn(b"", plain_bytes, count=most)


def max_json_values(max_episode_chars: int) -> int:
    """The most JSON values (``[``, ``{`` and ``,`` outside strings) one message may hold.

    A reset within ``max_episode_chars`` holds far fewer (a chat message is a few values
    whatever its text, and at most one per 256 characters). At the default it is
    62,500: that many empty lists hold the event loop about 0.1 s.
    """
    return max(MIN_JSON_VALUES, max_episode_chars // CHARS_PER_JSON_VALUE)


def _structure(text: str | bytes) -> int:
    if isinstance(text, str):
        return text.count("[") + text.count("{") + text.count(",")
    return text.count(b"[") + text.count(b"{") + text.count(b",")


def json_values(text: str | bytes, limit: int) -> int:
    """How many JSON values ``text`` holds, as far as it matters against ``limit``.

    Brackets and commas are counted in the whole text first; only past ``limit`` are
    strings taken out. Over ``2 * limit`` strings is over the limit without more work.
    """
    count = _structure(text)
    if count <= limit:
        return count
    most = 2 * limit + 2
    outside, strings = _strings_out(text, most)
    if strings >= most:
        return max(strings, limit + 1)
    return _structure(outside)


def has_long_number(text: str | bytes) -> bool:
    """Whether ``text`` holds a number of over ``MAX_NUMBER_DIGITS`` digits outside strings
    (searched in the whole text first: strings are taken out only if one is found)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _LONG_RUN not in data.translate(_DIGITS_TO_ONES):
        return False
    outside = _strings_out(data)[0]
    return isinstance(outside, bytes) and _LONG_RUN in outside.translate(_DIGITS_TO_ONES)


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    return name in LOOPBACK_NAMES or (_is_address(name) and ipaddress.ip_address(name).is_loopback)


def _is_address(name: str) -> bool:
    try:
        return ipaddress.ip_address(name.strip("[]")) is not None
    except ValueError:
        return False


def _headers(scope: Any, name: bytes) -> list[str]:
    return [bytes(v).decode("latin-1") for k, v in scope.get("headers") or () if k.lower() == name]


def _header(scope: Any, name: bytes) -> str | None:
    return next(iter(_headers(scope, name)), None)


def _host_name(host_header: str) -> str | None:
    """The name part of a ``Host`` header (``[::1]:8000`` -> ``::1``), ``None`` if malformed."""
    try:  # brackets around what is not an IPv6 address raise (Python 3.11.4 on)
        return urlsplit("//" + host_header).hostname or ""
    except ValueError:
        return None


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
        max_values: int | None = None,
    ) -> None:
        self.app = app
        #: The most JSON values a message or request body may hold (None: unbounded).
        self.max_values = max_values
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
        #: The aborts of evicted connections still to come (a token holder's is cancelled).
        self.aborts: dict[asyncio.Future[None], asyncio.TimerHandle] = {}
        self.evicted = 0
        self._refusals = Throttled()

    # -- checks ---------------------------------------------------------------------

    def refusal(self, scope: Any) -> str | None:
        """Why ``scope`` is refused, or ``None`` when it may go on."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if scope["type"] == "websocket" and "session_id" in query:  # decoded, as OpenEnv reads
            # OpenEnv lets a second WebSocket join a session by its id; the episode a
            # joined one starts is never ended (only the owner's close ends one), so
            # joining held session slots for ever. Each WebSocket plays its own.
            return "joining another connection's session (?session_id=) is not offered"
        host = _header(scope, b"host") or ""
        name = _host_name(host) if _HOST_SYNTAX.fullmatch(host) else None
        if name is None:
            return f"Host {host[:100]!r} is not a host name or address with an optional port"
        if self.loopback_only and not _is_loopback(name):
            return (
                f"Host {host!r} is not this machine: a server listening on a loopback "
                "address answers only requests to 127.0.0.1, ::1 or localhost"
            )
        found = _headers(scope, b"origin")
        origin = ", ".join(found)  # a browser sends one; two are judged as one odd value
        if not found or self._origin_allowed(origin, host):
            return None
        return (
            f"Origin {origin!r} is not allowed: web pages from other sites may not drive "
            "this server. Start it with --allow-origin ORIGIN to allow one"
        )

    def _origin_allowed(self, origin: str, host: str) -> bool:
        wanted = origin.rstrip("/").lower()
        if "*" in self.allowed_origins or wanted in self.allowed_origins:
            return True
        try:
            parsed = urlsplit(wanted)
        except ValueError:  # brackets around what is not an IPv6 address
            return False
        if parsed.scheme not in ("http", "https") or parsed.netloc != host.lower():
            return False
        # The server's own origin; but a name may have been re-pointed here, an address not.
        return self.loopback_only or _is_address(_host_name(host) or "")

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
            if self.max_values is not None:  # every body, however framed (both headers, say)
                receive, problem = await self._checked_body(receive)
                if problem is not None:
                    await self._refuse(kind, send, problem, 413)
                    return
            await self.app(scope, receive, send)
            return
        await _WebSocket(self, receive, send, transport).serve(scope)

    def too_many_values(self, text: str | bytes) -> str | None:
        """Why a message or body costs too much to parse (the WebSocket close reason and
        the HTTP 413's detail), or ``None``."""
        limit = self.max_values
        if limit is None:
            return None
        if json_values(text, limit) > limit:
            return f"message holds over {limit:,} JSON values; send fewer (--max-episode-chars)"
        if has_long_number(text):
            return f"message holds a number of over {MAX_NUMBER_DIGITS} digits; send it as text"
        # JSON holds no raw NUL; UTF-16 and UTF-32 do, and hide digit runs from the check.
        nul = "\0" in text if isinstance(text, str) else b"\0" in text
        return "message is not UTF-8 JSON (it holds a NUL byte)" if nul else None

    async def _checked_body(self, receive: Any) -> tuple[Any, str | None]:
        """Read a request's whole body, check it, and give ``receive`` that replays it.

        The body is bounded already (the gate's ``max_body``); reading it here
        costs what the application's own reading would.
        """
        parts, last = [], None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                last = message
                break
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(parts)
        problem = None if last is not None else self.too_many_values(body)
        replay: list[Any] = [last or {"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> Any:
            return replay.pop() if replay else await receive()

        return replayed, problem

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
                later = evicted.get_loop().call_later
                self.aborts[evicted] = later(EVICT_GRACE, _abort_unless_closing, transport)
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
            return {"type": gone, "code": 1001, CLOSING: (1001, _idle_reason(timeout))}

    return receive_or_leave


#: The key of a ``websocket.disconnect`` the guard makes itself (an idle or evicted
#: connection): the close frame the application then sends says why, not OpenEnv's
#: plain 1000, so a client can tell its episode was ended.
CLOSING = "interactions_closing"


def _idle_reason(timeout: float) -> str:
    return f"idle for {timeout:g} s: any episode on this connection is over; reconnect and reset"


#: While a WebSocket's application runs: what makes it no longer evictable, called when
#: a reset on it has passed the token check and taken a session (its ``start_interaction``
#: may then take long); a reset refused takes nothing, and leaves it evictable.
PASSED_TOKEN: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "interactions_passed_token", default=None
)


class _WebSocket:
    """One WebSocket behind the guard: evictable until a reset takes a session, and
    watched for idleness (:class:`_IdleWatch`) from its first observation on."""

    def __init__(self, guard: Guard, receive: Any, send: Any, transport: Any) -> None:
        self.guard = guard
        self.evicted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.limited = _limited(receive, guard.idle_timeout, "websocket.disconnect")
        self.inner_receive = receive
        self.inner_send = send
        self.transport = transport
        self.watch: _IdleWatch | None = None
        self.proven = False
        #: ``(code, reason)`` of a close the guard decided (see :data:`CLOSING`).
        self.closing: tuple[int, str] | None = None

    async def serve(self, scope: Any) -> None:
        guard = self.guard
        guard.unproven[self.evicted] = self.transport
        guard.connections += 1
        passed = PASSED_TOKEN.set(self._token_passed)
        try:
            await guard.app(scope, self.receive, self.send)
        finally:
            PASSED_TOKEN.reset(passed)
            guard.connections -= 1
            guard.unproven.pop(self.evicted, None)
            guard.aborts.pop(self.evicted, None)
            if self.watch is not None:  # its timer would keep the connection alive for ever
                self.watch.stop()

    def _token_passed(self) -> None:
        """A reset passed the token check: never evicted now, and if a flood evicted it in
        the same moment (its reset read first), that is undone before its abort comes."""
        guard = self.guard
        guard.unproven.pop(self.evicted, None)
        abort = guard.aborts.pop(self.evicted, None)
        if abort is not None:
            abort.cancel()
            guard.evicted -= 1
            self.evicted = asyncio.get_running_loop().create_future()

    async def receive(self) -> Any:
        """The next message; one too costly to parse closes the connection (1009), and so
        does one of OpenEnv's ``mcp`` type (1008, see :data:`MCP_REFUSED`). One that is not
        a JSON object, or nests too deep for the JSON reader, is answered with an error
        and the next one read: OpenEnv's own handler closed the connection for either."""
        while True:
            message = await self._checked()
            if message is not None:
                return message

    async def _checked(self) -> Any:
        """The next message, or ``None`` when it was answered with an error here."""
        message = await self._receive()
        if message["type"] != "websocket.receive":
            if CLOSING in message:  # kept here; the application gets a plain ASGI message
                message = dict(message)
                self.closing = message.pop(CLOSING)
            return message
        text = message.get("text")
        if text is None:  # a binary frame: OpenEnv reads text only ("'text'", then closed)
            try:
                text = bytes(message.get("bytes") or b"").decode("utf-8")
            except UnicodeDecodeError:
                reason = "a binary frame that is not UTF-8 text: send JSON as a text frame"
                await self.inner_send({"type": "websocket.close", "code": 1007, "reason": reason})
                return {"type": "websocket.disconnect", "code": 1007}
            message = {"type": "websocket.receive", "text": text}
        problem = None
        if self.guard.max_values is not None:
            problem = self.guard.too_many_values(
                text if text is not None else message.get("bytes", b"")
            )
        if problem is None and text is not None and _is_mcp(text):
            problem = MCP_REFUSED
        if problem is None:
            wrong = _not_an_object(text) if text is not None else None
            if wrong is None:
                return message
            told = "VALIDATION_ERROR" if wrong.startswith(_SHAPE) else "INVALID_JSON"
            error = {"type": "error", "data": {"message": wrong, "code": told}}
            await self.send({"type": "websocket.send", "text": json.dumps(error)})
            return None
        self.guard._refusals.warning("closed a WebSocket: %s", problem)
        code = 1008 if problem is MCP_REFUSED else 1009  # a policy, or a message too big
        await self.inner_send({"type": "websocket.close", "code": code, "reason": problem})
        return {"type": "websocket.disconnect", "code": code}

    async def _receive(self) -> Any:
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
        return {"type": "websocket.disconnect", "code": 1008, CLOSING: (1013, EVICTED)}

    async def send(self, message: Any) -> None:
        if message["type"] == "websocket.close" and self.closing is not None:
            code, reason = self.closing  # the guard ended it: say why (see CLOSING)
            message = {**message, "code": code, "reason": reason}
        if self.watch is not None:
            await self.watch.send(self.inner_send, message)
            return
        await self.inner_send(message)
        if not self.proven and message["type"] == "websocket.send":
            text = message.get("text") or ""
            if text.startswith('{"type":"observation"'):
                self.guard.unproven.pop(self.evicted, None)
                self.proven = True
                self.watch = _IdleWatch.start(
                    self.inner_receive, self.guard.idle_timeout, self.transport
                )


#: Why an evicted WebSocket is closed (1013, try again later).
EVICTED = (
    "closed to make room for a client that resets: this connection had not reset in "
    "time; connect again and reset at once"
)


#: Why a WebSocket that sent an ``mcp`` message is closed. OpenEnv answers them over
#: ``/ws`` (its ``/mcp`` routes are not mounted): ``openenv/session/create`` hands a
#: connection its session id and ``openenv/session/close`` ends the session it names,
#: from any connection, the token's or not. Interactions have no tools to serve.
MCP_REFUSED = "this server serves no MCP (interactions have no tools): send reset and step"


#: The deepest a ``/ws`` message may nest lists and objects. OpenEnv answers a message
#: it cannot validate with an error that echoes it, and its JSON writer (pydantic's)
#: gives up near 255 levels, after which the handler closed the connection; Python's
#: JSON reader gives up near 1,000. A prompt or ``interaction_kwargs`` may nest 100.
MOST_LEVELS = 200

_NOT_AN_OBJECT = 'a message must be a JSON object: {"type": "reset" or "step", "data": {...}}'


def _not_an_object(text: str) -> str | None:
    """Why ``text`` is not a message OpenEnv can take (JSON but not an object, nested
    deeper than :data:`MOST_LEVELS`), or ``None``. Invalid JSON is left to OpenEnv, which
    answers it and keeps serving.

    A usual message (an object with few brackets) is let through unparsed; any other
    is parsed once here: ``NaN`` and ``Infinity`` are JSON to Python's reader, and a
    first-character test let them through to OpenEnv's handler, which closed the
    connection on them.
    """
    usual = text.lstrip()[:1] == "{" and text.count("[") + text.count("{") <= MOST_LEVELS
    if usual and _SURROGATE_ESCAPE.search(text) is None:
        return None
    try:
        parsed = json.loads(text)
    except RecursionError:
        return (
            "a message nests lists and objects too deep for the JSON reader (its recursion "
            "limit); send flatter data"
        )
    except ValueError:
        return None  # not JSON at all: OpenEnv says so
    if type(parsed) is not dict:
        return _NOT_AN_OBJECT
    if _deeper_than(parsed, MOST_LEVELS):
        return (
            f"a message nests lists and objects more than {MOST_LEVELS} levels deep; send "
            f"flatter data (a prompt or interaction_kwargs may nest {MAX_NESTING} levels)"
        )
    return _echo_fails(parsed)


#: An escaped surrogate in a message's text: half of an escaped pair (an emoji, as
#: ``ensure_ascii`` writes it) or a lone one, which has no UTF-8 form.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

#: The keys of each message OpenEnv validates, and whether ``data`` is required:
#: its message models forbid any other key, and ``data`` must be an object.
_ENVELOPES = {
    "reset": ({"type", "data"}, False),
    "step": ({"type", "data"}, True),
    "state": ({"type"}, False),
    "close": ({"type"}, False),
}


def _echo_fails(message: dict[str, Any]) -> str | None:
    """Why OpenEnv would refuse ``message`` with an error it cannot send, or ``None``.

    OpenEnv answers a message of the wrong shape (a key it does not know, ``data``
    that is not an object) with its validation errors, which echo the input; when
    that input holds a lone surrogate, the echo cannot be written as UTF-8, and the
    handler closed the connection, its episode finalized. Such a message is
    answered here instead (a lone surrogate elsewhere is the runtime's to carry:
    it is sent back as its escape).
    """
    kind = message.get("type")
    if type(kind) is not str:  # OpenEnv answers "Unknown message type" with its repr
        return None
    if not _holds_lone_surrogate(message):
        return None
    envelope = _ENVELOPES.get(kind)
    if envelope is None:  # OpenEnv's answer would echo the type
        told = kind.encode("ascii", "backslashreplace").decode()[:100]
        return f"{_SHAPE}unknown message type '{told}': send reset, step, state or close"
    allowed, needs_data = envelope
    extra = sorted(k for k in message if k not in allowed)
    if extra:
        told = ", ".join(repr(k).encode("ascii", "backslashreplace").decode() for k in extra[:5])
        return f"{_SHAPE}a {kind} message holds only {' and '.join(sorted(allowed))}, not {told}"
    data = message.get("data")
    if (needs_data or "data" in message) and type(data) is not dict:
        return f"{_SHAPE}a {kind} message's data must be a JSON object"
    return None


#: How the guard's answer to a message of the wrong shape begins (OpenEnv's code for it:
#: ``VALIDATION_ERROR``).
_SHAPE = "invalid message: "


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether any text in ``value`` (parsed JSON, keys included) has no UTF-8 form."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def _deeper_than(value: Any, most: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``most`` deep."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > most:
            return True
        if type(item) is dict:
            stack.extend((v, depth + 1) for v in item.values() if type(v) in (dict, list))
        elif type(item) is list:
            stack.extend((v, depth + 1) for v in item if type(v) in (dict, list))
    return False


def _is_mcp(text: str) -> bool:
    """Whether ``text`` is a WebSocket message of OpenEnv's ``mcp`` type."""
    if "mcp" not in text and "\\u" not in text:  # a step: no parse (an escape may spell it)
        return False
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return False  # OpenEnv answers it as the malformed message it is
    return type(parsed) is dict and parsed.get("type") == "mcp"


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
                closing = (1001, _idle_reason(self.timeout))
                return {"type": "websocket.disconnect", "code": 1001, CLOSING: closing}
            raise
        finally:
            self.waiting = False


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log asyncio's "out of system resource" accept errors at most once per ``LOG_EVERY``.

    When file descriptors run out (other open files, a low ``ulimit -n``) asyncio
    reports every failed accept with a traceback, thousands a second; one line
    says the same. A plugin task's ``SystemExit`` or ``KeyboardInterrupt``, which
    ``app._serve`` told already, is not told again when the task is dropped. Every
    other error goes to the loop's default handler.
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
        if isinstance(context.get("exception"), (SystemExit, KeyboardInterrupt)):
            return  # a plugin's task that raised it: told once already (app._serve)
        loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
