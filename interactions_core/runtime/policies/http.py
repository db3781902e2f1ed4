"""A keep-alive HTTP/1.1 ``POST`` client on asyncio streams (standard library only).

The ``openai`` policy sends one request per assistant turn, and a run keeps
hundreds in flight. Threads blocked in ``http.client`` cost a thread switch and a
pool hand-off per request and cap the requests in flight at the pool's size;
asyncio streams cost neither: a request is a write and two reads on the event
loop, and connections are reused from an idle list, so an evaluation is bound by
the model server, not by the client.

Only what a chat-completions exchange needs is implemented: ``POST`` with a
``Content-Length`` body; responses with ``Content-Length``, chunked transfer
encoding or a body ending at connection close; ``1xx`` interim responses
skipped; ``http`` and ``https``. A connection the server closed while idle is
detected and replaced once per request, transparently (as ``http.client``
callers do by hand).

Proxies are honoured as users expect from ``curl`` or ``requests``:
``HTTPS_PROXY`` / ``HTTP_PROXY`` (or their lower-case forms) name an
``http://`` proxy, ``NO_PROXY`` lists the hosts reached directly (read with
:func:`urllib.request.getproxies` and :func:`urllib.request.proxy_bypass`). An
``http`` request goes to the proxy in absolute form (``POST http://host/path``);
an ``https`` one goes through a ``CONNECT`` tunnel, with TLS to the server
itself. Credentials in the proxy URL are sent as ``Proxy-Authorization``.

What any client on this transport needs is here too: how many connections the
process can afford (:func:`connection_cap`), and retries with backoff
(:class:`Retries`, honouring ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_BODY",
    "TRANSIENT",
    "ConnectionPool",
    "ProtocolError",
    "Proxy",
    "Response",
    "ResponseTooLarge",
    "Retries",
    "connection_cap",
    "proxy_for",
    "read_retry_after",
]

#: Exceptions that mean the request may succeed if it is sent again.
TRANSIENT: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable; also TimeoutError on 3.11+
    asyncio.TimeoutError,
    asyncio.IncompleteReadError,
    asyncio.LimitOverrunError,
)
_MAX_HEAD = 1 << 16  # bytes of status line and headers accepted
#: Bytes of one response body accepted: a chat completion is kilobytes (megabytes with
#: log-probabilities); a server sending without end would otherwise fill the memory.
MAX_BODY = 32 << 20


class ProtocolError(OSError):
    """The server's bytes are not an HTTP/1.x response this client understands."""


_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_STALE = (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError)


class ResponseTooLarge(Exception):
    """A response body over :data:`MAX_BODY` bytes: not retried, the same would come back."""


class Proxy:
    """An ``http://`` proxy: where to connect, and the ``Proxy-Authorization`` to send."""

    __slots__ = ("authorization", "host", "port")

    def __init__(self, url: str) -> None:
        import urllib.parse

        parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(
                f"only http:// proxies are supported, not {url!r} (set by HTTPS_PROXY or "
                "HTTP_PROXY; NO_PROXY lists the hosts reached directly)"
            )
        self.host = parts.hostname
        self.port = parts.port or 80
        self.authorization: str | None = None
        if parts.username is not None:
            import base64

            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self.authorization = f"Basic {token}"


def proxy_for(scheme: str, host: str) -> Proxy | None:
    """The proxy the environment names for ``scheme://host``, or ``None`` to connect directly.

    ``urllib`` is consulted only when some ``*_proxy`` variable is set, so a run
    without proxies does not pay for importing it.
    """
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return None
    import urllib.request

    url = urllib.request.getproxies().get(scheme)
    if not url or urllib.request.proxy_bypass(host):
        return None
    return Proxy(url)


