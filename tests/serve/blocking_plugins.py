"""An interaction whose step makes a synchronous call, holding the server's event loop."""

from __future__ import annotations

import time
from typing import Any

from interactions_core._interaction import BaseInteraction, InteractionResult

#: Seconds a blocking step sleeps: far longer than any test waits for an answer.
BLOCK_FOR = 30.0


class Blocking(BaseInteraction):
    """Answers at once, except to ``"block"``: then ``time.sleep`` holds the loop; and to
    ``"swallow"``: then it holds the loop for ever, swallowing whatever is raised."""

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        if messages[-1]["content"] == "block":
            time.sleep(BLOCK_FOR)
        if messages[-1]["content"] == "swallow":  # a retry loop with a bare except
            while True:
                try:
                    time.sleep(0.2)
                except:  # noqa: E722 - the point of this step
                    pass
        return InteractionResult(False, "go on", 0.0)
