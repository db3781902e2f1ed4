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
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Mapping
from typing import Any

__all__ = ["ConnectionPool", "ProtocolError", "Response"]

#: Exceptions that mean the request may succeed if it is sent again.
TRANSIENT: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable; also TimeoutError on 3.11+
    asyncio.TimeoutError,
    asyncio.IncompleteReadError,
    asyncio.LimitOverrunError,
)
_MAX_HEAD = 1 << 16  # bytes of status line and headers accepted


class ProtocolError(OSError):
    """The server's bytes are not an HTTP/1.x response this client understands."""


class Response:
    """Status, lower-cased headers and body of one response."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_STALE = (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError)

if sys.version_info >= (3, 11):

    async def _within(seconds: float, awaitable: Awaitable[Response]) -> Response:
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10

    def _within(seconds: float, awaitable: Awaitable[Response]) -> Awaitable[Response]:
        return asyncio.wait_for(awaitable, seconds)


class ConnectionPool:
    """Keep-alive connections to one origin, each used by one request at a time.

    ``post(body)`` borrows an idle connection (or opens one), sends the request,
    reads the whole response and returns the connection to the idle list when
    the server keeps it open. The number of connections follows the number of
    requests in flight; callers that want a cap use a semaphore around ``post``.
    ``timeout`` bounds a whole exchange (connect, send, complete response).
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
        self.port = port or (443 if self.https else 80)
        self.timeout = timeout
        lines = [f"POST {path} HTTP/1.1", f"Host: {netloc or host}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        self._idle: list[_Stream] = []
        self._ssl: Any = None
        self._closed = False

    async def _open(self) -> _Stream:
        ssl: Any = None
        if self.https:
            if self._ssl is None:
                import ssl as ssl_module

                self._ssl = ssl_module.create_default_context()
            ssl = self._ssl
        return await asyncio.open_connection(self.host, self.port, ssl=ssl, limit=_MAX_HEAD)

    def _borrow(self) -> _Stream | None:
        idle = self._idle
        while idle:
            stream = idle.pop()
            if not stream[0].at_eof() and not stream[1].is_closing():
                return stream
            stream[1].close()
        return None

    async def post(self, body: bytes) -> Response:
        """Send ``body`` as a POST; the complete response (any status)."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        data = self._head + str(len(body)).encode() + b"\r\n\r\n" + body
        return await _within(self.timeout, self._send(data))

    async def _send(self, data: bytes) -> Response:
        stream = self._borrow()
        if stream is not None:
            try:
                return await self._exchange(stream, data)
            except _STALE as exc:
                if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                    raise  # the server answered part of a response: not a stale connection
            # The server closed the kept-alive connection while it was idle: once more, fresh.
        return await self._exchange(await self._open(), data)

    async def _exchange(self, stream: _Stream, data: bytes) -> Response:
        reader, writer = stream
        reuse = False
        try:
            writer.write(data)
            await writer.drain()
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                status, headers, version = _parse_head(head)
                if status >= 200 or status == 101:
                    break  # 1xx interim responses (100 Continue, 103 Early Hints) precede it
            connection = headers.get("connection", "").lower()
            keep = (
                ("close" not in connection)
                if version == "HTTP/1.1"
                else ("keep-alive" in connection)
            )
            length = headers.get("content-length")
            if status in (204, 304) or 100 <= status < 200:
                body = b""
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                body = await _read_chunked(reader)
            elif length is not None:
                try:
                    size = int(length)
                except ValueError:
                    raise ProtocolError(f"bad Content-Length header {length!r}") from None
                body = await reader.readexactly(size) if size else b""
            else:
                body = await reader.read()  # the body ends when the server closes
                keep = False
            reuse = keep
            return Response(status, headers, body)
        finally:
            if reuse and not self._closed:
                self._idle.append(stream)
            else:
                writer.close()

    def close(self) -> None:
        """Close every idle connection; connections in use close when their request ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for _, writer in idle:
            try:
                writer.close()
            except RuntimeError:
                pass  # its event loop is closed already (the socket goes with the transport)


def _parse_head(head: bytes) -> tuple[int, dict[str, str], str]:
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0]
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return int(code), headers, version


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line {line[:40]!r}") from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields, then the final empty line
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the chunk's CRLF