def _authority(host: str, port: int, default: int) -> str:
    """``host[:port]`` as written in a URL (IPv6 addresses in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port == default else f"{shown}:{port}"


class ConnectionPool:
    """Keep-alive connections to one origin, each used by one request at a time.

    ``post(body)`` borrows an idle connection (or opens one), sends the request,
    reads the whole response and returns the connection to the idle list when
    the server keeps it open. The number of connections follows the number of
    requests in flight; callers that want a cap use a semaphore around ``post``.

    ``timeout`` bounds a whole exchange (sending and the complete response;
    connecting too). A timer per request (``asyncio.timeout``) adds a heap
    entry to the event loop and cancels it on every exit, which showed in
    profiles next to the request's own work, so one watchdog per pool wakes four
    times per ``timeout`` (at least once a second) while requests are in flight
    and aborts the connections of the exchanges past their deadline; such an
    exchange raises ``TimeoutError``.
    """

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int | None,
        path: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        netloc: str | None = None,
    ) -> None:
        self.https = scheme == "https"
        self.host = host
        default = 443 if self.https else 80
        self.port = port or default
        self.timeout = timeout
        self.proxy = proxy_for(scheme, host)
        authority = netloc or _authority(host, self.port, default)
        target = path
        if self.proxy is not None and not self.https:
            target = f"http://{authority}{path}"  # a proxy is sent the absolute URI
        lines = [f"POST {target} HTTP/1.1", f"Host: {authority}"]
        if self.proxy is not None and self.proxy.authorization and not self.https:
            lines.append(f"Proxy-Authorization: {self.proxy.authorization}")
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        self._idle: list[_Stream] = []
        self._ssl: Any = None
        self._closed = False
        self._deadlines: dict[asyncio.StreamWriter, float] = {}  # exchanges in progress
        self._expired: set[asyncio.StreamWriter] = set()
        self._watchdog: asyncio.TimerHandle | None = None
        self._tick = min(max(timeout / 4, 0.01), 1.0)

    async def _open(self) -> _Stream:
        ssl: Any = None
        if self.https:
            if self._ssl is None:
                import ssl as ssl_module

                self._ssl = ssl_module.create_default_context()
            ssl = self._ssl
        proxy = self.proxy
        if proxy is None:
            opening = asyncio.open_connection(self.host, self.port, ssl=ssl, limit=_MAX_HEAD)
        elif ssl is None:
            opening = asyncio.open_connection(proxy.host, proxy.port, limit=_MAX_HEAD)
        else:
            opening = self._open_tunnel(proxy, ssl)
        try:
            return await asyncio.wait_for(opening, self.timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no connection within {self.timeout:g} s") from None

    async def _open_tunnel(self, proxy: Proxy, ssl: Any) -> _Stream:
        """A TLS connection to the server through the proxy's ``CONNECT`` tunnel."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(proxy.host, proxy.port, type=socket.SOCK_STREAM)
        family, kind, protocol, _, address = infos[0]
        sock = socket.socket(family, kind, protocol)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
            target = _authority(self.host, self.port, -1)
            lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
            if proxy.authorization:
                lines.append(f"Proxy-Authorization: {proxy.authorization}")
            await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = await loop.sock_recv(sock, 4096)
                if not chunk or len(head) > _MAX_HEAD:
                    raise ProtocolError(f"the proxy {proxy.host}:{proxy.port} closed the tunnel")
                head += chunk
            status = _parse_head(head).status
            if status != 200:
                raise ProtocolError(
                    f"the proxy {proxy.host}:{proxy.port} refused the tunnel to {target} "
                    f"(HTTP {status})"
                )
            return await asyncio.open_connection(
                sock=sock, ssl=ssl, server_hostname=self.host, limit=_MAX_HEAD
            )
        except BaseException:
            sock.close()
            raise

    def _borrow(self) -> _Stream | None:
        idle = self._idle
        while idle:
            stream = idle.pop()
            if not stream[0].at_eof() and not stream[1].is_closing() and not _unread(stream[0]):
                return stream
            stream[1].close()
        return None

    async def post(self, body: bytes) -> Response:
        """Send ``body`` as a POST; the complete response (any status)."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        data = self._head + str(len(body)).encode() + b"\r\n\r\n" + body
        stream = self._borrow()
        if stream is not None:
            try:
                return await self._exchange(stream, data)
            except _STALE as exc:
                if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                    raise  # the server answered part of a response: not a stale connection
            # The server closed the kept-alive connection while it was idle: once more, fresh.
        return await self._exchange(await self._open(), data)

    def _sweep(self) -> None:
        """The watchdog: abort the exchanges past their deadline; re-arm while any runs."""
        self._watchdog = None
        deadlines = self._deadlines
        if not deadlines:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        for writer, deadline in list(deadlines.items()):
            if deadline <= now:
                del deadlines[writer]
                self._expired.add(writer)
                writer.transport.abort()  # the exchange's pending read fails at once
        if deadlines:
            self._watchdog = loop.call_later(self._tick, self._sweep)

    async def _exchange(self, stream: _Stream, data: bytes) -> Response:
        reader, writer = stream
        reuse = False
        deadlines = self._deadlines
        loop = asyncio.get_running_loop()
        deadlines[writer] = loop.time() + self.timeout
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._tick, self._sweep)
        try:
            writer.write(data)
            if writer.transport.get_write_buffer_size():
                await writer.drain()  # only when the socket did not take it all at once
            while True:
                response = _parse_head(await reader.readuntil(b"\r\n\r\n"))
                if response.status >= 200 or response.status == 101:
                    break  # 1xx interim responses (100 Continue, 103 Early Hints) precede it
            await _read_body(reader, response)
            if writer in self._expired:  # cut by the deadline: the end of file is not the end
                raise asyncio.TimeoutError
            # Bytes after a complete response were never asked for (a server or proxy
            # that breaks HTTP framing): on a reused connection they had answered the
            # next request, each reply landing in another episode.
            reuse = response.keep_alive and not _unread(reader)
            return response
        except BaseException:
            if writer in self._expired:
                self._expired.discard(writer)
                raise TimeoutError(f"no complete response within {self.timeout:g} s") from None
            raise
        finally:
            deadlines.pop(writer, None)
            if reuse and not self._closed:
                self._idle.append(stream)
            else:
                writer.close()

    def close(self) -> None:
        """Close every idle connection; connections in use close when their request ends."""
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        idle, self._idle = self._idle, []
        for _, writer in idle:
            try:
                writer.close()
            except RuntimeError:
                pass  # its event loop is closed already (the socket goes with the transport)


class Response:
    """Status, framing and body of one response; other headers are parsed when asked for."""

    __slots__ = ("_head", "body", "chunked", "keep_alive", "length", "status")

    def __init__(self, status: int, head: bytes) -> None:
        self.status = status
        self._head = head
        self.body = b""
        self.length: int | None = None
        self.chunked = False
        self.keep_alive = True

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), or ``None``; the last one when repeated."""
        found = None
        key = name.lower()
        for line in self._head.decode("latin-1").split("\r\n")[1:]:
            field, sep, value = line.partition(":")
            if sep and field.strip().lower() == key:
                found = value.strip()
        return found


