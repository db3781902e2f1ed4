"""Where the simulator's and the judge's replies come from: live endpoints or a recording.

Every reply is asked for by *what* it is: the call (``simulator``, ``turn_judge``
or ``judge``), the sample's goal and the assistant turn it follows. A live
backend sends the prompt to an OpenAI-compatible endpoint through the project's
own keep-alive client (retries on 429/5xx and dropped connections with backoff,
``HTTPS_PROXY``, timeouts) and can append each reply to a recording; a replay
backend answers from such a recording, so a test pins an episode without any
server. Both hand back the reply's text and its accounting (tokens as the server
reported them, latency), ``None`` when there was no request.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from interactions_core.runtime import PolicyError
from interactions_core.runtime.policies.http import Retries
from interactions_core.runtime.policies.openai import ChatClient, Endpoint

__all__ = [
    "CALLS",
    "Backend",
    "LiveBackend",
    "ModelCallError",
    "ReplayBackend",
    "client_for",
]

#: The calls a session makes, the names records and recordings use.
CALLS = ("simulator", "turn_judge", "judge")

Reply = tuple[str, "dict[str, Any] | None"]


class ModelCallError(RuntimeError):
    """A simulator or judge call failed; the message names the call, turn and endpoint."""


class Backend(Protocol):
    """Answers one call of one session."""

    async def ask(
        self, call: str, goal: str, turn: int, messages: list[dict[str, Any]]
    ) -> Reply: ...

    def close(self) -> None: ...


def _headers(api_key_env: str | None) -> tuple[dict[str, str], str | None]:
    """Request headers; a named key variable that is not set is an error now, not per request."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key_env is None:
        return headers, None
    key = os.environ.get(api_key_env)
    if not key:
        raise ValueError(
            f"usersim: api_key_env names ${api_key_env}, which is not set; "
            "export it or leave api_key_env out for an endpoint without a key"
        )
    headers["Authorization"] = f"Bearer {key}"
    return headers, api_key_env


def client_for(
    base_url: str,
    api_key_env: str | None,
    *,
    max_in_flight: int | None,
    timeout: float,
    retries: int,
    backoff: float,
) -> ChatClient:
    """A keep-alive chat-completions client for one endpoint (the ``openai`` policy's own)."""
    headers, key_env = _headers(api_key_env)
    return ChatClient(
        Endpoint(base_url),
        headers,
        key_env,
        concurrency=max_in_flight,
        timeout=timeout,
        retries=Retries(retries, backoff, 30.0),
    )


_encode = json.JSONEncoder(ensure_ascii=False).encode


class LiveBackend:
    """Sends each call to its endpoint: the simulator's, or the judge's (which may be the same).

    ``params`` maps each endpoint role (``simulator``, ``judge``) to its model
    and sampling parameters. With ``record_file``, every reply is appended there
    as one JSON line a :class:`ReplayBackend` reads back.
    """

    def __init__(
        self,
        simulator: ChatClient,
        judge: ChatClient,
        params: Mapping[str, dict[str, Any]],
        record_file: str | None = None,
    ) -> None:
        self._clients = {"simulator": simulator, "judge": judge}
        self._params = params
        self._record = Path(record_file) if record_file else None

    async def ask(self, call: str, goal: str, turn: int, messages: list[dict[str, Any]]) -> Reply:
        role = "simulator" if call == "simulator" else "judge"
        client = self._clients[role]
        body = _encode({"messages": messages, **self._params[role]}).encode("utf-8")
        try:
            text, usage, latency = await client.send(body)
        except PolicyError as exc:
            detail = str(exc).removeprefix("openai: ")
            raise ModelCallError(
                f"usersim: the {call} call after assistant turn {turn} failed: {detail}"
            ) from None
        if self._record is not None:
            self._write(call, goal, turn, text)
        return text, _accounting(usage, latency)

    def _write(self, call: str, goal: str, turn: int, text: str) -> None:
        line = _encode({"call": call, "goal": goal, "turn": turn, "reply": text})
        assert self._record is not None
        with self._record.open("a", encoding="utf-8") as out:
            out.write(line + "\n")  # one write per line: concurrent episodes never interleave

    def close(self) -> None:
        for client in {id(c): c for c in self._clients.values()}.values():
            client.close()


def _accounting(usage: Any, latency: float) -> dict[str, Any]:
    """One request's figures: the server's token counts (``None`` when not reported), latency."""
    prompt = completion = None
    if isinstance(usage, dict):
        prompt = usage.get("prompt_tokens") if type(usage.get("prompt_tokens")) is int else None
        value = usage.get("completion_tokens")
        completion = value if type(value) is int else None
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "latency_s": round(latency, 6),
    }


class ReplayBackend:
    """Answers from a recording: JSON lines ``{"call", "goal", "turn", "reply"}``.

    A line without ``turn`` answers that call for every turn of that goal (handy
    for a hand-written judge line). A call with no recorded reply is an error of
    its episode that says what to add.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._replies: dict[tuple[str, str, int | None], str] = {}
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ValueError(
                f"usersim: cannot read replay_file {path!r} ({exc.strerror or exc}); record one "
                "with mode: live and record_file, or write it by hand (see docs/usersim.md)"
            ) from None
        for number, line in enumerate(lines, 1):
            if line.strip():
                key, reply = _entry(path, number, line)
                self._replies[key] = reply

    async def ask(self, call: str, goal: str, turn: int, messages: list[dict[str, Any]]) -> Reply:
        replies = self._replies
        reply = replies.get((call, goal, turn))
        if reply is None:
            reply = replies.get((call, goal, None))
        if reply is None:
            raise ModelCallError(
                f"usersim: replay_file {self.path!r} has no {call} reply after assistant turn "
                f"{turn} for the goal {goal!r}; add a line "
                f'{{"call": "{call}", "goal": ..., "turn": {turn}, "reply": ...}}'
            )
        return reply, None

    def close(self) -> None:
        return None


def _entry(path: str, number: int, line: str) -> tuple[tuple[str, str, int | None], str]:
    """One recording line's key and reply; ``ValueError`` naming the line otherwise."""
    where = f"usersim: replay_file {path}:{number}"
    try:
        entry = json.loads(line)
    except ValueError:
        raise ValueError(f"{where} is not JSON") from None
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is not a JSON object")
    call, goal, turn, reply = (entry.get(k) for k in ("call", "goal", "turn", "reply"))
    if call not in CALLS:
        raise ValueError(f"{where}: call must be one of {', '.join(CALLS)}, not {call!r}")
    if not isinstance(goal, str) or not isinstance(reply, str):
        raise ValueError(f"{where}: goal and reply must be strings")
    if turn is not None and (type(turn) is not int or turn < 1):
        raise ValueError(f"{where}: turn must be a positive integer (or left out), not {turn!r}")
    return (call, goal, turn), reply
