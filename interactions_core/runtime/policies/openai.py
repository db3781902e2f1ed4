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

The parts: ``_openai_options.py`` checks the options, ``_openai_wire.py`` knows
the request and response format, ``_openai_client.py`` sends (connections, caps,
retries) and ``_openai_usage.py`` keeps each episode's accounting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._openai_client import ChatClient, Retries
from ._openai_options import Endpoint, check_limits, credentials, request_params
from ._openai_usage import EpisodeUsage
from ._openai_wire import encode_request
from .base import Policy

__all__ = ["OpenAIPolicy"]


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
        check_limits(model, concurrency, retries, seed, timeout, backoff, extra_body)
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
