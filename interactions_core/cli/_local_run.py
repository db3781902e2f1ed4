"""A run in this process: the runner on an event loop, a watchdog, and Ctrl-C / SIGTERM.

The first SIGINT or SIGTERM stops taking samples and cancels the open
episodes, which finalize their sessions; a second stops at once, wherever the
program is. Either way the episodes that finished are in the summary and in
``--output``. The watchdog notices plugin calls that block the event loop
(and, after a stop signal, breaks them), so they are reported at the end.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import asyncio
    from collections.abc import Container, Iterator
    from typing import Any

    from ._run_end import Played
    from ._run_outputs import RunOutputs
    from ._run_setup import RunInputs

__all__ = ["LocalRun"]


class LocalRun:
    """Play ``inputs`` into ``outputs`` here; ``stopped[0]`` gets 128 + a stop signal's number."""

    def __init__(
        self,
        args: argparse.Namespace,
        inputs: RunInputs,
        outputs: RunOutputs,
        stopped: list[int],
    ) -> None:
        self.args = args
        self.inputs = inputs
        self.outputs = outputs
        self.stopped = stopped
        self.runner: Any = None
        self.watchdog: Any = None

    def play(self, skip: Container[tuple[int, int]] | None) -> Played:
        """Run to the end, or to a stop; ``skip``: the episodes ``--resume`` does not replay."""
        import asyncio

        from ..runtime.errors import RunInterrupted
        from ._run_end import Played

        try:
            summary, still_open = asyncio.run(self._main(skip))
        except RunInterrupted:
            # A second signal: stopped at once. What finished is flushed by the caller.
            summary, still_open = self._cut_short()
        return Played(summary, still_open, self.watchdog)

    async def _main(self, skip: Container[tuple[int, int]] | None) -> tuple[Any, int]:
        import asyncio

        from ..runtime.watchdog import LoopWatchdog
        from ._run_outputs import RecordHandler

        with self._tracing():
            runner = self.runner = self._runner()
            loop = asyncio.get_running_loop()
            self.watchdog = LoopWatchdog(
                loop, limit=self.args.timeout, should_break=lambda: bool(self.stopped[0])
            ).start()
            on_record = RecordHandler(self.outputs.sink, self.outputs.progress)
            try:
                with _stop_signals(loop, runner, self.stopped):
                    source = self.inputs.samples()
                    summary = await runner.run(source, on_record=on_record, skip=skip)
                return summary, runner.open_sessions
            finally:
                self.watchdog.stop()
                aclose = getattr(self.inputs.policy, "aclose", None)
                if aclose is not None:
                    await aclose()

    def _tracing(self) -> Any:
        """``--trace``: every session event to the trace file while the run goes on."""
        import contextlib

        if self.outputs.trace is None:
            return contextlib.nullcontext()
        from ..runtime.trace import tracing

        return tracing(self.inputs.registry, self.outputs.trace)

    def _runner(self) -> Any:
        from ..runtime.runner import Runner

        args = self.args
        return Runner(
            self.inputs.policy,
            self.inputs.interactions,
            concurrency=args.concurrency,
            repeat=args.repeat,
            pass_score=args.pass_score,
            default=self.inputs.default,
            max_assistant_turns=args.max_assistant_turns,
            max_user_turns=args.max_user_turns,
            timeout=args.timeout,
            registry=self.inputs.registry,
        )

    def _cut_short(self) -> tuple[Any, int]:
        """The summary of what finished before a second stop signal, marked interrupted."""
        runner = self.runner
        summary = runner.summary if runner is not None else None
        if summary is None:
            from ..runtime.runner import RunSummary

            summary = RunSummary()
        summary.interrupted = True
        return summary, runner.open_sessions if runner is not None else 0


def _stop_signals(loop: asyncio.AbstractEventLoop, runner: Any, stopped: list[int]) -> Any:
    """SIGINT and SIGTERM: the first stops the run cleanly, a second one at once.

    Handled with ``signal.signal`` rather than the loop's own signal handlers, so
    even a plugin call that blocks the event loop is reached: the first signal
    schedules :meth:`Runner.cancel` (and lets the watchdog break a blocking call),
    a second raises :class:`RunInterrupted` wherever the program is.
    """
    import contextlib
    import signal
    import threading

    from ..runtime.errors import RunInterrupted

    def handler(signum: int, frame: Any) -> None:
        if stopped[0]:
            stopped[0] = 128 + signum
            raise RunInterrupted()
        stopped[0] = 128 + signum
        runner.stop_taking_samples()  # now, even if the loop is blocked
        loop.call_soon_threadsafe(runner.cancel)

    @contextlib.contextmanager
    def installed() -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):
                pass
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    return installed()
