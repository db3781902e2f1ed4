"""A chat-completions server on 127.0.0.1 that answers every request after a fixed delay.

    python benchmarks/_chat_server.py [--latency 0.05] [--answer "#### 42"]

Prints its port on the first line of stdout, then serves until killed. It
stands in for a vLLM server whose generation takes exactly ``--latency``
seconds: it reads each request whole (HTTP/1.1, keep-alive, ``Content-Length``
bodies), sleeps, and sends one fixed OpenAI-shaped completion with a ``usage``
block. It does no JSON work per request, so it costs both compared clients the
same and as little as possible; it runs in its own process so it never competes
with the client for the interpreter lock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

PROMPT_TOKENS = 120
COMPLETION_TOKENS = 8


def response_bytes(answer: str) -> bytes:
    body = json.dumps(
        {
            "id": "bench",
            "object": "chat.completion",
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
            },
        }
    ).encode()
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


async def serve(latency: float, answer: str) -> None:
    reply = response_bytes(answer)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                await asyncio.sleep(latency)
                writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--answer", default="The answer is 42.\n#### 42")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.latency, args.answer))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
