"""``interactions run``: play episodes of a dataset and print a summary.

See ``docs/run.md`` for the reference and worked examples.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def _score(text: str) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="play episodes of a dataset between a policy and interactions",
        description="Play one episode per sample of a dataset: a policy (the model side) "
        "replies, the sample's interaction (chosen by interaction_kwargs.name) judges each "
        "turn, until it terminates, a turn limit is reached or the policy has nothing more "
        "to say. Prints a summary; exits 1 when any episode errored, 130 when interrupted "
        "(Ctrl-C), 143 when terminated (SIGTERM).",
    )
    _input_options(p)
    _policy_and_limit_options(p)
    _output_and_control_options(p)
    p.set_defaults(run=run)


def _input_options(p: argparse.ArgumentParser) -> None:
    """The config, the samples and how they are read."""
    p.add_argument(
        "config",
        metavar="CONFIG",
        nargs="?",
        help="interactions config (YAML); without one, every episode is single-turn",
    )
    p.add_argument("--data", metavar="FILE", help="samples: JSONL, or parquet with pyarrow")
    p.add_argument("--format", choices=("jsonl", "parquet"), help="data format (default: suffix)")
    p.add_argument(
        "--policy",
        default=None,
        metavar="NAME",
        help="replay (default), openai, human, or a plugin's policy",
    )
    p.add_argument(
        "-p",
        "--policy-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy option (repeatable); VALUE is read as JSON when it parses, else as text",
    )


def _policy_and_limit_options(p: argparse.ArgumentParser) -> None:
    """The model side, how many episodes at once, and the turn limits."""
    p.add_argument("--model", help="shortcut for --policy-option model=NAME (openai)")
    p.add_argument("--base-url", help="shortcut for --policy-option base_url=URL (openai)")
    p.add_argument(
        "--concurrency",
        type=_positive_int,
        default=16,
        metavar="N",
        help="episodes in flight (default 16); the openai policy keeps one request per "
        "episode in flight unless -p concurrency=N caps it",
    )
    p.add_argument(
        "--repeat",
        type=_positive_int,
        default=1,
        metavar="K",
        help="play every sample K times as independent episodes; the summary gives pass@k "
        "for k = 1..K (default 1)",
    )
    p.add_argument(
        "--pass-score",
        type=_score,
        default=1.0,
        metavar="X",
        help="an episode passes (for pass@k) when its final score is at least X (default 1.0)",
    )
    p.add_argument("--max-assistant-turns", type=_positive_int, metavar="N", help="turn limit")
    p.add_argument(
        "--max-user-turns", type=_positive_int, metavar="N", help="feedback message limit"
    )
    p.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="bound on each interaction call; a timeout is an error for that episode only",
    )
    p.add_argument(
        "--default-interaction",
        metavar="NAME",
        help="interaction for samples whose interaction_kwargs has no name (overrides "
        "the config's 'default:')",
    )


def _output_and_control_options(p: argparse.ArgumentParser) -> None:
    """Where records, traces and reports go, and how the run is shown and stopped."""
    p.add_argument("--output", metavar="FILE", help="write one JSON record per episode")
    p.add_argument("--trace", metavar="FILE", help="write a JSONL trace of every session event")
    p.add_argument(
        "--report",
        metavar="FILE",
        help="also write an HTML report of the run (see 'interactions report')",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --output/--trace/--report file",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run whose records are in --output: play only the samples without "
        "a record, append, and summarize the whole dataset",
    )
    p.add_argument(
        "--retry-errors",
        action="store_true",
        help="with --resume, play errored samples again too (implies --resume)",
    )
    p.add_argument(
        "--strict", action="store_true", help="stop at the first bad row instead of skipping it"
    )
    p.add_argument("--limit", type=_positive_int, metavar="N", help="run the first N samples only")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    p.add_argument(
        "--list-policies", action="store_true", help="list the available policies and exit"
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="shard the episodes over Ray workers: the cluster at ADDRESS (HOST:PORT or "
        "'auto'), else a new local one; put it after CONFIG (docs/ray.md)",
    )


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``2h07m``: an estimate, so no finer than it needs to be."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


class Progress:
    """A one-line progress bar on a terminal stream, redrawn at most 10 times a second."""

    def __init__(self, stream: TextIO, total: int | None) -> None:
        import time

        self.stream = stream
        self.total = total
        self.clock = time.monotonic
        self.started = self.clock()
        self.next_draw = 0.0

    def update(self, done: int, errors: int, force: bool = False) -> None:
        now = self.clock()
        if not force and now < self.next_draw:
            return
        self.next_draw = now + 0.1
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        if self.total:
            frac = min(done / self.total, 1.0)
            filled = int(frac * 24)
            bar = f"[{'#' * filled}{'.' * (24 - filled)}] {done}/{self.total}"
        else:
            bar = f"{done} episodes"
        eta = ""
        if self.total and done and self.total > done:
            eta = f"  ETA {_duration((self.total - done) / rate)}"
        self.stream.write(f"\r{bar}  {rate:,.0f}/s  errors {errors}{eta}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def _policy_options(args: argparse.Namespace) -> dict[str, Any]:
    import json

    from ..errors import ConfigError

    options: dict[str, Any] = {}
    for item in args.policy_option:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError([f"--policy-option {item!r}: expected KEY=VALUE"])
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        options[key.strip()] = value
    if args.model is not None:
        options["model"] = args.model
    if args.base_url is not None:
        options["base_url"] = args.base_url
    return options


def _list_policies(as_json: bool) -> int:
    from ..registry import get_registry
    from ..runtime.policies import list_policies

    rows = [p.as_dict() for p in list_policies(get_registry())]
    if as_json:
        from ._output import print_json

        print_json(rows)
        return 0
    from ._output import table

    headers = ("name", "distribution", "kind", "target", "status")
    print(table(headers, [[str(r[h] or "") for h in headers] for r in rows]))
    problems = [r for r in rows if r["error"]]
    if problems:
        print()
        for r in problems:
            print(f"{r['name']} ({r['distribution']}): {r['status']}: {r['error']}")
    return 0


def _check_paths(args: argparse.Namespace) -> None:
    """Refuse, before anything is written, outputs that would destroy an input or each other."""
    from ..errors import ConfigError
    from ..runtime.writers import is_special_file, same_file

    inputs = [("--data", args.data)] + ([("CONFIG", args.config)] if args.config else [])
    named = (("--output", args.output), ("--trace", args.trace), ("--report", args.report))
    outputs = [(flag, path) for flag, path in named]
    problems = []
    for flag, path in outputs:
        if not path or is_special_file(path):  # /dev/null destroys nothing
            continue
        for source, input_path in inputs:
            if same_file(path, input_path):
                problems.append(
                    f"{flag} {path} is the {source} file; writing it would destroy the input "
                    "(choose another file)"
                )
    output, trace = args.output, args.trace
    if output and trace and not is_special_file(output) and same_file(output, trace):
        problems.append(
            f"--output and --trace are the same file ({args.output}); records and trace "
            "events need a file each"
        )
    for flag, path in outputs[:2]:
        if path and args.report and not is_special_file(path) and same_file(path, args.report):
            problems.append(f"{flag} and --report are the same file ({path}); choose two files")
    if problems:
        raise ConfigError(problems)


def _default_interaction(name: str, loaded: Any) -> str:
    """``--default-interaction NAME``, checked against the config's interactions."""
    if name in loaded.names:
        return name
    from ..errors import ConfigError
    from ..naming import suggest

    hint = suggest(name, loaded.names, n=1)
    raise ConfigError(
        [
            f"--default-interaction {name!r} is not one of the interactions configured in "
            f"{loaded.source or 'the config'} ({', '.join(loaded.names) or 'none'}){hint}"
        ]
    )


