"""``openai``: any OpenAI-compatible chat-completions endpoint.

vLLM, SGLang, Ollama, llama.cpp's server and hosted APIs all speak
``POST {base_url}/chat/completions``. This policy sends the conversation so far
and returns ``choices[0].message.content``.

It uses the standard library only (keep-alive connections driven by asyncio
streams, see :mod:`.http`), so it adds no dependency to the core, and it keeps
as many requests in flight as the run has episodes in flight: an evaluation is
bound by the model server, not by the client.

Per episode it records what the server reported for each turn (prompt and
completion tokens) and how long the request took; :meth:`OpenAIPolicy.usage`
hands that to the episode record.

Failures: HTTP 429 and 5xx, connection errors and timeouts are retried with
exponential backoff (honouring ``Retry-After``); other 4xx responses and
malformed bodies fail the episode at once, with the status and the start of the
body in the message.

The parts, in this order below: the options, checked once when the policy is
built (a bad option fails the run before the first episode, naming the option
and what it accepts, not as an HTTP error on every episode); the wire format
(the request body, what a reply's text is, which answers are malformed, what an
HTTP failure tells the user to check); each episode's accounting (totals kept
as the turns come; a total stays ``None`` while the server has reported that
count for no turn, so "not reported" is never shown as zero); the client that
sends (one keep-alive connection pool per event loop, at most as many
connections as the process has file descriptors to spare, an optional cap on
requests in flight, retries); and the policy itself.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import time
import urllib.parse
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from ...errors import PolicyError
from ..stats import token_count
from .base import Policy
from .http import (
    TRANSIENT,
    ConnectionPool,
    ResponseTooLarge,
    Retries,
    connection_cap,
    proxy_for,
    read_retry_after,
)

__all__ = ["DEFAULT_KEY_ENV", "ChatClient", "Endpoint", "EpisodeUsage", "OpenAIPolicy"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


# -- options ------------------------------------------------------------------


#: A limit in seconds must be below this (a finite number).
INF = float("inf")


def check_limits(
    model: str,
    concurrency: int | None,
    retries: int,
    seed: int | None,
    timeout: float,
    backoff: float,
    extra_body: Mapping[str, Any] | None,
    max_backoff: float = 30.0,
) -> None:
    """``ValueError`` naming the first option of the wrong type or out of range."""
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
    for label, value in (("timeout", timeout), ("backoff", backoff), ("max_backoff", max_backoff)):
        # NaN compares false both ways: a NaN timeout would wait for ever
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < INF:
            raise ValueError(f"{label} must be a positive number of seconds, not {value!r}")
    if extra_body is not None and not isinstance(extra_body, Mapping):
        raise ValueError("extra_body must be a mapping (JSON object)")


class Endpoint:
    """Where the requests go: the full chat-completions URL and its parts."""

    __slots__ = ("host", "netloc", "path", "port", "scheme", "url")

    def __init__(self, base_url: str) -> None:
        """Read ``base_url``; ``ValueError`` when it is not an http(s) URL with a valid port."""
        url = urllib.parse.urlsplit(base_url.rstrip("/"))
        host = url.hostname
        if url.scheme not in ("http", "https") or not host:
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        try:
            self.port = url.port
        except ValueError:
            raise ValueError(f"base_url has an invalid port: {base_url!r}") from None
        path = url.path
        if not path.endswith("/chat/completions"):
            path += "/chat/completions"
        self.scheme = url.scheme
        self.host = host
        self.path = path
        self.url = urllib.parse.urlunsplit((url.scheme, url.netloc, path, "", ""))
        #: The ``Host`` header: the URL's authority without any ``user:password@``.
        self.netloc = url.netloc.rpartition("@")[2]
        proxy_for(self.scheme, host)  # a proxy this client cannot use fails here, not per request


def credentials(api_key_env: str | None) -> tuple[dict[str, str], str | None]:
    """The request headers, and the variable the key came from (``None``: no key sent).

    An ``api_key_env`` naming a variable that is not set is an error; without
    one, ``$OPENAI_API_KEY`` is used when it is set.
    """
    key_env = api_key_env or DEFAULT_KEY_ENV
    key = os.environ.get(key_env)
    if api_key_env and not key:
        raise ValueError(f"api_key_env names ${api_key_env}, which is not set")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers, key_env if key else None


def request_params(
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    stop: str | Sequence[str] | None,
    seed: int | None,
    extra_body: Mapping[str, Any],
) -> dict[str, Any]:
    """The parameters sent with every request: the sampling ones set, then ``extra_body``."""
    sampling = (
        ("temperature", temperature),
        ("top_p", top_p),
        ("max_tokens", max_tokens),
        ("stop", stop),
        ("seed", seed),
    )
    params = {name: value for name, value in sampling if value is not None}
    params.update(extra_body)
    return params


# -- the wire format ----------------------------------------------------------

# One encoder for every request: json.dumps(..., ensure_ascii=False) builds a new one per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode
_encode_ascii = json.JSONEncoder().encode


def encode_request(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> bytes:
    """The JSON body of one chat-completions request.

    A lone surrogate (a dataset's ``"\\ud800"``, or one a server sent back) has no
    UTF-8 form: such a body is sent with every character outside ASCII escaped, as
    JSON allows, rather than failing the episode before any request is made.
    """
    body = {"model": model, "messages": messages, **params}
    text = _encode(body)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _encode_ascii(body).encode("ascii")


def snippet(data: bytes, limit: int = 200) -> str:
    """The start of a response body, for an error message."""
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Values a response's JSON may hold, counted by its commas and brackets (those inside
#: strings too, so over-counted): a reply with log-probabilities of 10,000 tokens holds
#: about a million. Parsed, a value costs up to 64 bytes: 11 million ``[]`` in a 33 MB
#: body took 874 MB, and ``--concurrency`` requests parse at once.
MAX_REPLY_VALUES = 4 << 20


def parse_reply(url: str, status: int, data: bytes) -> tuple[str, Any]:
    """``(text, usage)`` of a successful response; :class:`PolicyError` when it is malformed."""
    values = data.count(b",") + data.count(b"[") + data.count(b"{")
    if values > MAX_REPLY_VALUES:
        raise PolicyError(
            f"openai: {url} answered HTTP {status} with JSON of about {values:,} values, "
            f"over the {MAX_REPLY_VALUES:,} a reply is read with: {snippet(data)!r}"
        )
    try:
        body = json.loads(data)
    except ValueError:
        raise PolicyError(
            f"openai: {url} answered HTTP {status} with a body that is not JSON: {snippet(data)!r}"
        ) from None
    except RecursionError:
        raise PolicyError(
            f"openai: {url} answered HTTP {status} with JSON nested too deeply to read: "
            f"{snippet(data)!r}"
        ) from None
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        detail = body.get("error") if isinstance(body, dict) else None
        hint = f" (error: {snippet(str(detail).encode('utf-8', 'replace'))!r})" if detail else ""
        raise PolicyError(
            f"openai: malformed chat-completions response from {url}{hint}: "
            f"no choices[0].message in {snippet(data)!r}"
        ) from None
    if not isinstance(message, dict):
        raise PolicyError(
            f"openai: malformed chat-completions response from {url}: choices[0].message is "
            f"a {type(message).__name__}, not an object: {snippet(data)!r}"
        )
    usage = body.get("usage")
    content = message.get("content")
    if isinstance(content, str):
        return content, usage
    if content is None:
        return "", usage  # e.g. a tool-calling turn with no text
    if isinstance(content, list):
        texts = [p.get("text", "") if isinstance(p, dict) else p for p in content]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts), usage
        raise PolicyError(
            f"openai: malformed chat-completions response from {url}: a part of "
            f"choices[0].message.content has no text string: {snippet(data)!r}"
        )
    raise PolicyError(
        f"openai: choices[0].message.content from {url} is a "
        f"{type(content).__name__}, expected a string"
    )


def status_error(url: str, key_env: str | None, status: int, data: bytes) -> PolicyError:
    """The error for a status that is not retried, with a hint at what to check."""
    hint = ""
    if status in (401, 403):
        hint = (
            f"; check the API key in ${key_env}"
            if key_env
            else f"; no API key was sent (set ${DEFAULT_KEY_ENV} or --policy-option "
            "api_key_env=VAR)"
        )
    elif status == 404:
        hint = "; check base_url (it usually ends in /v1) and the model name"
    return PolicyError(f"openai: HTTP {status} from {url}: {snippet(data)!r}{hint}")


# -- accounting ---------------------------------------------------------------


class EpisodeUsage:
    """One episode's request parameters and accounting (per turn, and totals kept as it goes)."""

    __slots__ = ("completion_tokens", "latency_s", "params", "prompt_tokens", "turns")

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.turns: list[dict[str, Any]] = []
        self.prompt_tokens: int | None = None  # None until the server reports a count
        self.completion_tokens: int | None = None
        self.latency_s = 0.0

    def count(self, usage: Any, latency: float) -> None:
        """Keep one turn's figures: the server's ``usage`` block and the request's latency."""
        prompt = completion = None
        if type(usage) is dict:  # counts the summary would not take are not kept either
            prompt = token_count(usage.get("prompt_tokens"))
            if prompt is not None:
                self.prompt_tokens = (self.prompt_tokens or 0) + prompt
            completion = token_count(usage.get("completion_tokens"))
            if completion is not None:
                self.completion_tokens = (self.completion_tokens or 0) + completion
        self.latency_s += latency
        self.turns.append(
            {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "latency_s": round(latency, 6),
            }
        )

    def as_dict(self) -> dict[str, Any] | None:
        """Token totals, request time and each turn's figures; ``None`` before any turn."""
        if not self.turns:
            return None
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 6),
            "turns": self.turns,
        }


