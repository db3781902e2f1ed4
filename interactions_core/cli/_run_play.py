"""Playing the episodes of ``interactions run``: here, or on Ray workers with ``--ray``.

Both branches hand each finished record to the same
:class:`~._run_setup.RecordHandler` and stop the same way
(:class:`~interactions_core._stop_signals.StopSignals`): the first SIGINT or
SIGTERM stops taking samples and cancels the open episodes, which finalize
their sessions; a second stops at once, wherever the program is. Either way the
episodes that finished are in the summary and in ``--output``.

:class:`LocalRun` plays in this process: the runner on an event loop, with a
watchdog that notices plugin calls that block the event loop (and, after a stop
signal, breaks them), so they are reported at the end. :class:`ShardedRun`
turns the arguments into a sharded run
(:func:`~interactions_core.ray.shard.run_sharded`): it refuses what cannot run on
workers (``--trace``, ``--policy human``), chooses the cluster, and removes the
empty ``--output`` of a run that failed before its first record, so the
corrected command can be rerun as it is.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Container, Mapping
    from typing import Any

    from ..runtime.episode import RunOptions
    from ._run_setup import RunInputs, RunOutputs

__all__ = ["LocalRun", "Played", "ShardedRun", "run_options"]


class Played:
    """What a run leaves for its report: the summary, sessions left open, the watchdog."""

    def __init__(
        self, summary: Any, still_open: int, watchdog: Any = None, broken: str | None = None
    ) -> None:
        self.summary = summary
        self.still_open = still_open
        #: The local run's ``LoopWatchdog`` (what blocked the event loop); ``None`` with ``--ray``.
        self.watchdog = watchdog
        #: What ended the run that was neither its end nor a stop signal (plugin code that
        #: stopped the event loop or cancelled the run's tasks), or ``None``.
        self.broken = broken


def run_options(args: argparse.Namespace, default: str | None) -> RunOptions:
    """The run's options from the arguments (``default``: the interaction chosen for samples)."""
    from ..runtime.episode import RunOptions

    return RunOptions(
        concurrency=args.concurrency,
        repeat=args.repeat,
        pass_score=args.pass_score,
        default=default,
        max_assistant_turns=args.max_assistant_turns,
        max_user_turns=args.max_user_turns,
        timeout=args.timeout,
    )


class _Run:
    """What both ways of playing a run are given: the arguments, inputs and outputs."""

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
        #: The run's stop-signal handlers once it is over, still installed: while the
        #: outputs close and the summary prints, a signal (a wrapper's second copy of
        #: the first) is noted, never the end of the command; the caller restores them.
        self.closing: Any = None


