"""Sending the ``openai`` policy's requests: connections, caps, retries.

A run keeps as many requests in flight as it has episodes in flight, so the
client's job is to keep that cheap and safe: one keep-alive
:class:`~interactions_core.runtime.policies._http.ConnectionPool` per event
loop; at most as many connections as the process has file descriptors to spare
(beyond that, requests wait for a slot rather than fail with "Too many open
files"); an optional cap on requests in flight (the ``concurrency`` option);
and retries with exponential backoff for what may succeed when sent again
(HTTP 429 and 5xx, honouring ``Retry-After``; connection errors; timeouts).
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import Coroutine
from typing import Any

from ..errors import PolicyError
from ._http import TRANSIENT, ConnectionPool, Response
from ._openai_options import Endpoint
from ._openai_wire import parse_reply, snippet, status_error

__all__ = ["ChatClient", "Retries", "connection_cap"]

_perf_counter = time.perf_counter


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


def _retry_after(response: Response) -> float | None:
    """The server's ``Retry-After`` in seconds, when it gave a number."""
    after = response.header("retry-after")
    try:
        return float(after) if after else None
    except ValueError:
        return None


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
        base = min(self.backoff * (2**attempt), self.max_backoff)
        return base * (0.5 + random.random() / 2)


class ChatClient:
    """Posts request bodies to one endpoint; the reply's text, usage and latency back."""

    def __init__(
        self,
        endpoint: Endpoint,
        headers: dict[str, str],
        key_env: str | None,
        *,
        concurrency: int | None,
        timeout: float,
        retries: Retries,
    ) -> None:
        self.endpoint = endpoint
        self.url = endpoint.url
        self._headers = headers
        self._key_env = key_env  # named in the hint of a 401/403
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.retries = retries
        #: Requests in flight now, and the most at any moment of this client's life.
        self.in_flight = 0
        self.max_in_flight = 0
        #: At most this many requests (connections) at once, whatever the concurrency.
        self.connection_cap = connection_cap()
        self._pool: ConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def send(self, body: bytes) -> Coroutine[Any, Any, tuple[str, Any, float]]:
        """Post ``body`` (retrying what may succeed again); awaits to ``(text, usage, latency)``.

        Without a ``concurrency`` cap this is the request's own coroutine: no
        extra frame per request on the path every turn takes.
        """
        if self.concurrency is None:
            return self._request(body)
        return self._send_capped(body)

    async def _send_capped(self, body: bytes) -> tuple[str, Any, float]:
        semaphore = self._semaphore
        if semaphore is None or self._loop is not asyncio.get_running_loop():
            self._connections()
            semaphore = self._semaphore
        assert semaphore is not None
        async with semaphore:
            return await self._request(body)

    def close(self) -> None:
        """Close the idle connections; the next request opens new ones."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._loop = None
        self._semaphore = None

    def _connections(self) -> ConnectionPool:
        """The pool of this event loop (a new loop, e.g. a second ``asyncio.run``, gets its own)."""
        loop = asyncio.get_running_loop()
        pool = self._pool
        if pool is None or self._loop is not loop:
            if pool is not None:
                pool.close()
            e = self.endpoint
            pool = self._pool = ConnectionPool(
                e.scheme,
                e.host,
                e.port,
                e.path,
                self._headers,
                timeout=self.timeout,
                netloc=e.netloc,
            )
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.concurrency) if self.concurrency else None
            self._slot_waiters.clear()  # futures of another loop are never woken
        return pool

    async def _request(self, body: bytes) -> tuple[str, Any, float]:
        """Every attempt at one request, with the backoff between them."""
        pool = self._pool if self._loop is asyncio.get_running_loop() else None
        if pool is None:
            pool = self._connections()
        last = ""
        cap = self.connection_cap
        retries = self.retries
        for attempt in range(retries.count + 1):
            retry_after: float | None = None
            if cap is not None and self.in_flight >= cap:
                await self._wait_for_slot(cap)
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
            started = _perf_counter()
            try:
                response = await pool.post(body)
            except TRANSIENT as exc:
                last = f"{exc.__class__.__name__}: {exc}".rstrip(": ")
            else:
                latency = _perf_counter() - started
                status, data = response.status, response.body
                if status == 200:
                    text, usage = parse_reply(self.url, status, data)
                    return text, usage, latency
                if status != 429 and status < 500:
                    raise status_error(self.url, self._key_env, status, data)
                last = f"HTTP {status}: {snippet(data)!r}"
                retry_after = _retry_after(response)
            finally:
                self._release_slot()
            if attempt < retries.count:
                await asyncio.sleep(retries.delay(attempt, retry_after))
        tries = retries.count + 1
        raise PolicyError(
            f"openai: {self.url} failed {tries} time{'s' if tries != 1 else ''}; last error: {last}"
        )

    async def _wait_for_slot(self, cap: int) -> None:
        """Wait until fewer than ``cap`` requests are in flight."""
        while self.in_flight >= cap:
            waiter = asyncio.get_running_loop().create_future()
            self._slot_waiters.append(waiter)
            await waiter  # a request ends and hands its slot over

    def _release_slot(self) -> None:
        """One request less in flight: wake the first request still waiting for a slot."""
        self.in_flight -= 1
        waiters = self._slot_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break
