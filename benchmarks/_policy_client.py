"""The openai policy alone: the baseline's workers, with ``OpenAIPolicy.reply`` as the client.

    python benchmarks/_policy_client.py DATA.jsonl URL CONCURRENCY

Same shape and output as ``_bare_client.py`` (``{"elapsed_s", "requests"}``),
but each request goes through the policy (``start``, ``reply``, ``usage``), so
the policy's HTTP client can be compared with the bare one without the rest of
the runtime (rows checked, episodes, interactions, records, summary).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from interactions_core.runtime.policies.openai import OpenAIPolicy


async def main(data: str, url: str, concurrency: int) -> dict[str, float]:
    policy = OpenAIPolicy(model="bench", base_url=url)
    started = time.perf_counter()
    with open(data, encoding="utf-8") as lines:
        rows = iter(lines)
        done = 0

        async def worker() -> None:
            nonlocal done
            for line in rows:
                state = policy.start({})
                reply = await policy.reply(state, json.loads(line)["prompt"])
                assert isinstance(reply, str) and policy.usage(state) is not None
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await policy.aclose()
    return {"elapsed_s": elapsed, "requests": done}


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    sys.stdout.write(json.dumps(result) + "\n")