class LocalRun(_Run):
    """Play ``inputs`` into ``outputs`` here; ``stopped[0]`` gets 128 + a stop signal's number."""

    #: The runner and the watchdog, once :meth:`play` has started them.
    runner: Any = None
    watchdog: Any = None

    def play(self, skip: Container[tuple[int, int]] | None) -> Played:
        """Run to the end, or to a stop; ``skip``: the episodes ``--resume`` does not replay."""
        import asyncio

        from ..errors import Interrupted, RunInterrupted

        try:
            summary, still_open = asyncio.run(self._main(skip))
        except RunInterrupted:
            # A second signal: stopped at once. What finished is flushed by the caller.
            summary, still_open = self._cut_short()
        except BaseException as exc:
            # Not a stop signal (those end the run with its summary, and the user's Ctrl-C
            # is an Interrupted), nor one of the project's own errors: code inside the run,
            # a plugin's, stopped the event loop (loop.stop()), cancelled the run's tasks,
            # raised SystemExit or KeyboardInterrupt from a callback or task of its own, or
            # changed the loop so that it fails (a task factory that raises). What
            # finished is kept, and --resume plays the rest.
            broken = _what_broke(exc)
            if issubclass(type(exc), Interrupted) or broken is None:
                raise
            summary, still_open = self._cut_short()
            return Played(summary, still_open, self.watchdog, broken)
        return Played(summary, still_open, self.watchdog)

    async def _main(self, skip: Container[tuple[int, int]] | None) -> tuple[Any, int]:
        import asyncio

        from .._stop_signals import StopSignals
        from ..runtime.runner import UnwaitedExecutor
        from ..runtime.watchdog import LoopWatchdog
        from ._run_setup import RecordHandler

        with self._tracing():
            runner = self.runner = self._runner()
            loop = asyncio.get_running_loop()
            loop.set_default_executor(UnwaitedExecutor(thread_name_prefix="run-executor"))
            loop.set_exception_handler(_told_already)
            self.watchdog = LoopWatchdog(
                loop, limit=self.args.timeout, should_break=lambda: bool(self.stopped[0])
            ).start()
            on_record = RecordHandler(self.outputs.sink, self.outputs.progress, self.outputs.trace)

            def stop(signum: int) -> None:
                runner.stop_taking_samples()  # now, even if the loop is blocked
                loop.call_soon_threadsafe(runner.cancel)

            try:
                # signal.signal rather than the loop's own signal handlers, so even a
                # plugin call that blocks the event loop is reached
                signals = StopSignals(stop, _stop_at_once, stopped=self.stopped, exit_after=5.0)
                self.closing = signals.install()
                try:
                    signals.keep(loop)  # a plugin's own handler must not take them
                    source = self.inputs.samples()
                    summary = await runner.run(source, on_record=on_record, skip=skip)
                finally:  # the run is over: from now on a signal is noted (exit code) only
                    signals.first = signals.second = _noted
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
        from ..runtime.observers import tracing

        return tracing(self.inputs.registry, self.outputs.trace)

    def _runner(self) -> Any:
        from ..runtime.runner import Runner

        options = run_options(self.args, self.inputs.default)
        return Runner(
            self.inputs.policy, self.inputs.interactions, options, registry=self.inputs.registry
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


def _told_already(loop: Any, context: dict[str, Any]) -> None:
    """The run's loop's exception handler: a plugin task's ``SystemExit`` or
    ``KeyboardInterrupt`` ended the run and was told (:func:`_what_broke`); when the
    task is dropped later, asyncio's "exception was never retrieved" is not told again
    (with a traceback, formatted wherever the collector happens to run)."""
    if issubclass(type(context.get("exception")), (SystemExit, KeyboardInterrupt)):
        return
    loop.default_exception_handler(context)


def _what_broke(exc: BaseException) -> str | None:
    """What ended a run's event loop from inside the run, for the message; ``None`` for
    the project's own errors (told as they are) or with ``INTERACTIONS_DEBUG`` set."""
    import asyncio
    import os

    from ..errors import InteractionsError, exception_kind, exception_text, stop_text

    # Told by type(), and by BaseException's own descriptors: the exception may be a
    # plugin's, whose class's properties would run here, outside every call.
    kind = type(exc)
    where = "by code inside the run (a plugin?)"
    if issubclass(kind, asyncio.CancelledError):
        how = "cancelled"
    elif issubclass(kind, RuntimeError) and "loop stopped before" in exception_text(exc):
        how = "stopped"
    elif issubclass(kind, (SystemExit, KeyboardInterrupt)):
        how = f"ended by {stop_text(exc)}"
    elif issubclass(kind, InteractionsError) or os.environ.get("INTERACTIONS_DEBUG"):
        return None
    else:
        text = exception_text(exc)
        how = f"ended by {exception_kind(exc)}: {text if len(text) <= 80 else text[:77] + '...'}"
        where = "outside any plugin call (by plugin code that changed the loop?)"
    return f"the run's event loop was {how} {where}"


def _noted(signum: int) -> None:
    """A stop signal once the run is over: the summary still prints (a second one ends the
    process 5 s later if it has not ended by then, as during the run)."""


def _stop_at_once(signum: int) -> None:
    """A second stop signal: :class:`RunInterrupted` leaves even a blocked plugin call."""
    from ..errors import RunInterrupted

    raise RunInterrupted()


# -- the --ray branch ---------------------------------------------------------------


class ShardedRun(_Run):
    """Play ``inputs`` into ``outputs`` on Ray workers; ``stopped[0]`` as in :class:`LocalRun`.

    The records go through the same record sink a local run writes through
    (which stamps them for ``--resume``); no session is left open (the workers
    finalize each one before returning its record).
    """

    def play(self, skip: Container[tuple[int, int]] | None) -> Played:
        """Shard the run; ``skip``: the episodes ``--resume`` does not replay."""
        from ..ray.shard import run_sharded
        from ._run_setup import RecordHandler, policy_options

        args = self.args
        settings = _settings(args, self.inputs.default, policy_options(args))
        on_record = RecordHandler(self.outputs.sink, self.outputs.progress)
        try:
            summary = run_sharded(
                self.inputs.samples(),
                settings,
                address=_cluster_address(args.ray),
                on_record=on_record,
                skip=skip,
                stopped=self.stopped,
            )
        except BaseException:
            if not args.resume:
                _remove_if_unused(self.outputs.output)
            raise
        return Played(summary, 0)


def _settings(args: Any, default: str | None, policy_options: Mapping[str, Any]) -> Any:
    """The run's settings from the arguments; options no worker can honour are refused."""
    from ..ray.shard import RunSettings

    _refuse_unsupported(args)
    config = None
    if args.config:
        from .._yaml import read_config_file

        config, _, _ = read_config_file(args.config)
    return RunSettings(
        config,
        policy=args.policy,
        policy_options=policy_options,
        options=run_options(args, default),
    )


def _refuse_unsupported(args: Any) -> None:
    from ..errors import ConfigError

    problems = []
    if args.trace:
        problems.append(
            "--trace is not supported with --ray yet (trace events happen in the workers); "
            "run without --ray to trace, or use --output for the records"
        )
    if args.policy == "human":
        problems.append("--policy human needs this terminal; it cannot run on Ray workers")
    if problems:
        raise ConfigError(problems)


def _cluster_address(address: str) -> str:
    """``--ray``'s value, with no address (or ``local``) resolved to the cluster to use."""
    if address in ("", "local"):
        import os

        # $RAY_ADDRESS (set inside a Ray job) names the cluster; else "local" starts a
        # new one even when a cluster started by 'ray start' runs on this machine
        address = os.environ.get("RAY_ADDRESS") or "local"
    return address


def _remove_if_unused(writer: Any) -> None:
    """Remove the new ``--output`` of a run that failed before its first record.

    A cluster that cannot be reached, or a worker that cannot set up the run,
    stops it before anything is written; without the empty file left behind,
    the corrected command can be rerun as it is (no ``--overwrite`` needed).
    Only an empty regular file is removed, never a device such as ``/dev/null``.
    """
    import os
    import stat

    if writer is None or writer.lines:
        return
    try:
        info = os.lstat(writer.path)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.remove(writer.path)
    except OSError:
        pass
