"""An interaction whose step makes a synchronous call, holding the server's event loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from interactions_core._interaction import BaseInteraction, InteractionResult
from interactions_core.errors import InteractionCallError

#: Seconds a blocking step sleeps: far longer than any test waits for an answer.
BLOCK_FOR = 30.0


class SlowResult(tuple):  # type: ignore[type-arg]
    """A result whose unpacking (the runtime's check, after the call) holds the loop."""

    def __iter__(self) -> Any:
        time.sleep(BLOCK_FOR)
        return tuple.__iter__(self)


class SlowMessage(Exception):
    """An error whose message takes long to tell (the runtime reads it after the call)."""

    def __str__(self) -> str:
        time.sleep(BLOCK_FOR)
        return "slow"


class SlowDel:
    """What a ``start_interaction`` may return besides the id: dropped, it holds the loop."""

    def __del__(self) -> None:
        time.sleep(BLOCK_FOR)


class DelError(Exception):
    """An error whose own ``__del__`` holds the loop (one closing a resource it holds)."""

    def __del__(self) -> None:
        time.sleep(BLOCK_FOR)


class StopTellingCallError(InteractionCallError):
    """A plugin's own call error whose message raises a stop when asked for."""

    def __str__(self) -> str:
        raise KeyboardInterrupt("from __str__")


class SlowFloat(float):
    """A score that holds the loop when dropped."""

    def __del__(self) -> None:
        time.sleep(BLOCK_FOR)


class BadRepr:
    """An argument of a stop that cannot be shown."""

    def __repr__(self) -> str:
        raise ValueError("repr refuses")


class ArgsExit(SystemExit):
    """A stop whose arguments cannot be asked for (a property of its class raises)."""

    @property
    def args(self) -> Any:  # type: ignore[override]
        raise ValueError("args says no")


class SlowFormat(str):
    """Text whose formatting holds the loop: what a plugin's ``__str__`` may return."""

    def __format__(self, spec: str) -> str:
        time.sleep(BLOCK_FOR)
        return str.__str__(self)


class FormatSlow(Exception):
    """An error whose message, told at once, is a :class:`SlowFormat`."""

    def __str__(self) -> str:
        return SlowFormat("slow to format")


class DictProp(Exception):
    """An error whose ``__dict__`` is a property (nothing can be kept in it) and whose
    message takes long to tell the second time it is asked."""

    calls = 0

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        return {}

    def __str__(self) -> str:
        type(self).calls += 1
        if type(self).calls % 2 == 0:
            time.sleep(BLOCK_FOR)
        return "dictprop"


class ClassLookup(Exception):
    """An error whose class is slow to tell (``isinstance`` falls back to ``__class__``)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "__class__":
            time.sleep(BLOCK_FOR)
        return Exception.__getattribute__(self, name)


class Blocking(BaseInteraction):
    """Answers at once, except to these contents of the assistant's message:

    - ``"block"``: ``time.sleep`` holds the loop; ``"swallow"``: it holds the loop for
      ever, swallowing whatever is raised;
    - ``"slow result"``: it returns a :class:`SlowResult`; ``"slow message"``, ``"class
      lookup"``, ``"slow format"``, ``"dict prop"``: it raises a :class:`SlowMessage`,
      :class:`ClassLookup`, :class:`FormatSlow`, :class:`DictProp`;
    - ``"local del"``: an error while a local holds a :class:`SlowDel`; ``"stash del"``:
      it leaves a :class:`SlowDel` in its copy of the conversation; ``"final del"``: it
      ends the episode and its ``finalize_interaction`` returns a :class:`SlowDel`;
    - ``"exit task"``, ``"interrupt callback"``: a task or timer of its own raises
      ``SystemExit`` or ``KeyboardInterrupt`` 0.2 s later (``"exit odd"``: of an
      argument that cannot be shown; ``"exit args"``: whose arguments cannot be
      asked for; ``"storm"``: again and again for 2 s); ``"loop stop"``: a timer
      stops the loop; ``"thread"``: it awaits a thread blocking 300 s;
    - ``"await"``: it awaits 0.8 s, as a well-behaved judge does.

    - ``"error del"``: it raises a :class:`DelError`; ``"args del"``: an error whose
      argument is a :class:`SlowDel`; ``"short result"``: it returns three fields, the
      score a :class:`SlowFloat` (a wrong shape, told as its error).

    A reset with ``slow_del`` returns a :class:`SlowDel`; with ``error_del``, its
    ``start_interaction`` raises a :class:`DelError`; with ``box`` (a mapping), it keeps a
    :class:`SlowDel` in it; with ``finalize_error_del``, its finalize raises a
    :class:`DelError`; with ``finalize_raises``, a plain ``RuntimeError``; with
    ``start_sleep``, the start awaits that many seconds first.
    """

    async def start_interaction(
        self,
        instance_id: str | None = None,
        slow_del: bool = False,
        error_del: bool = False,
        finalize_error_del: bool = False,
        finalize_raises: bool = False,
        start_sleep: float = 0.0,
        ground_truth: str = "0",
        box: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if start_sleep:  # a start that awaits a slow service
            await asyncio.sleep(start_sleep)
        if box is not None:  # a resource kept in a nested kwarg, as a client cache may be
            box["held"] = SlowDel()
        if slow_del:
            return SlowDel()  # not the id: the runtime keeps the one it gave
        if error_del:
            raise DelError("no start")
        if not ground_truth.isdigit():  # a client's text echoed in an error
            raise ValueError(f"ground_truth must be digits, got {ground_truth}")
        instance_id = await super().start_interaction(instance_id, **kwargs)
        if finalize_error_del:
            self.finalize_error_del = instance_id
        if finalize_raises:
            self.finalize_raises = instance_id
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        if messages[-1]["content"] == "await":
            await asyncio.sleep(0.8)
        if messages[-1]["content"] == "slow message":
            raise SlowMessage()
        if messages[-1]["content"] == "dict prop":
            raise DictProp()
        if messages[-1]["content"] == "slow format":
            raise FormatSlow()
        if messages[-1]["content"] == "stash del":  # in its own copy of the conversation
            messages.append({"role": "note", "content": "", "held": SlowDel()})
        if messages[-1]["content"] == "exit task":  # a fire-and-forget upload failing so

            async def upload() -> None:
                await asyncio.sleep(0.2)
                raise SystemExit(3)

            self.task = asyncio.get_running_loop().create_task(upload())
        if messages[-1]["content"] == "exit odd":  # an argument that cannot be shown

            async def upload_odd() -> None:
                await asyncio.sleep(0.2)
                raise SystemExit(BadRepr())

            self.task = asyncio.get_running_loop().create_task(upload_odd())
        if messages[-1]["content"] == "exit args":

            async def upload_args() -> None:
                await asyncio.sleep(0.2)
                raise ArgsExit(3)

            self.task = asyncio.get_running_loop().create_task(upload_args())
        if messages[-1]["content"] == "loop stop":
            asyncio.get_running_loop().call_later(0.2, asyncio.get_running_loop().stop)
        if messages[-1]["content"] == "storm":  # a timer raising again and again for 2 s
            loop = asyncio.get_running_loop()
            end = loop.time() + 2

            def storm() -> None:
                if loop.time() < end:
                    loop.call_soon(storm)
                    raise KeyboardInterrupt("storm")

            loop.call_soon(storm)
        if messages[-1]["content"] == "thread":  # a blocking client, run as the docs advise
            await asyncio.to_thread(time.sleep, BLOCK_FOR * 10)
        if messages[-1]["content"] == "interrupt callback":

            def interrupt() -> None:
                raise KeyboardInterrupt("from a timer")

            asyncio.get_running_loop().call_later(0.2, interrupt)
        if messages[-1]["content"] == "final del":
            self.final_del = instance_id
            return InteractionResult(True, "bye", 1.0)
        if messages[-1]["content"] == "class lookup":
            raise ClassLookup("boom")
        if messages[-1]["content"] == "local del":
            held = SlowDel()  # dropped with this frame, which the error's traceback keeps
            raise ValueError(f"boom {id(held)}")
        if messages[-1]["content"] == "call error big":  # a delegating plugin's own
            raise InteractionCallError("other", "sess-x", "generate_response", "B" * 5_000_000)
        if messages[-1]["content"] == "call error stop":
            raise StopTellingCallError("other", "sess-x", "generate_response", "hidden")
        if not messages[-1]["content"].isascii():  # a client's text echoed in an error
            raise ValueError(f"cannot parse answer {messages[-1]['content']}")
        if messages[-1]["content"] == "error del":
            raise DelError("boom")
        if messages[-1]["content"] == "args del":
            raise ValueError(SlowDel())
        if messages[-1]["content"] == "short result":
            return (False, "go on", SlowFloat(0.0))  # type: ignore[return-value]
        if messages[-1]["content"] == "slow result":
            return SlowResult((False, "go on", 0.0, {}))  # type: ignore[return-value]
        if messages[-1]["content"] == "block":
            time.sleep(BLOCK_FOR)
        if messages[-1]["content"] == "swallow":  # a retry loop with a bare except
            while True:
                try:
                    time.sleep(0.2)
                except:  # noqa: E722 - the point of this step
                    pass
        return InteractionResult(False, "go on", 0.0)

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> Any:
        if getattr(self, "finalize_error_del", None) == instance_id:
            raise DelError("cleanup failed")
        if getattr(self, "finalize_raises", None) == instance_id:
            raise RuntimeError("cleanup failed plainly")
        if getattr(self, "final_del", None) == instance_id:
            return SlowDel()  # what the runtime drops: a result it never uses
        return None


class SlowLookup(BaseInteraction):
    """Looking its ``generate_response`` up holds the loop, once a reset armed it."""

    armed = False

    def __getattribute__(self, name: str) -> Any:
        if name == "generate_response" and object.__getattribute__(self, "armed"):
            time.sleep(BLOCK_FOR)
        return object.__getattribute__(self, name)

    async def start_interaction(
        self, instance_id: str | None = None, arm: bool = False, **kwargs: Any
    ) -> str:
        object.__setattr__(self, "armed", arm)
        return await super().start_interaction(instance_id, **kwargs)

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        return InteractionResult(False, "go on", 0.0)
