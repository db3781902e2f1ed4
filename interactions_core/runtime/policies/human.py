"""``human``: you type the assistant's replies, to debug an interaction by hand.

The conversation so far is shown (the prompt at the first turn, then each
feedback message); a line you type is the assistant's reply. A line ending in
a backslash continues on the next line. An empty line, ``/end`` or end of input
(Ctrl-D) ends the episode as ``exhausted``. Episodes run one at a time.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

from .base import Policy

__all__ = ["HumanPolicy"]


class HumanPolicy(Policy):
    """Reads replies from a terminal (or any text stream, for tests)."""

    name = "human"
    max_concurrency = 1
    interactive = True

    def __init__(
        self,
        *,
        prompt: str = "assistant> ",
        input: TextIO | None = None,
        output: TextIO | None = None,
    ) -> None:
        self.prompt = prompt
        self.input = input
        self.output = output

    def start(self, sample: Mapping[str, Any]) -> list[int]:
        return [0]  # how many messages have been shown so far

    def _read(self, messages: list[dict[str, Any]], shown: list[int]) -> str | None:
        out = self.output or sys.stderr
        inp = self.input or sys.stdin
        for message in messages[shown[0] :]:
            content = message.get("content")
            text = content if isinstance(content, str) else repr(content)
            out.write(f"[{message.get('role', '?')}] {text}\n")
        shown[0] = len(messages) + 1  # the reply typed now is not shown again
        lines: list[str] = []
        out.write(self.prompt)
        out.flush()
        while True:
            line = inp.readline()
            if not line:  # end of input
                if lines:
                    break
                out.write("\n")
                return None
            line = line.rstrip("\r\n")
            if line.endswith("\\"):
                lines.append(line[:-1])
                out.write("... ")
                out.flush()
                continue
            lines.append(line)
            break
        text = "\n".join(lines)
        if not text.strip() or text.strip() == "/end":
            return None
        return text

    async def reply(self, state: list[int], messages: list[dict[str, Any]]) -> str | None:
        # A daemon thread rather than the loop's executor: a read blocked on the
        # terminal must not keep the process alive after Ctrl-C.
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def settle(value: str | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def work() -> None:
            value: str | None = None
            error: BaseException | None = None
            try:
                value = self._read(messages, state)
            except BaseException as exc:
                error = exc
            try:
                loop.call_soon_threadsafe(settle, value, error)
            except RuntimeError:  # the loop is gone (the run was interrupted)
                pass

        threading.Thread(target=work, name="human-policy", daemon=True).start()
        return await future
