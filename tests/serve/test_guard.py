"""The server's front door as a plain ASGI wrapper: refusals, their log, idle connections."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from interactions_core.serve.guard import Guard


async def _app(scope: Any, receive: Any, send: Any) -> None:
    message = await receive()
    await send({"type": "echo", "message": message})


def _scope(kind: str, **headers: str) -> dict[str, Any]:
    return {
        "type": kind,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


def _call(guard: Guard, scope: dict[str, Any], receive: Any = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def never() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {}

    asyncio.run(guard(scope, receive or never, send))
    return sent


def test_a_flood_of_refusals_logs_one_line(caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard(_app)
    caplog.set_level(logging.WARNING, "interactions_core.serve")
    for _ in range(1000):
        sent = _call(guard, _scope("http", Host="127.0.0.1:1", Origin="https://evil.example"))
        assert sent[0]["status"] == 403
    assert b"is not allowed" in sent[1]["body"]
    assert len(caplog.records) == 1


def test_a_server_bound_elsewhere_does_not_check_host() -> None:
    guard = Guard(_app, bind_host="0.0.0.0")
    assert guard.refusal(_scope("http", Host="example.org:8000")) is None
    assert Guard(_app).refusal(_scope("http", Host="example.org:8000")) is not None
    assert Guard(_app).refusal(_scope("http", Host="[::1]:8000")) is None


def test_an_idle_websocket_is_reported_gone() -> None:
    guard = Guard(_app, idle_timeout=0.05)
    sent = _call(guard, _scope("websocket", Host="localhost"))
    assert sent == [{"type": "echo", "message": {"type": "websocket.disconnect", "code": 1001}}]
    assert guard.connections == 0


def test_connections_over_the_limit_are_refused_at_the_handshake() -> None:
    guard = Guard(_app, max_connections=1)
    guard.connections = 1
    sent = _call(guard, _scope("websocket", Host="127.0.0.1"))
    assert sent[0]["type"] == "websocket.close"
    assert "too many connections" in sent[0]["reason"]
