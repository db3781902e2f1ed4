"""The baseline: the same chat-completions requests sent by a bare asyncio HTTP client.

    python benchmarks/_bare_client.py DATA.jsonl URL CONCURRENCY

What a capable engineer writes by hand with no framework: ``CONCURRENCY``
workers, each holding one keep-alive connection (asyncio streams), take the
samples of ``DATA.jsonl`` in turn, post ``{"model", "messages": prompt}`` and
read ``choices[0].message.content``. No scoring, no records. Prints the
seconds from reading the first sample to the last response as JSON
(``{"elapsed_s": ..., "requests": ...}``), the figure compared with the
``elapsed_s`` of ``interactions run --json``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.parse


def endpoint(url: str) -> tuple[str, int, bytes]:
    """Host, port and the request head (up to the body's length) of ``url``'s chat route."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path.rstrip("/") + "/chat/completions"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    return parts.hostname or "127.0.0.1", parts.port or 80, head


async def main(data: str, url: str, concurrency: int) -> dict[str, float]:
    host, port, head = endpoint(url)
    started = time.perf_counter()
    with open(data, encoding="utf-8") as lines:
        rows = iter(lines)
        done = 0

        async def worker() -> None:
            nonlocal done
            reader, writer = await asyncio.open_connection(host, port)
            try:
                for line in rows:
                    body = json.dumps(
                        {"model": "bench", "messages": json.loads(line)["prompt"]}
                    ).encode()
                    writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
                    response_head = await reader.readuntil(b"\r\n\r\n")
                    length = 0
                    for header in response_head.split(b"\r\n"):
                        if header[:15].lower() == b"content-length:":
                            length = int(header[15:])
                    reply = json.loads(await reader.readexactly(length))
                    assert isinstance(reply["choices"][0]["message"]["content"], str)
                    done += 1
            finally:
                writer.close()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"elapsed_s": time.perf_counter() - started, "requests": done}


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    sys.stdout.write(json.dumps(result) + "\n")