def _warn_without_limit(policy_cls: Any, args: argparse.Namespace) -> None:
    """A live policy with no turn limit may never stop: say so, once, on stderr."""
    from ..runtime.policies.replay import ReplayPolicy

    if policy_cls is ReplayPolicy or args.max_assistant_turns or args.max_user_turns:
        return
    if not args.config:  # no interactions: every episode is a single turn
        return
    sys.stderr.write(
        f"interactions: warning: no turn limit is set, so with --policy {args.policy} an "
        "episode ends only when its interaction terminates it (or the policy stops); set one "
        "with --max-assistant-turns N or --max-user-turns N\n"
    )


def _interactions_and_policy(args: argparse.Namespace, registry: Any) -> tuple[Any, Any, Any]:
    """The config's interactions (``None`` without a config), its default, and the policy."""
    from ..errors import ConfigError, ConflictError
    from ..runtime.policies import create_policy, get_policy_class

    interactions: dict[str, Any] | None = None
    default = None
    if args.config:
        from ..loader import load_config

        loaded = load_config(args.config, registry=registry)
        default = loaded.default
        if args.default_interaction is not None:
            default = _default_interaction(args.default_interaction, loaded)
        interactions = loaded.instantiate()
    elif args.default_interaction:
        raise ConfigError(
            ["--default-interaction needs a CONFIG naming the interactions to choose from"]
        )
    policy_given = args.policy is not None
    args.policy = args.policy or "replay"
    try:
        policy_cls = get_policy_class(args.policy, registry)
    except ConflictError as exc:
        if policy_given:
            raise
        raise ConflictError(
            f"no --policy was given, so the default 'replay' is used, but {exc}"
        ) from None
    policy = create_policy(policy_cls, _policy_options(args), name=args.policy)
    _warn_without_limit(policy_cls, args)
    return interactions, default, policy


