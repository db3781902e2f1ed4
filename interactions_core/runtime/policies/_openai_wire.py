"""What the ``openai`` policy sends and reads: the request body and the reply in a response.

Kept apart from the sending (``_openai_client.py``) so the rules of the format
are in one place: what a reply's text is (a string, ``null`` for a turn with no
text, or a list of content parts), which answers are malformed, and what an
HTTP failure tells the user to check.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import PolicyError
from ._openai_options import DEFAULT_KEY_ENV

__all__ = ["encode_request", "parse_reply", "snippet", "status_error"]

# One encoder for every request: json.dumps(..., ensure_ascii=False) builds a new one per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode


def encode_request(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> bytes:
    """The JSON body of one chat-completions request."""
    return _encode({"model": model, "messages": messages, **params}).encode("utf-8")


def snippet(data: bytes, limit: int = 200) -> str:
    """The start of a response body, for an error message."""
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_reply(url: str, status: int, data: bytes) -> tuple[str, Any]:
    """``(text, usage)`` of a successful response; :class:`PolicyError` when it is malformed."""
    try:
        body = json.loads(data)
    except ValueError:
        raise PolicyError(
            f"openai: {url} answered HTTP {status} with a body that is not JSON: {snippet(data)!r}"
        ) from None
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        detail = body.get("error") if isinstance(body, dict) else None
        hint = f" (error: {detail})" if detail else ""
        raise PolicyError(
            f"openai: malformed chat-completions response from {url}{hint}: "
            f"no choices[0].message in {snippet(data)!r}"
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