def _unread(reader: asyncio.StreamReader) -> bool:
    """Whether ``reader`` holds bytes no request asked for yet (its buffer is not empty).

    ``StreamReader`` has no public way to ask; its buffer is read, as a ``bytearray``
    it has kept since Python 3.5. A reader without one is taken as holding nothing.
    """
    return bool(getattr(reader, "_buffer", None))


def _field(lower: bytes, name: bytes) -> bytes | None:
    """The value of the header ``name`` (given as ``b"\\r\\nname:"``) in a lower-cased head."""
    at = lower.find(name)
    if at < 0:
        return None
    start = at + len(name)
    return lower[start : lower.find(b"\r\n", start)].strip()


def _parse_head(head: bytes) -> Response:
    """Status and framing headers, read from the bytes with three substring searches."""
    if head[:7] != b"HTTP/1." or not head[9:12].isdigit() or head[12:13] not in (b" ", b"\r"):
        first = head.split(b"\r\n", 1)[0].decode("latin-1")
        raise ProtocolError(f"not an HTTP/1.x response: {first[:80]!r}")
    response = Response(int(head[9:12]), head)
    lower = head.lower()
    connection = _field(lower, b"\r\nconnection:")
    if head[7:8] == b"1":
        response.keep_alive = connection is None or b"close" not in connection
    else:
        response.keep_alive = connection is not None and b"keep-alive" in connection
    encoding = _field(lower, b"\r\ntransfer-encoding:")
    if encoding is not None and b"chunked" in encoding:
        response.chunked = True
        return response
    length = _field(lower, b"\r\ncontent-length:")
    if length is not None:
        if not length.isdigit() or len(length) > 18:  # (int() refuses 4,300 digits)
            shown = length[:40].decode("latin-1") + ("..." if len(length) > 40 else "")
            raise ProtocolError(f"bad Content-Length header {shown!r}")
        if lower.count(b"\r\ncontent-length:") > 1:  # RFC 9112: differing ones are an error
            values = {
                v.split(b"\r\n", 1)[0].strip() for v in lower.split(b"\r\ncontent-length:")[1:]
            }
            if len(values) > 1:
                raise ProtocolError("two different Content-Length headers")
        response.length = int(length)
    return response