def _outcome(
    args: argparse.Namespace,
    summary: Any,
    still_open: int,
    reader: Any,
    resume: Any,
    report: Any,
    watch: list[Any],
    stopped: list[int],
    unrouted: int,
) -> int:
    """Print the summary and what the user should know; return the exit code."""
    if resume is not None:
        resume.complete(summary)
        if resume.state is not None:
            sys.stderr.write(
                f"interactions: resumed {args.output}: {resume.resumed} episode(s) from earlier "
                f"runs, {summary.episodes - resume.resumed} played now\n"
            )
    summary.skipped_rows = reader.skipped
    if report is not None and report.seen:
        from ..report import write_report

        write_report([report], args.report)
    if args.json:
        from ._output import print_json

        document = summary.as_dict()
        if watch and watch[0].blocks:  # plugin methods that blocked the event loop
            document["blocking"] = {
                name: {"times": times, "longest_s": round(longest, 3)}
                for name, (times, longest) in sorted(watch[0].blocks.items())
            }
        print_json(document)
    else:
        print(summary.format())
    return _tell(args, summary, still_open, reader, watch, stopped, unrouted)


def _tell(
    args: argparse.Namespace,
    summary: Any,
    still_open: int,
    reader: Any,
    watch: list[Any],
    stopped: list[int],
    unrouted: int,
) -> int:
    """On stderr: bad rows, blocking plugins, a stop or the errors; return the exit code."""
    err = sys.stderr
    if reader.bad_rows:
        err.write(f"skipped {reader.skipped} bad row{'s' if reader.skipped != 1 else ''}:\n")
        for bad in reader.bad_rows[:10]:
            err.write(f"  {bad}\n")
        if reader.skipped > 10:
            err.write(f"  ... and {reader.skipped - 10} more\n")
    if unrouted:
        err.write(
            f"note: no CONFIG was given, so {unrouted} sample(s) with interaction_kwargs "
            "ran as single-turn episodes without their interaction\n"
        )
    if watch:
        for line in watch[0].report():
            err.write(f"interactions: warning: {line}\n")
        if watch[0].blocks:
            from ..runtime.watchdog import BLOCKING_ADVICE

            err.write(f"  ({BLOCKING_ADVICE})\n")
    if summary.interrupted or stopped[0]:
        where = f"; records are in {args.output}" if args.output else ""
        how = "terminated" if stopped[0] == 143 else "interrupted"
        err.write(
            f"interactions: {how} after {summary.episodes} episode(s); open sessions "
            f"finalized ({still_open} left open){where}\n"
        )
        if args.output:
            err.write("  (continue with the same command and --resume)\n")
        return stopped[0] or 130
    if summary.errors:
        err.write(
            f"interactions: {summary.errors} of {summary.episodes} episode(s) errored"
            + (f" (records with 'errors' in {args.output})" if args.output else "")
            + ":\n"
        )
        for example in summary.error_examples:
            err.write(
                f"  sample {example['sample_id']!r}: {example['where']}: {example['message']}\n"
            )
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    import asyncio

    from ..errors import ConfigError
    from ..registry import get_registry
    from ..runtime.datasets import SampleReader
    from ..runtime.runner import Runner
    from ..runtime.samples import interaction_kwargs_of
    from ..runtime.trace import tracing
    from ..runtime.writers import refuse_existing

    if args.list_policies:
        return _list_policies(args.json)
    if not args.data:
        raise ConfigError(["--data FILE is required (the samples to run)"])
    _check_paths(args)
    reader = SampleReader(args.data, strict=args.strict, limit=args.limit, format=args.format)
    resuming = args.resume or args.retry_errors
    for path in (args.output, args.trace, args.report):
        if path and not (resuming and path != args.report):
            refuse_existing(path, args.overwrite)
    registry = get_registry()
    interactions, default, policy = _interactions_and_policy(args, registry)

    unrouted = [0]

    def samples() -> Any:
        for sample in reader:
            if interaction_kwargs_of(sample) is not None:
                unrouted[0] += 1
            yield sample

    show_progress = (
        not args.no_progress and not getattr(policy, "interactive", False) and sys.stderr.isatty()
    )
    progress = None
    if show_progress:
        total = reader.count()
        samples_total = min(total, args.limit) if args.limit else total
        progress = Progress(sys.stderr, samples_total * args.repeat)  # episodes, not samples

    resume = _resume_state(args, policy)
    output, trace_writer = _open_outputs(args, resume)
    stamp = resume.stamp if resume is not None else {}
    stopped = [0]  # 128 + the number of the first stop signal received
    live: list[Any] = []  # the runner, once created
    watch: list[Any] = []
    report = None
    if args.report:
        from ..report import RunData

        report = RunData(os.path.basename(args.output or args.data))
    sink = _Sink(output, report, stamp) if output is not None or report is not None else None

    async def main() -> Any:
        from ..runtime.watchdog import LoopWatchdog

        with _maybe_tracing(tracing, registry, trace_writer):
            runner = Runner(
                policy,
                interactions,
                concurrency=args.concurrency,
                repeat=args.repeat,
                pass_score=args.pass_score,
                default=default,
                max_assistant_turns=args.max_assistant_turns,
                max_user_turns=args.max_user_turns,
                timeout=args.timeout,
                registry=registry,
            )
            live.append(runner)
            loop = asyncio.get_running_loop()
            watchdog = LoopWatchdog(
                loop, limit=args.timeout, should_break=lambda: bool(stopped[0])
            ).start()
            watch.append(watchdog)
            done = [0, 0]

            def on_record(record: Any) -> None:
                if sink is not None:
                    sink.write(record.to_dict())
                done[0] += 1
                done[1] += bool(record.errors)
                if progress is not None:
                    progress.update(done[0], done[1])

            try:
                with _stop_signals(loop, runner, stopped):
                    source = samples() if interactions is None else reader
                    skip = resume.done if resume is not None else None
                    summary = await runner.run(source, on_record=on_record, skip=skip)
                return summary, runner.open_sessions
            finally:
                watchdog.stop()
                aclose = getattr(policy, "aclose", None)
                if aclose is not None:
                    await aclose()

    from ..runtime.errors import RunInterrupted

    try:
        if args.ray is not None:  # sharded over a Ray cluster (interactions_core.ray.shard)
            from ..ray.shard import run_from_cli

            source = samples() if interactions is None else reader
            skip = resume.done if resume is not None else None
            summary, still_open = run_from_cli(
                args, source, default, _policy_options(args), sink, progress, skip, stopped
            )
        else:
            try:
                summary, still_open = asyncio.run(main())
            except RunInterrupted:
                # A second signal: stopped at once. What finished is flushed below.
                runner = live[0] if live else None
                summary = runner.summary if runner is not None else None
                if summary is None:
                    from ..runtime.runner import RunSummary

                    summary = RunSummary()
                summary.interrupted = True
                still_open = runner.open_sessions if runner is not None else 0
    finally:
        if progress is not None:
            progress.close()
        try:
            if output is not None:
                output.close()
        finally:
            if trace_writer is not None:
                trace_writer.close()
    return _outcome(
        args,
        summary,
        still_open,
        reader,
        resume,
        report,
        watch,
        stopped,
        unrouted[0] if interactions is None else 0,
    )


