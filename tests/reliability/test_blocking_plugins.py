"""A plugin that blocks the event loop cannot defeat ``--timeout`` or Ctrl-C.

``time.sleep`` inside ``async def generate_response`` (what a synchronous HTTP
client or a long sympy call does) holds the loop; the run's watchdog names the
method, breaks the call when the timeout is up or the run is stopping, and the
summary says which plugin blocked and what to do about it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

BLOCKER = """
import sys
import time
from interactions_core import BaseInteraction, InteractionResult


class Blocker(BaseInteraction):
    async def start_interaction(self, instance_id=None, block=0, **kwargs):
        self.block = getattr(self, "block", {})
        self.block[instance_id] = block
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        seconds = self.block[instance_id]
        if seconds:
            sys.stderr.write("BLOCKING\\n")
            sys.stderr.flush()
            try:
                time.sleep(seconds)  # a synchronous call: the whole loop waits
            except Exception:
                pass  # a broad except must not swallow the watchdog's stop
        return InteractionResult(True, "fine", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0

    async def finalize_interaction(self, instance_id, **kwargs):
        self.block.pop(instance_id, None)
"""


@pytest.fixture
def blocker(make_dist, forget_modules, tmp_path: Path, site_dir: Path) -> dict[str, Any]:
    make_dist(
        "acme-block",
        "1.0",
        {"interactions_core.interactions": {"blocker": "acme_block:Blocker"}},
        {"acme_block": BLOCKER},
    )
    config = tmp_path / "config.yaml"
    config.write_text("interaction:\n  - name: blocker\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(site_dir),
        "INTERACTIONS_DISABLE": "interactions-reasoning-gym",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return {"config": config, "env": env, "tmp": tmp_path}


def data(tmp: Path, blocks: list[int]) -> Path:
    path = tmp / "data.jsonl"
    rows = [
        {
            "id": f"s{i}",
            "prompt": [{"role": "user", "content": "hi"}],
            "responses": ["4"],
            "extra_info": {"interaction_kwargs": {"name": "blocker", "block": b}},
        }
        for i, b in enumerate(blocks)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def start(blocker: dict[str, Any], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "interactions_core", "run", str(blocker["config"]), *args,
         "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=blocker["env"],
    )  # fmt: skip


def test_timeout_holds_against_a_plugin_that_blocks_the_loop(blocker: dict[str, Any]) -> None:
    path = data(blocker["tmp"], [0, 30, 0, 0])
    out = blocker["tmp"] / "records.jsonl"
    began = time.monotonic()
    proc = start(blocker, "--data", str(path), "--output", str(out), "--timeout", "1", "--json")
    stdout, stderr = proc.communicate(timeout=60)
    elapsed = time.monotonic() - began
    assert elapsed < 15, f"the 30 s block was not broken ({elapsed:.1f} s)"
    assert proc.returncode == 1, stderr
    summary = json.loads(stdout)
    assert summary["episodes"] == 4 and summary["errors"] == 1
    blocking = summary["blocking"]["acme_block.Blocker.generate_response"]
    assert blocking["times"] == 1 and 0.9 < blocking["longest_s"] < 15
    records = {r["sample_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    [error] = records["s1"]["errors"]
    assert error["where"] == "generate_response" and error["type"] == "LoopBlocked"
    assert "blocked the event loop" in error["message"]
    assert "acme_block.Blocker.generate_response blocked the event loop" in stderr
    assert "asyncio.to_thread" in stderr


def test_ctrl_c_holds_against_a_plugin_that_blocks_the_loop(blocker: dict[str, Any]) -> None:
    path = data(blocker["tmp"], [0, 0, 60, 60])
    proc = start(blocker, "--data", str(path), "--concurrency", "1")
    assert proc.stderr is not None
    while proc.stderr.readline().strip() != "BLOCKING":
        pass
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - began < 10
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert "blocked the event loop" in stderr


def test_a_second_ctrl_c_stops_at_once_even_while_blocked(blocker: dict[str, Any]) -> None:
    path = data(blocker["tmp"], [0, 60, 60])
    out = blocker["tmp"] / "records.jsonl"
    proc = start(blocker, "--data", str(path), "--output", str(out), "--concurrency", "1")
    assert proc.stderr is not None
    while proc.stderr.readline().strip() != "BLOCKING":
        pass
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - began < 5
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert out.read_text().endswith("\n")


HELD = """
import time


def busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def short():
    return sum(range(20))


async def main(watchdog_class, loop_seconds, calls=False):
    import asyncio

    dog = watchdog_class(asyncio.get_running_loop(), report_after=0.05, interval=0.01).start()
    try:
        if calls:  # many short calls in a row: the loop is held, but by no one call
            end = time.monotonic() + loop_seconds
            while time.monotonic() < end:
                short()
        else:
            busy(loop_seconds)  # one call holds the loop, in code of this module
    finally:
        dog.stop()
    return dog.blocks
"""


@pytest.mark.parametrize(
    ("module", "reported"),
    [("interactions_core.runtime.fake", False), ("acme_judge.helpers", True)],
)
def test_only_code_outside_the_runtime_is_reported_as_holding_the_loop(
    module: str, reported: bool
) -> None:
    """Episodes that never wait hold the loop in the runtime's own code: that is no plugin's
    doing, and the summary must not blame a runtime function with advice for plugin authors."""
    import asyncio

    from interactions_core.runtime.watchdog import LoopWatchdog

    namespace: dict[str, Any] = {"__name__": module}
    exec(compile(HELD, f"<{module}>", "exec"), namespace)
    blocks = asyncio.run(namespace["main"](LoopWatchdog, 0.4))
    if reported:
        # named by the outermost plugin frame on the stack: the same one while it holds
        assert list(blocks) == [f"{module}.main"] and blocks[f"{module}.main"][1] >= 0.05
    else:
        assert blocks == {}


def test_many_short_calls_in_a_row_are_not_one_block() -> None:
    """Episodes that never wait call the plugin many times without the loop turning: no
    single call blocks it, so none is named (the summary once blamed one of them)."""
    import asyncio

    from interactions_core.runtime.watchdog import LoopWatchdog

    # The loop that calls is the runtime's (as the episode loop is); each call, the plugin's.
    runtime: dict[str, Any] = {"__name__": "interactions_core.runtime.fake"}
    exec(compile(HELD, "<interactions_core.runtime.fake>", "exec"), runtime)
    plugin: dict[str, Any] = {"__name__": "acme_judge.helpers"}
    exec(compile(HELD, "<acme_judge.helpers>", "exec"), plugin)
    runtime["short"] = plugin["short"]
    assert asyncio.run(runtime["main"](LoopWatchdog, 0.6, True)) == {}


TWO_BLOCKERS = """
import asyncio
import inspect
import time


async def work(watchdog, calls, pieces):
    calls.append(watchdog.begin_call(inspect.currentframe()))  # as Session does
    for _ in range(pieces):
        time.sleep(0.3)
        await asyncio.sleep(0)


async def main(watchdog_class):
    watchdog = watchdog_class(asyncio.get_running_loop(), report_after=10).start()
    try:
        a, b = [], []
        await asyncio.gather(work(watchdog, a, 4), work(watchdog, b, 4))
        await asyncio.sleep(0.2)  # the heartbeat ends the last block
        return watchdog.held_elsewhere(a[0]), watchdog.held_elsewhere(b[0])
    finally:
        watchdog.stop()
"""


def test_each_block_is_charged_to_the_call_that_ran_it() -> None:
    """Two calls blocking in turn, in the same turns of the loop: every block was charged to
    the first (A 2.4 s, B 0 s), so B's own blocking pushed back B's own --timeout."""
    import asyncio

    from interactions_core.runtime.watchdog import LoopWatchdog

    namespace: dict[str, Any] = {"__name__": "acme_judge.helpers"}
    exec(compile(TWO_BLOCKERS, "<acme_judge.helpers>", "exec"), namespace)
    elsewhere_a, elsewhere_b = asyncio.run(namespace["main"](LoopWatchdog))
    # Each blocked 1.2 s: what the other held, within a poll or two of the watchdog.
    assert 0.8 < elsewhere_a < 1.6 and 0.8 < elsewhere_b < 1.6, (elsewhere_a, elsewhere_b)


def test_the_block_is_named_below_the_runtime_never_in_the_server_around_it() -> None:
    """Under `serve` the stack runs inside uvicorn and Starlette: timing the outermost plugin
    frame named uvicorn's run_asgi for every block, charged none to the plugin's call, and
    warned falsely that it "caught the exception" at the next block on the connection."""
    import asyncio

    from interactions_core.runtime.watchdog import LoopWatchdog

    web: dict[str, Any] = {"__name__": "uvicorn.protocols.fake"}  # the server around
    exec(compile(HELD, "<uvicorn.protocols.fake>", "exec"), web)
    runtime: dict[str, Any] = {"__name__": "interactions_core.runtime.fake"}
    exec("def call(seconds):\n    return plugin_busy(seconds)\n", runtime)
    plugin: dict[str, Any] = {"__name__": "acme_judge.helpers"}
    exec(compile(HELD, "<acme_judge.helpers>", "exec"), plugin)
    runtime["plugin_busy"] = plugin["busy"]
    web["busy"] = runtime["call"]  # uvicorn -> the runtime -> the plugin's busy()
    blocks = asyncio.run(web["main"](LoopWatchdog, 0.4))
    assert list(blocks) == ["acme_judge.helpers.busy"], blocks


def test_a_block_through_runtime_helpers_calling_plugin_code_back_is_one_block() -> None:
    """A decorated method (no lifecycle name the runtime called) looping over a runtime
    helper that calls the plugin back (as_score calling a score's __float__): the search
    stopped at the helper, so each callback was a block of its own, never named."""
    import asyncio

    from interactions_core.runtime.watchdog import LoopWatchdog

    plugin: dict[str, Any] = {"__name__": "acme_judge.helpers"}
    exec(
        "import time\n"
        "def piece():\n"
        "    end = time.monotonic() + 0.02\n"
        "    while time.monotonic() < end:\n"
        "        pass\n"
        "def wrapper(seconds):\n"
        "    end = time.monotonic() + seconds\n"
        "    while time.monotonic() < end:\n"
        "        check(piece)\n",
        plugin,
    )
    runtime: dict[str, Any] = {"__name__": "interactions_core.runtime.fake"}
    exec(compile(HELD, "<interactions_core.runtime.fake>", "exec"), runtime)
    exec("def check(callback):\n    return callback()\n", runtime)
    plugin["check"] = runtime["check"]  # the plugin -> a runtime helper -> the plugin again
    runtime["busy"] = plugin["wrapper"]  # the runtime calls the plugin
    blocks = asyncio.run(runtime["main"](LoopWatchdog, 0.4))
    assert list(blocks) == ["acme_judge.helpers.wrapper"], blocks


COLLECTED = """
import asyncio
import gc
import time

from interactions_core import BaseInteraction, InteractionResult


class SlowDel:
    def __del__(self):
        time.sleep(5)  # broken at the limit


class Innocent(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.1)
        gc.collect()  # what an allocation may start anywhere: here, in this call
        await asyncio.sleep(0.1)
        return InteractionResult(False, "fine", 1.0)
"""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the break
def test_a_plugin_cycle_freed_by_the_collector_inside_another_call_is_no_calls() -> None:
    """Python's collector frees a plugin's reference cycles wherever an allocation starts
    it, often inside another episode's call: the ``__del__`` of an object in such a cycle
    was charged to that call, which was named, broken and timed out ("generate_response
    timed out") for a block that was not its own. The block is named by the ``__del__``,
    broken, and charged to no call."""
    import asyncio
    import gc

    from interactions_core.runtime.session import Session
    from interactions_core.runtime.watchdog import LoopWatchdog

    namespace: dict[str, Any] = {"__name__": "acme_cycles"}
    exec(compile(COLLECTED, "<acme_cycles>", "exec"), namespace)

    async def main() -> tuple[Any, dict[str, Any]]:
        watchdog = LoopWatchdog(asyncio.get_running_loop(), limit=1.0).start()
        try:
            garbage: dict[str, Any] = {"held": namespace["SlowDel"]()}
            garbage["self"] = garbage  # another episode's plugin left this cycle behind
            del garbage
            session = Session(namespace["Innocent"](), "innocent", "s-1", timeout=1.0)
            await session.start()
            result = await session.respond([{"role": "user", "content": "hi"}])
            await session.finalize()
            return result, dict(watchdog.blocks)
        finally:
            watchdog.stop()

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()  # only the innocent call's own gc.collect() frees the cycle
    try:
        result, blocks = asyncio.run(main())
    finally:
        if was_enabled:
            gc.enable()
    assert result.content == "fine", result
    assert list(blocks) == ["acme_cycles.SlowDel.__del__"], blocks


OWN_TIMEOUT = """
import asyncio

from interactions_core import BaseInteraction, InteractionResult


class OwnDeadline(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.wait_for(asyncio.sleep(1), 0.05)  # its own client's deadline
        return InteractionResult(True, "fine", 1.0)
"""


@pytest.mark.parametrize("watched", [True, False])
def test_a_plugins_own_timeout_is_not_told_as_the_runs(watched: bool) -> None:
    """A ``TimeoutError`` the plugin raised itself (its client's deadline) read "timed out
    after 30 s" 0.1 s into a call under a 30 s timeout: a user would raise --timeout to
    no effect. It is told as what it is, and the runtime's deadline still as a timeout."""
    import asyncio

    from interactions_core.errors import InteractionCallError
    from interactions_core.runtime.session import Session
    from interactions_core.runtime.watchdog import LoopWatchdog

    namespace: dict[str, Any] = {"__name__": "acme_deadline"}
    exec(compile(OWN_TIMEOUT, "<acme_deadline>", "exec"), namespace)

    async def main(timeout: float | None) -> str:
        watchdog = LoopWatchdog(asyncio.get_running_loop()).start() if watched else None
        try:
            session = Session(namespace["OwnDeadline"](), "deadline", "s-1", timeout=timeout)
            await session.start()
            try:
                await session.respond([{"role": "user", "content": "hi"}])
            except InteractionCallError as exc:
                return str(exc)
            finally:
                await session.finalize()
            return "no error"
        finally:
            if watchdog is not None:
                watchdog.stop()

    assert "raised TimeoutError" in asyncio.run(main(30.0))
    assert "timed out after 0.01 s" in asyncio.run(main(0.01))  # the runtime's own
    # With no timeout at all the runtime ends no call: this read "timed out" too.
    assert "raised TimeoutError" in asyncio.run(main(None))
