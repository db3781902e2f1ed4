"""The baseline of ``bench_usersim.py``: the same user-simulator episodes, by hand.

    python benchmarks/_usersim_bare.py DATA.jsonl URL CONCURRENCY TURNS

What a capable engineer writes with no framework: ``CONCURRENCY`` asyncio
workers, each with one kept-alive connection, take the samples in turn and play
each episode's requests in order: the assistant's reply, then (before the last
turn) the simulated user's reply to the conversation with roles swapped, and
after the last turn one judge request on the transcript, whose ``SCORE: n`` is
read. The prompts are the plugin's default templates, so the bytes sent match.
Prints ``{"elapsed_s", "requests"}`` as JSON, the figure compared with
``interactions run``'s ``elapsed_s``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from typing import Any

from _bare_client import endpoint
from interactions_usersim.config import (
    DEFAULT_CONVERSATION_JUDGE_TEMPLATE,
    DEFAULT_END_MARKER,
    DEFAULT_SYSTEM_TEMPLATE,
)

SCORE = re.compile(r"score\s*:\s*(\d+(?:\.\d+)?)", re.I)
PERSONA = "an ordinary user of this service"
RUBRIC = "Full marks when the assistant fully achieved the user's goal, none when it did not."


async def main(data: str, url: str, concurrency: int, turns: int) -> dict[str, float]:
    host, port, head = endpoint(url)
    started = time.perf_counter()
    with open(data, encoding="utf-8") as lines:
        rows = iter(lines)
        done = 0

        async def worker() -> None:
            nonlocal done
            reader, writer = await asyncio.open_connection(host, port)

            async def post(model: str, messages: list[dict[str, Any]]) -> str:
                nonlocal done
                body = json.dumps({"model": model, "messages": messages}).encode()
                writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
                response_head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for header in response_head.split(b"\r\n"):
                    if header[:15].lower() == b"content-length:":
                        length = int(header[15:])
                reply = json.loads(await reader.readexactly(length))
                done += 1
                return str(reply["choices"][0]["message"]["content"])

            try:
                for line in rows:
                    sample = json.loads(line)
                    goal = sample["interaction_kwargs"]["goal"]
                    messages = list(sample["prompt"])
                    for turn in range(1, turns + 1):
                        messages.append(
                            {"role": "assistant", "content": await post("bench", messages)}
                        )
                        if turn < turns:
                            system = DEFAULT_SYSTEM_TEMPLATE.format(
                                goal=goal, persona=PERSONA, end_marker=DEFAULT_END_MARKER
                            )
                            swapped = [{"role": "system", "content": system}]
                            swapped += [
                                {
                                    "role": "assistant" if m["role"] == "user" else "user",
                                    "content": m["content"],
                                }
                                for m in messages
                            ]
                            messages.append(
                                {"role": "user", "content": await post("bench", swapped)}
                            )
                    transcript = "\n\n".join(
                        f"{m['role'].upper()}: {m['content']}" for m in messages
                    )
                    prompt = DEFAULT_CONVERSATION_JUDGE_TEMPLATE.format(
                        goal=goal, rubric=RUBRIC, scale=10, transcript=transcript
                    )
                    verdict = await post("bench", [{"role": "user", "content": prompt}])
                    found = SCORE.findall(verdict)
                    assert found and 0 <= float(found[-1]) <= 10, verdict
            finally:
                writer.close()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"elapsed_s": time.perf_counter() - started, "requests": done}


if __name__ == "__main__":
    data, url, concurrency, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(asyncio.run(main(data, url, concurrency, turns))))