class _Sink:
    """Each finished record: stamped for ``--resume``, to ``--output`` and to ``--report``.

    Local and sharded (``--ray``) runs write through the same sink, so their
    records are the same.
    """

    def __init__(self, output: Any, report: Any, stamp: dict[str, Any]) -> None:
        self.output = output
        self.report = report
        self.stamp = stamp

    def write(self, record: dict[str, Any]) -> None:
        if self.stamp:
            record.update(self.stamp)
        if self.output is not None:
            self.output.write(record)
        if self.report is not None:
            self.report.add(record)


def _maybe_tracing(tracing: Any, registry: Any, writer: Any) -> Any:
    import contextlib

    if writer is None:
        return contextlib.nullcontext()
    return tracing(registry, writer)


class _Resume:
    """The records already in ``--output`` (``--resume``) and this run's fingerprints."""

    def __init__(self, state: Any, stamp: dict[str, Any], retry_errors: bool) -> None:
        self.state = state
        self.stamp = stamp
        self.done = state.done(retry_errors) if state is not None else set()
        self.resumed = 0

    def complete(self, summary: Any) -> None:
        """Add the earlier records not played again, so the summary covers the dataset."""
        if self.state is None:
            return
        played = summary.episodes
        for key, record in self.state.records.items():
            if key in self.done:
                summary.add(record)
        self.resumed = summary.episodes - played


