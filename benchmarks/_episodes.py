"""Shared by the runtime benchmarks: a GSM8K replay sample and a hand-written episode.

:func:`direct_episode` is what a trainer does without the runtime: verl's
episode semantics (copy the prompt, append each reply, judge it, append the
feedback, final score, finalize) written straight against the interaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

WRONG_REPLY = "She sold 48 + 48 = 96 clips.\n#### 96"
RIGHT_REPLY = "In May she sold 48 / 2 = 24, so 48 + 24 = 72.\n#### 72"

SAMPLE: dict[str, Any] = {
    "prompt": [{"role": "user", "content": "Natalia sold clips to 48 of her friends..."}],
    "responses": [WRONG_REPLY, RIGHT_REPLY],
    "interaction_kwargs": {"name": "gsm8k", "ground_truth": "72"},
}


async def direct_episode(
    interaction: Any,
    sample: dict[str, Any],
    instance_id: str,
    *,
    pause: Callable[[], Awaitable[None]] | None = None,
) -> float:
    """Play ``sample`` on ``interaction``; ``pause()`` is awaited before each reply (the model)."""
    kwargs = dict(sample["interaction_kwargs"])
    messages = list(sample["prompt"])
    await interaction.start_interaction(instance_id, **kwargs)
    try:
        scores = []
        for text in sample["responses"]:
            if pause is not None:
                await pause()
            messages.append({"role": "assistant", "content": text})
            # verl's unpacking: works for a plain tuple and an InteractionResult alike.
            done, content, score, _ = await interaction.generate_response(
                instance_id, messages, **kwargs
            )
            scores.append(score)
            if done:
                break
            messages.append({"role": "user", "content": content})
        final: float = await interaction.calculate_score(instance_id, **kwargs)
    finally:
        await interaction.finalize_interaction(instance_id)
    return final