# -- the client ---------------------------------------------------------------

_perf_counter = time.perf_counter


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
            except ResponseTooLarge as exc:
                raise PolicyError(f"openai: {self.url}: {exc}") from exc
            else:
                latency = _perf_counter() - started
                status, data = response.status, response.body
                if status == 200:
                    text, usage = parse_reply(self.url, status, data)
                    return text, usage, latency
                if status != 429 and status < 500:
                    raise status_error(self.url, self._key_env, status, data)
                last = f"HTTP {status}: {snippet(data)!r}"
                retry_after = read_retry_after(response)
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


# -- the policy ---------------------------------------------------------------


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
        check_limits(model, concurrency, retries, seed, timeout, backoff, extra_body, max_backoff)
        endpoint = Endpoint(base_url)
        headers, key_env = credentials(api_key_env)
        self.model = model
        self.url = endpoint.url
        self.seed = seed
        self.extra_body = dict(extra_body or {})
        self.params = request_params(temperature, top_p, max_tokens, stop, seed, self.extra_body)
        retry = Retries(retries, backoff, max_backoff)
        self._client = ChatClient(
            endpoint, headers, key_env, concurrency=concurrency, timeout=timeout, retries=retry
        )

    @property
    def max_in_flight(self) -> int:
        """The most requests in flight at any moment of this policy's life (the run summary's)."""
        return self._client.max_in_flight

    # -- per episode ----------------------------------------------------------------

    def start(self, sample: Mapping[str, Any], repeat: int = 0) -> EpisodeUsage:
        """Per-episode state: the request parameters (with this repeat's seed)."""
        params = self.params
        if repeat and self.seed is not None and "seed" not in self.extra_body:
            params = {**params, "seed": self.seed + repeat}
        return EpisodeUsage(params)

    def usage(self, state: Any) -> dict[str, Any] | None:
        """The episode's accounting: token totals, request time, and each turn's figures.

        A total is ``None`` when the server reported that count for no turn.
        """
        return state.as_dict() if state.__class__ is EpisodeUsage else None

    # -- the policy -------------------------------------------------------------

    async def reply(self, state: Any, messages: list[dict[str, Any]]) -> str:
        episode = state if state.__class__ is EpisodeUsage else None
        params = self.params if episode is None else episode.params
        text, usage, latency = await self._client.send(encode_request(self.model, messages, params))
        if episode is not None:
            episode.count(usage, latency)
        return text

    async def aclose(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"<OpenAIPolicy {self.model!r} at {self.url}>"
