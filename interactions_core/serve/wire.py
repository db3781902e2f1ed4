"""What goes over the wire: an observation every client can decode, or a readable error.

An observation is sent as UTF-8 JSON, which cannot carry a lone surrogate
(``"\\ud800"``, valid in a Python string and in ``json.loads`` input). Such a
character in the prompt, the feedback or a message is replaced by its escape,
the six characters ``\\ud800`` (the rule ``backslashreplace`` applies when
encoding UTF-8), so the episode goes on and its reward and score arrive.

An observation that still cannot be serialised (nesting too deep for the
serialiser) ends its episode, finalizing the session so it no longer counts
against ``--max-sessions``, and the client gets an error saying why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ServeError

__all__ = ["escape_surrogates", "sendable"]


def escape_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings written as ``\\udXXX``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_surrogates(item) for item in value]
    return value


async def sendable(
    build: Callable[[dict[str, Any]], Any],
    fields: dict[str, Any],
    end: Callable[[], Awaitable[Any]],
) -> Any:
    """The observation ``build(fields)``, checked to serialise; else end the episode and say so."""
    try:
        observation = build(escape_surrogates(fields))
        observation.model_dump_json()
    except (RecursionError, ValueError) as exc:
        await end()
        raise ServeError(
            f"the observation cannot be sent as JSON ({type(exc).__name__}: "
            f"{str(exc)[:200]}); the episode is over and its session finalized. Keep prompts "
            "and feedback to plain, moderately nested chat messages, then call reset"
        ) from None
    return observation
