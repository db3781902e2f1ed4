"""The baseline: a minimal GSM8K interaction written the way verl writes one.

It follows verl's ``Gsm8kInteraction`` line for line in structure -- its own
``instance_id -> dict`` mapping, the last assistant message found by a reverse
scan, ``calculate_score`` awaited from ``generate_response``, plain tuples and a
fresh ``{}`` as results -- with verl's scoring (last ``#### <number>`` in the
last 300 characters, commas removed). It is deliberately *lean*: the regular
expression is compiled once (verl passes the pattern string to ``re.findall``
on every call) and nothing is validated, so it is the fastest honest version of
"the same work, no framework".
"""

from __future__ import annotations

import re
from typing import Any

_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


def _compute_score(solution: str, ground_truth: str) -> float:
    if len(solution) > 300:
        solution = solution[-300:]
    found = _STRICT.findall(solution)
    if not found:
        return 0.0
    return 1.0 if found[-1].replace(",", "").replace("$", "") == ground_truth else 0.0


class VerlStyleGsm8k:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.name = config.get("name", "gsm8k")
        self._instance_dict: dict[str, dict[str, Any]] = {}

    async def start_interaction(
        self, instance_id: str | None = None, ground_truth: Any = None, **kwargs: Any
    ) -> str:
        self._instance_dict[instance_id] = {  # type: ignore[index]
            "response": "",
            "ground_truth": ground_truth,
            "reward": 0.0,
        }
        return instance_id  # type: ignore[return-value]

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        content = ""
        for i in range(len(messages) - 1, -1, -1):
            item = messages[i]
            if item.get("role") == "assistant":
                content = item.get("content")
                break
        self._instance_dict[instance_id]["response"] = content
        reward = await self.calculate_score(instance_id)
        if reward == 1.0:
            return True, "Your response is correct!", 1.0, {}
        return (
            False,
            "Your response is incorrect! You need to reflect on your answer and try again.",
            0.0,
            {},
        )

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        state = self._instance_dict[instance_id]
        return _compute_score(state["response"], state["ground_truth"])

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        del self._instance_dict[instance_id]