async def _read_body(reader: asyncio.StreamReader, response: Response) -> None:
    """Read ``response``'s body, however it is framed, at most :data:`MAX_BODY` bytes."""
    status = response.status
    if status in (204, 304) or status < 200:
        return  # no body
    if response.chunked:
        response.body = await _read_chunked(reader)
    elif response.length is not None:
        _within_bound(response.length, declared=True)
        if response.length:
            response.body = await reader.readexactly(response.length)
    else:  # the body ends when the server closes
        parts, size = [], 0
        while part := await reader.read(1 << 16):
            size += len(part)
            _within_bound(size)
            parts.append(part)
        response.body, response.keep_alive = b"".join(parts), False


def _within_bound(size: int, declared: bool = False) -> None:
    """Refuse a body over :data:`MAX_BODY`: ``size`` is what was read so far, or with
    ``declared`` what the server announced (a length, a chunk's size)."""
    if size > MAX_BODY:
        told = f"{size:,} bytes announced" if declared else f"{size:,} bytes so far"
        if len(told) > 60:  # a header of thousands of digits
            told = f"a size of {len(str(size)):,} digits announced"
        raise ResponseTooLarge(
            f"the response body is over {MAX_BODY >> 20} MiB ({told}); "
            "the server sends more than any chat completion holds"
        )


#: Chunks of a body accepted before each must carry :data:`_CHUNK_AVERAGE` bytes on average.
_FREE_CHUNKS = 1024
_CHUNK_AVERAGE = 64


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body, into one buffer, within :data:`MAX_BODY` bytes.

    The buffer grows in place: kept as one ``bytes`` per chunk, 10 million 1-byte
    chunks (60 MB on the wire, 10 MB of body) took 1.4 GB and a minute. Past
    :data:`_FREE_CHUNKS`, chunks must average :data:`_CHUNK_AVERAGE` bytes, which
    every server writing a response in pieces does, so the work per byte stays bounded.
    """
    body = bytearray()
    chunks = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        field = line.split(b";", 1)[0].strip()
        if not field or field.strip(b"0123456789abcdefABCDEF"):  # int() takes "-5", "0x5"
            raise ProtocolError(f"bad chunk size line {line[:40]!r}")
        size = int(field, 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields, then the final empty line
            return bytes(body)
        _within_bound(len(body) + size, declared=True)
        chunks += 1
        if chunks > _FREE_CHUNKS and chunks * _CHUNK_AVERAGE > len(body) + size:
            raise ProtocolError(
                f"the response came in {chunks:,} chunks of {(len(body) + size) // chunks} "
                f"bytes on average; a server answering in pieces sends at least "
                f"{_CHUNK_AVERAGE} bytes a chunk"
            )
        body += await reader.readexactly(size)
        await reader.readexactly(2)  # the chunk's CRLF


def connection_cap() -> int | None:
    """How many connections the process can afford: its open-file limit less a margin.

    ``--concurrency 4000`` under the common default ``ulimit -n`` of 1024 would
    otherwise fail requests with "Too many open files"; at the cap, requests
    wait for a connection instead. ``None``: no limit is known (or none is set).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Unix
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(8, soft - 64)  # files, the event loop's own descriptors, the output...


def read_retry_after(response: Response) -> float | None:
    """The server's ``Retry-After`` in seconds, when it gave a finite, non-negative number."""
    after = response.header("retry-after")
    try:
        seconds = float(after) if after else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None


class Retries:
    """How often a request that may succeed when sent again is retried, and how far apart."""

    __slots__ = ("backoff", "count", "max_backoff")

    def __init__(self, count: int, backoff: float, max_backoff: float) -> None:
        self.count = count  # retries after the first attempt
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: the server's word, else exponential with jitter."""
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        # 2**attempt as a float overflows past attempt 1023 (retries=1100)
        base = min(self.backoff * 2.0 ** min(attempt, 64), self.max_backoff)
        return base * (0.5 + random.random() / 2)
