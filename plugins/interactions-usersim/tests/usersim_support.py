"""Scripts for the scripted server: customer-support users, a judge, an assistant.

The simulated user of each goal says its scripted lines in order, one per
assistant turn, the last ending with the end marker. The judge gives 9 to a
conversation in which the assistant wrote "refund", else 3; the per-turn judge
gives 7. The assistant model (for the ``openai`` policy) answers "Refund issued
for order <n>." once it has heard an order number, else asks for one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

END = "###END###"

GOALS = {
    "Get a refund for order 1234, which arrived broken.": [
        "It is order 1234.",
        f"Great, thank you! {END}",
    ],
    "Find out when the store opens on Sunday.": [
        "I mean the store on Main Street.",
        "Still not what I asked.",
        "Never mind.",
    ],
}
REFUND_GOAL, HOURS_GOAL = GOALS


def goal_of(system: str) -> str:
    """The goal written in the simulator's system prompt."""
    for goal in GOALS:
        if goal in system:
            return goal
    raise AssertionError(f"no known goal in the system prompt: {system!r}")


def script(body: dict[str, Any]) -> str:
    """Plays every model: ``sim``/``user-sim`` (users), ``judge``, ``assistant``."""
    messages = body["messages"]
    model = body["model"]
    if model in ("sim", "user-sim"):
        lines = GOALS[goal_of(messages[0]["content"])]
        said = sum(1 for m in messages if m["role"] == "assistant")  # the user's own lines
        return lines[min(said - 1, len(lines) - 1)]
    if model == "judge":
        prompt = messages[-1]["content"]
        if "Grade only the assistant's last reply" in prompt:
            return "The reply is polite.\nSCORE: 7"
        assistant_said = re.findall(r"^ASSISTANT: (.*)$", prompt, re.M)
        return "SCORE: 9" if any("Refund" in s for s in assistant_said) else "SCORE: 3"
    if model == "assistant":
        heard = " ".join(m["content"] for m in messages if m["role"] == "user")
        number = re.search(r"It is order (\d+)", heard)
        if number:
            return f"Refund issued for order {number.group(1)}."
        return "Could you give me your order number?"
    raise AssertionError(f"unexpected model {model!r}")


def samples(n: int = 2) -> list[dict[str, Any]]:
    """``n`` samples alternating the two goals, each with replies for the replay policy."""
    rows = []
    for i in range(n):
        goal = list(GOALS)[i % 2]
        rows.append(
            {
                "id": f"s{i}",
                "prompt": [{"role": "user", "content": "Hi, I need help with something."}],
                "responses": [f"How can I help? (attempt {t})" for t in range(1, 6)],
                "extra_info": {
                    "interaction_kwargs": {
                        "name": "support",
                        "goal": goal,
                        "rubric": "9-10 when a refund is issued, 0-3 when the goal is unmet.",
                    }
                },
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def config_text(url: str, **options: Any) -> str:
    """A run config naming the usersim interaction ``support`` against ``url``."""
    settings = {"base_url": url, "model": "sim", "judge_model": "judge", "max_turns": 4}
    settings.update(options)
    lines = ["interaction:", "  - name: support", "    plugin: usersim", "    config:"]
    lines += [f"      {k}: {json.dumps(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def refund_scorer(messages: list[dict[str, Any]], fields: dict[str, Any]) -> float:
    """A scorer in code: 1.0 once the assistant issued a refund, else 0.0."""
    assert "goal" in fields
    issued = any("Refund" in m["content"] for m in messages if m["role"] == "assistant")
    return 1.0 if issued else 0.0


async def out_of_range_scorer(messages: list[dict[str, Any]], fields: dict[str, Any]) -> float:
    return 7.0
