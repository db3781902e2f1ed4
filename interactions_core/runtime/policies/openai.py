"""``openai``: any OpenAI-compatible chat-completions endpoint.

vLLM, SGLang, Ollama, llama.cpp's server and hosted APIs all speak
``POST {base_url}/chat/completions``. This policy sends the conversation so far
and returns ``choices[0].message.content``.

It uses the standard library only (keep-alive connections driven by asyncio
streams, see ``_http.py``), so it adds no dependency to the core, and it keeps
as many requests in flight as the run has episodes in flight: an evaluation is
bound by the model server, not by the client.

Per episode it records what the server reported for each turn (prompt and
completion tokens) and how long the request took; :meth:`OpenAIPolicy.usage`
hands that to the episode record.

Failures: HTTP 429 and 5xx, connection errors and timeouts are retried with
exponential backoff (honouring ``Retry-After``); other 4xx responses and
malformed bodies fail the episode at once, with the status and the start of the
body in the message.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import PolicyError
from ._http import TRANSIENT, ConnectionPool
from .base import Policy

__all__ = ["OpenAIPolicy"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_perf_counter = time.perf_counter
# One encoder for every request: json.dumps(..., ensure_ascii=False) builds a new one per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode


def _snippet(data: bytes, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tokens(usage: Any, key: str) -> int | None:
    value = usage.get(key) if usage.__class__ is dict else None
    return value if value.__class__ is int else None


def _connection_cap() -> int | None:
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


class _Episode:
    """One episode's request parameters and per-turn accounting."""

    __slots__ = ("params", "turns")

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.turns: list[dict[str, Any]] = []


