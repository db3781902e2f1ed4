"""``openai``: any OpenAI-compatible chat-completions endpoint.

vLLM, SGLang, Ollama, llama.cpp's server and hosted APIs all speak
``POST {base_url}/chat/completions``. This policy sends the conversation so far
and returns ``choices[0].message.content``.

It uses the standard library only (``http.client`` in a small thread pool, one
kept-alive connection per thread), so it adds no dependency to the core:
rollouts are bounded by the model server, not by the HTTP client.

Failures: HTTP 429 and 5xx, connection errors and timeouts are retried with
exponential backoff (honouring ``Retry-After``); other 4xx responses and
malformed bodies fail the episode at once, with the status and the start of the
body in the message.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import queue
import random
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from typing import Any

from ..errors import PolicyError
from .base import Policy

__all__ = ["OpenAIPolicy"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _snippet(data: bytes, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _DaemonPool(Executor):
    """A thread pool whose workers are daemon threads, never joined at exit.

    ``ThreadPoolExecutor`` joins its workers when the interpreter exits, so a
    request blocked in a socket read would hold a Ctrl-C'd process for up to the
    socket timeout (and a second Ctrl-C would interrupt that join with a
    traceback). A request abandoned here simply dies with the process.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if self._idle == 0 and self._threads < self._max:
                self._threads += 1
                threading.Thread(
                    target=self._work, name=f"{self._name}-{self._threads}", daemon=True
                ).start()
            elif self._idle > 0:
                self._idle -= 1  # an idle worker takes this item
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            threads = self._threads
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in range(threads):
            self._queue.put(None)  # busy workers stop after their request, never joined


class OpenAIPolicy(Policy):
    """Replies from an OpenAI-compatible chat-completions server.

    Options (all keyword): ``model`` (required), ``base_url`` (default
    ``http://127.0.0.1:8000/v1``), ``api_key_env`` (the environment variable
    holding the API key; default: ``OPENAI_API_KEY`` when it is set, else no key),
    sampling parameters ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
    ``seed``, ``extra_body`` (a mapping merged into every request), ``concurrency``
    (requests in flight, default 8), ``timeout`` (seconds per socket operation,
    default 120), ``retries`` (default 4) and ``backoff`` (first delay in seconds,
    default 0.5, doubled per attempt up to ``max_backoff``, default 30).
    """

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key_env: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("model must be the served model's name (--model NAME)")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be a positive integer, not {concurrency!r}")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be a non-negative integer, not {retries!r}")
        for label, value in (("timeout", timeout), ("backoff", backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, not {value!r}")
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ValueError("extra_body must be a mapping (JSON object)")
        url = urllib.parse.urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        path = (
            url.path if url.path.endswith("/chat/completions") else url.path + "/chat/completions"
        )
        self.model = model
        self.url = urllib.parse.urlunsplit((url.scheme, url.netloc, path, "", ""))
        self._scheme, self._host, self._port, self._path = url.scheme, url.hostname, url.port, path
        key_env = api_key_env or DEFAULT_KEY_ENV
        key = os.environ.get(key_env)
        if api_key_env and not key:
            raise ValueError(f"api_key_env names ${api_key_env}, which is not set")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._key_env = key_env if key else None
        self.params: dict[str, Any] = {
            k: v
            for k, v in (
                ("temperature", temperature),
                ("top_p", top_p),
                ("max_tokens", max_tokens),
                ("stop", stop),
                ("seed", seed),
            )
            if v is not None
        }
        self.params.update(extra_body or {})
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._pool: _DaemonPool | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    # -- HTTP, in a worker thread ---------------------------------------------

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        with self._lock:
            self._connections.append(conn)
        return conn

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        self._local.conn = None
        with self._lock:
            if conn in self._connections:
                self._connections.remove(conn)

    def _post(self, body: bytes) -> tuple[int, str | None, bytes]:
        for fresh in (False, True):
            conn = getattr(self._local, "conn", None)
            reused = conn is not None and not fresh
            if conn is None or fresh:
                if conn is not None:
                    self._drop(conn)
                conn = self._local.conn = self._connect()
            try:
                conn.request("POST", self._path, body, self._headers)
                response = conn.getresponse()
                data = response.read()
            except _STALE:
                self._drop(conn)
                if reused:
                    continue  # the server closed a kept-alive connection: reconnect once
                raise
            except BaseException:
                self._drop(conn)
                raise
            if response.will_close:
                self._drop(conn)
            return response.status, response.getheader("Retry-After"), data
        raise AssertionError("unreachable")

    # -- the policy -------------------------------------------------------------

    def _parse(self, status: int, data: bytes) -> str:
        try:
            body = json.loads(data)
        except ValueError:
            raise PolicyError(
                f"openai: {self.url} answered HTTP {status} with a body that is not JSON: "
                f"{_snippet(data)!r}"
            ) from None
        try:
            message = body["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            detail = body.get("error") if isinstance(body, dict) else None
            hint = f" (error: {detail})" if detail else ""
            raise PolicyError(
                f"openai: malformed chat-completions response from {self.url}{hint}: "
                f"no choices[0].message in {_snippet(data)!r}"
            ) from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
        if content is None:
            return ""  # e.g. a tool-calling turn with no text
        if isinstance(content, list):
            return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        raise PolicyError(
            f"openai: choices[0].message.content from {self.url} is a "
            f"{type(content).__name__}, expected a string"
        )

    def _fail_status(self, status: int, data: bytes) -> PolicyError:
        hint = ""
        if status in (401, 403):
            hint = (
                f"; check the API key in ${self._key_env}"
                if self._key_env
                else f"; no API key was sent (set ${DEFAULT_KEY_ENV} or --policy-option "
                "api_key_env=VAR)"
            )
        elif status == 404:
            hint = "; check base_url (it usually ends in /v1) and the model name"
        return PolicyError(f"openai: HTTP {status} from {self.url}: {_snippet(data)!r}{hint}")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        base = min(self.backoff * (2**attempt), self.max_backoff)
        return base * (0.5 + random.random() / 2)

    async def _request(self, body: bytes) -> str:
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = _DaemonPool(self.concurrency, "openai-policy")
        last = ""
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            try:
                status, after, data = await loop.run_in_executor(self._pool, self._post, body)
            except (OSError, http.client.HTTPException) as exc:
                last = f"{exc.__class__.__name__}: {exc}".rstrip(": ")
            else:
                if status == 200:
                    return self._parse(status, data)
                if status != 429 and status < 500:
                    raise self._fail_status(status, data)
                last = f"HTTP {status}: {_snippet(data)!r}"
                try:
                    retry_after = float(after) if after else None
                except ValueError:
                    retry_after = None
            if attempt < self.retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        tries = self.retries + 1
        raise PolicyError(
            f"openai: {self.url} failed {tries} time{'s' if tries != 1 else ''}; last error: {last}"
        )

    async def reply(self, state: Any, messages: list[dict[str, Any]]) -> str:
        body = json.dumps(
            {"model": self.model, "messages": messages, **self.params}, ensure_ascii=False
        ).encode("utf-8")
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        async with self._semaphore:
            return await self._request(body)

    async def aclose(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._semaphore = None

    def __repr__(self) -> str:
        return f"<OpenAIPolicy {self.model!r} at {self.url}>"
