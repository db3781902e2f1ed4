"""A scripted OpenAI-compatible chat server on 127.0.0.1 for the usersim tests.

It plays whatever the test scripts: ``script(body)`` gets each request's JSON
body and returns the reply text, so one server can play the simulated users, the
judges and the assistant, told apart by ``model``. It records every request it
was sent (``requests``) and reports ``usage`` on every reply (prompt tokens =
characters sent // 4, completion tokens = characters replied // 4), so a test
can check the accounting against what it served.

Faults on demand, drawn from a seeded generator: ``fail_rate`` of requests get
HTTP 503, ``drop_rate`` of connections are closed after the request is read and
before any answer. The server runs its own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Callable
from typing import Any

Script = Callable[[dict[str, Any]], str]


def usage_for(body: dict[str, Any], reply: str) -> dict[str, int]:
    """The token counts the server reports for one exchange."""
    sent = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    prompt, completion = sent // 4, len(reply) // 4
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _response(status: int, payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload).encode()
    reason = {200: "OK", 503: "Service Unavailable"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


class ScriptedServer:
    """Answers ``POST .../chat/completions`` with ``script(body)``; see the module docstring."""

    def __init__(
        self,
        script: Script,
        *,
        latency: float = 0.0,
        fail_rate: float = 0.0,
        drop_rate: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.script = script
        self.latency = latency
        self.fail_rate = fail_rate
        self.drop_rate = drop_rate
        self.random = random.Random(seed)
        self.requests: list[dict[str, Any]] = []
        self.served: list[tuple[dict[str, Any], str]] = []  # answered with 200
        self.failed = 0
        self.dropped = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._server = server
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = json.loads(await reader.readexactly(length))
                self.requests.append(body)
                if self.latency:
                    await asyncio.sleep(self.latency)
                draw = self.random.random()
                if draw < self.drop_rate:
                    self.dropped += 1
                    writer.transport.abort()
                    return
                if draw < self.drop_rate + self.fail_rate:
                    self.failed += 1
                    writer.write(_response(503, {"error": "overloaded, try again"}))
                    continue
                writer.write(self._answer(body))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, body: dict[str, Any]) -> bytes:
        reply = self.script(body)
        usage = usage_for(body, reply)
        self.prompt_tokens += usage["prompt_tokens"]
        self.completion_tokens += usage["completion_tokens"]
        self.served.append((body, reply))
        message = {"role": "assistant", "content": reply}
        return _response(
            200,
            {
                "id": "scripted",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            },
        )

    def by_model(self, model: str) -> list[dict[str, Any]]:
        """The requests sent for ``model``, in arrival order."""
        return [r for r in self.requests if r.get("model") == model]

    def close(self) -> None:
        """Stop serving: close the listener and every open connection, then the loop."""
        if self._loop.is_closed():
            return

        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
