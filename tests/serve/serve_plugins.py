"""Interactions for the server tests, loaded by the server through config ``class_name``.

Each writes one line per lifecycle event to the file named by its ``log`` option,
so a test can check from outside the server process which sessions were
started and finalized, even after the server has exited.
"""

from __future__ import annotations

import asyncio
from typing import Any

from interactions_core._interaction import BaseInteraction, InteractionResult


class Logged(BaseInteraction):
    """Terminates when the answer equals ``ground_truth``; logs every lifecycle call."""

    def _log(self, event: str, instance_id: str) -> None:
        path = self.config.get("log")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{event} {instance_id}\n")

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        instance_id = await super().start_interaction(instance_id, **kwargs)
        self._log("start", instance_id)
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        answer = messages[-1]["content"]
        if answer == "slow":
            await asyncio.sleep(float(self.config.get("slow", 1.0)))
        if answer == "boom":
            raise RuntimeError("the plugin exploded")
        right = answer == str(kwargs.get("ground_truth"))
        return InteractionResult(right, "right" if right else f"wrong: {answer}", float(right))

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        return 0.25

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        if self.config.get("finalize_wait"):  # closing a client, a sandbox: it awaits
            await asyncio.sleep(float(self.config["finalize_wait"]))
        self._log("finalize", instance_id)


class SlowStart(Logged):
    """Takes ``start`` seconds (config) to start a session, as one provisioning a sandbox."""

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        await asyncio.sleep(float(self.config.get("start", 1.5)))
        return await super().start_interaction(instance_id, **kwargs)


class Spawns(Logged):
    """Leaves a child process running, as a plugin starting a sandbox or a helper does."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        import subprocess

        subprocess.Popen(["sleep", str(self.config.get("child", 30))], close_fds=False)
        return await super().generate_response(instance_id, messages, **kwargs)
