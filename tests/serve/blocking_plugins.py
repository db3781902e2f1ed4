"""An interaction whose step makes a synchronous call, holding the server's event loop."""

from __future__ import annotations

import time
from typing import Any

from interactions_core._interaction import BaseInteraction, InteractionResult

#: Seconds a blocking step sleeps: far longer than any test waits for an answer.
BLOCK_FOR = 30.0


class Blocking(BaseInteraction):
    """Answers at once, except to ``"block"``: then ``time.sleep`` holds the loop."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        if messages[-1]["content"] == "block":
            time.sleep(BLOCK_FOR)
        return InteractionResult(False, "go on", 0.0)