def _resume_state(args: argparse.Namespace, policy: Any) -> _Resume | None:
    """Fingerprint this run; with ``--resume``, read what ``--output`` already holds."""
    from ..errors import ConfigError
    from ..runtime.resume import config_hash, data_hash, read_records

    if args.retry_errors:
        args.resume = True
    if args.resume:
        if not args.output:
            raise ConfigError(["--resume needs --output FILE (the records of the run to continue)"])
        if args.overwrite:
            raise ConfigError(
                ["--resume continues --output and --overwrite replaces it: choose one"]
            )
    if not args.output:
        return None
    options = {
        "policy": args.policy,
        "policy_options": _policy_options(args),
        "max_assistant_turns": args.max_assistant_turns,
        "max_user_turns": args.max_user_turns,
        "default_interaction": args.default_interaction,
    }
    config = config_hash(args.config, options)
    data = data_hash(args.data)
    stamp = {"config_hash": config, "data_hash": data}
    if not args.resume:
        return _Resume(None, stamp, False)
    if data is None:
        raise ConfigError(
            [
                "--resume needs --data to be a regular file (it checks that the records were "
                "made from the same data), not standard input or a pipe"
            ]
        )
    state = read_records(args.output, config, data)
    if state.unmarked:
        sys.stderr.write(
            f"interactions: warning: {state.unmarked} record(s) in {args.output} carry no "
            "config or data fingerprint (an older version wrote them); they are trusted "
            "to belong to this run\n"
        )
    return _Resume(state, stamp, args.retry_errors)


def _open_outputs(args: argparse.Namespace, resume: _Resume | None) -> tuple[Any, Any]:
    """Open ``--output`` and ``--trace``; when one fails, the other is not left behind."""
    import os

    from ..runtime.trace import TraceWriter
    from ..runtime.writers import LineWriter

    appending = bool(args.resume)
    opened: list[Any] = []
    created: list[str] = []
    try:
        for path, writer in ((args.output, LineWriter), (args.trace, TraceWriter)):
            if not path:
                opened.append(None)
                continue
            existed = os.path.lexists(path)
            opened.append(writer(path, overwrite=args.overwrite, append=appending, autoflush=True))
            if not existed:
                created.append(path)
    except BaseException:
        for writer in opened:
            if writer is not None:
                writer.close()
        for path in created:  # nothing was written to them: leave no empty file behind
            try:
                os.remove(path)
            except OSError:
                pass
        raise
    output, trace = opened
    return output, trace


def _stop_signals(loop: Any, runner: Any, stopped: list[int]) -> Any:
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

    @contextlib.contextmanager
    def installed() -> Any:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if stopped[0]:
                stopped[0] = 128 + signum
                raise RunInterrupted()
            stopped[0] = 128 + signum
            runner.stop_taking_samples()  # now, even if the loop is blocked
            loop.call_soon_threadsafe(runner.cancel)

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
