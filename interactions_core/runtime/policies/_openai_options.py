"""The ``openai`` policy's options, checked once, when the policy is built.

A bad option must fail the run before the first episode, with a message naming
the option and what it accepts, not as an HTTP error on every episode. This
module turns the constructor's keyword options into what the client needs: the
endpoint (``base_url`` read and completed with ``/chat/completions``), the
request headers (the API key read from the environment), and the parameters
sent with every request.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_KEY_ENV", "Endpoint", "check_limits", "credentials", "request_params"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def check_limits(
    model: str,
    concurrency: int | None,
    retries: int,
    seed: int | None,
    timeout: float,
    backoff: float,
    extra_body: Mapping[str, Any] | None,
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
    for label, value in (("timeout", timeout), ("backoff", backoff)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
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