class OpenAIPolicy(Policy):
    """Replies from an OpenAI-compatible chat-completions server.

    Options (all keyword): ``model`` (required), ``base_url`` (default
    ``http://127.0.0.1:8000/v1``), ``api_key_env`` (the environment variable
    holding the API key; default: ``OPENAI_API_KEY`` when it is set, else no key),
    sampling parameters ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
    ``seed`` (repeat ``r`` of a sample is sent ``seed + r``), ``extra_body`` (a
    mapping merged into every request, last), ``concurrency`` (a cap on requests
    in flight; default none: one request per episode in flight, so the run's
    ``--concurrency`` decides), ``timeout`` (seconds per request, default 120),
    ``retries`` (default 4) and ``backoff`` (first delay in seconds, default 0.5,
    doubled per attempt up to ``max_backoff``, default 30).
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
        concurrency: int | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("model must be the served model's name (--model NAME)")
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ValueError(f"concurrency must be a positive integer, not {concurrency!r}")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be a non-negative integer, not {retries!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer, not {seed!r}")
        for label, value in (("timeout", timeout), ("backoff", backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, not {value!r}")
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ValueError("extra_body must be a mapping (JSON object)")
        url = urllib.parse.urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        try:
            port = url.port
        except ValueError:
            raise ValueError(f"base_url has an invalid port: {base_url!r}") from None
        path = (
            url.path if url.path.endswith("/chat/completions") else url.path + "/chat/completions"
        )
        self.model = model
        self.url = urllib.parse.urlunsplit((url.scheme, url.netloc, path, "", ""))
        key_env = api_key_env or DEFAULT_KEY_ENV
        key = os.environ.get(key_env)
        if api_key_env and not key:
            raise ValueError(f"api_key_env names ${api_key_env}, which is not set")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._key_env = key_env if key else None
        self.seed = seed
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
        self.extra_body = dict(extra_body or {})
        self.params.update(self.extra_body)
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        #: Requests in flight now, and the most at any moment of this policy's life.
        self.in_flight = 0
        self.max_in_flight = 0
        self._pool_args = (url.scheme, url.hostname, port, path, headers)
        self._netloc = url.netloc.rpartition("@")[2]
        self._pool: ConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        #: At most this many requests (connections) at once, whatever the concurrency.
        self.connection_cap = _connection_cap()
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    # -- per episode ----------------------------------------------------------------

    def start(self, sample: Mapping[str, Any], repeat: int = 0) -> _Episode:
        """Per-episode state: the request parameters (with this repeat's seed)."""
        params = self.params
        if repeat and self.seed is not None and "seed" not in self.extra_body:
            params = {**params, "seed": self.seed + repeat}
        return _Episode(params)

    def usage(self, state: Any) -> dict[str, Any] | None:
        """The episode's accounting: token totals, request time, and each turn's figures.

        A total is ``None`` when the server reported that count for no turn.
        """
        if state.__class__ is not _Episode or not state.turns:
            return None
        turns = state.turns
        prompt = [t["prompt_tokens"] for t in turns if t["prompt_tokens"] is not None]
        completion = [t["completion_tokens"] for t in turns if t["completion_tokens"] is not None]
        return {
            "prompt_tokens": sum(prompt) if prompt else None,
            "completion_tokens": sum(completion) if completion else None,
            "latency_s": round(sum(t["latency_s"] for t in turns), 6),
            "turns": turns,
        }

    # -- the policy -------------------------------------------------------------

    def _parse(self, status: int, data: bytes) -> tuple[str, Any]:
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
        usage = body.get("usage")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content, usage
        if content is None:
            return "", usage  # e.g. a tool-calling turn with no text
        if isinstance(content, list):
            text = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
            return text, usage
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

    def _connections(self) -> ConnectionPool:
        """The pool of this event loop (a new loop, e.g. a second ``asyncio.run``, gets its own)."""
        loop = asyncio.get_running_loop()
        pool = self._pool
        if pool is None or self._loop is not loop:
            if pool is not None:
                pool.close()
            scheme, host, port, path, headers = self._pool_args
            pool = self._pool = ConnectionPool(
                scheme, host, port, path, headers, timeout=self.timeout, netloc=self._netloc
            )
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.concurrency) if self.concurrency else None
            self._slot_waiters.clear()  # futures of another loop are never woken
        return pool

    async def _request(self, body: bytes) -> tuple[str, Any, float]:
        pool = self._pool if self._loop is asyncio.get_running_loop() else None
        if pool is None:
            pool = self._connections()
        last = ""
        cap = self.connection_cap
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            while cap is not None and self.in_flight >= cap:
                waiter = asyncio.get_running_loop().create_future()
                self._slot_waiters.append(waiter)
                await waiter  # a request ends and hands its slot over
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
                    text, usage = self._parse(status, data)
                    return text, usage, latency
                if status != 429 and status < 500:
                    raise self._fail_status(status, data)
                last = f"HTTP {status}: {_snippet(data)!r}"
                after = response.header("retry-after")
                try:
                    retry_after = float(after) if after else None
                except ValueError:
                    retry_after = None
            finally:
                self.in_flight -= 1
                waiters = self._slot_waiters
                while waiters:
                    waiter = waiters.popleft()
                    if not waiter.done():
                        waiter.set_result(None)
                        break
            if attempt < self.retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        tries = self.retries + 1
        raise PolicyError(
            f"openai: {self.url} failed {tries} time{'s' if tries != 1 else ''}; last error: {last}"
        )

    async def reply(self, state: Any, messages: list[dict[str, Any]]) -> str:
        episode = state if state.__class__ is _Episode else None
        params = self.params if episode is None else episode.params
        body = _encode({"model": self.model, "messages": messages, **params}).encode("utf-8")
        semaphore = self._semaphore
        if self.concurrency is not None and (
            semaphore is None or self._loop is not asyncio.get_running_loop()
        ):
            self._connections()
            semaphore = self._semaphore
        if semaphore is None:
            text, usage, latency = await self._request(body)
        else:
            async with semaphore:
                text, usage, latency = await self._request(body)
        if episode is not None:
            episode.turns.append(
                {
                    "prompt_tokens": _tokens(usage, "prompt_tokens"),
                    "completion_tokens": _tokens(usage, "completion_tokens"),
                    "latency_s": round(latency, 6),
                }
            )
        return text

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._loop = None
        self._semaphore = None

    def __repr__(self) -> str:
        return f"<OpenAIPolicy {self.model!r} at {self.url}>"
