"""From the arguments of ``interactions run`` to what it plays and where its results go.

The inputs, checked before anything is written. The order of the checks is the
order of the errors a user meets: the data is required, no output may destroy
an input or another output, an existing output is kept unless ``--overwrite``
(or continued with ``--resume``), then the config is loaded and the policy
created. A mistake in any of them stops the run with every file untouched.

The outputs: ``--output``, ``--trace``, ``--report``, the bar. Local and
sharded (``--ray``) runs hand each finished record to the same
:class:`RecordHandler`. The files are opened and closed together; a file this
run created is removed again when opening the next one fails.

``--resume``: every record a run writes to ``--output`` is stamped with a hash
of the run's settings and one of its data. ``--resume`` reads the file back,
refuses records made from other settings or other data, plays only the samples
without a record (``--retry-errors``: errored ones too) and adds the earlier
records to the summary (:class:`Resume`), so it covers the whole dataset.

The progress bar (:class:`Progress`) is one line on standard error, shown only
when standard error is a terminal, the policy does not talk to the user
(``human`` reads the same terminal) and ``--no-progress`` is not given.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .._files import telling_a_wait
from ..errors import DatasetError
from ..runtime.observers import TraceWriter
from ..runtime.records import record_key
from ._command import pipe_note

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Iterator
    from typing import Any

    from ._command import Progress

__all__ = [
    "RecordHandler",
    "RecordSink",
    "Resume",
    "RunInputs",
    "RunOutputs",
    "RunTrace",
    "check_paths",
    "open_outputs",
    "policy_options",
    "prepare",
    "progress_bar",
    "resume_state",
]


@dataclass
class RunInputs:
    """What a run plays: the samples, the config's interactions and default, the policy."""

    reader: Any
    registry: Any
    interactions: dict[str, Any] | None
    default: str | None
    policy: Any
    #: Samples that name an interaction but ran single-turn, since no CONFIG was given.
    unrouted: int = 0

    def samples(self) -> Iterable[Any]:
        """The samples to play; without a config, those that name an interaction are counted."""
        return self.reader if self.interactions is not None else self._counted()

    def _counted(self) -> Iterator[Any]:
        from ..runtime.episode import interaction_kwargs_of

        for sample in self.reader:
            if interaction_kwargs_of(sample) is not None:
                self.unrouted += 1
            yield sample


def prepare(args: argparse.Namespace) -> RunInputs:
    """Check the arguments and files, load the config and create the policy."""
    from ..errors import ConfigError
    from ..registry import get_registry
    from ..runtime.datasets import SampleReader

    if not args.data:
        raise ConfigError(["--data FILE is required (the samples to run)"])
    check_paths(args)
    reader = SampleReader(args.data, strict=args.strict, limit=args.limit, format=args.format)
    _refuse_existing_outputs(args)
    registry = get_registry()
    interactions, default = _interactions(args, registry)
    policy = _policy(args, registry)
    return RunInputs(reader, registry, interactions, default, policy)


def check_paths(args: argparse.Namespace) -> None:
    """Refuse, before anything is written, outputs that would destroy an input or each other."""
    from ..errors import ConfigError
    from ..runtime.records import is_special_file, same_file

    inputs = [("--data", args.data)] + ([("CONFIG", args.config)] if args.config else [])
    outputs = [("--output", args.output), ("--trace", args.trace), ("--report", args.report)]
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


def _refuse_existing_outputs(args: argparse.Namespace) -> None:
    """An existing output needs ``--overwrite``. ``--resume`` appends to records and trace,
    and replaces the report, which it draws whole again from every record, earlier ones too
    (refusing it made "the same command with --resume" fail after any run with --report)."""
    from ..runtime.records import is_special_file, refuse_existing, refuse_link

    resuming = args.resume or args.retry_errors
    for path in (args.output, args.trace, args.report):
        if path and not resuming:
            refuse_existing(path, args.overwrite)
        if path and (resuming or args.overwrite) and not is_special_file(path):
            refuse_link(path)  # as --output refuses one: never replaced or written through


def _interactions(args: argparse.Namespace, registry: Any) -> tuple[dict[str, Any] | None, Any]:
    """The config's interactions, created (``None`` without a config), and its default."""
    from ..errors import ConfigError

    if not args.config:
        if args.default_interaction:
            raise ConfigError(
                ["--default-interaction needs a CONFIG naming the interactions to choose from"]
            )
        return None, None
    from ..loader import load_config

    loaded = load_config(args.config, registry=registry)
    default = loaded.default
    if args.default_interaction is not None:
        default = _default_interaction(args.default_interaction, loaded)
    return loaded.instantiate(), default


def _default_interaction(name: str, loaded: Any) -> str:
    """``--default-interaction NAME``, checked against the config's interactions."""
    if name in loaded.names:
        return name
    from .._names import suggest, summarize
    from ..errors import ConfigError

    hint = suggest(name, loaded.names, n=1)
    raise ConfigError(
        [
            f"--default-interaction {name!r} is not one of the interactions configured in "
            f"{loaded.source or 'the config'} ({summarize(loaded.names) or 'none'}){hint}"
        ]
    )


def _policy(args: argparse.Namespace, registry: Any) -> Any:
    """The ``--policy`` (``replay`` when none is given), created with its options."""
    from ..errors import ConflictError
    from ..runtime.policies import create_policy

    policy_given = args.policy is not None
    args.policy = args.policy or "replay"
    try:
        policy_cls = registry.policy(args.policy)
    except ConflictError as exc:
        if policy_given:
            raise
        raise ConflictError(
            f"no --policy was given, so the default 'replay' is used, but {exc}"
        ) from None
    policy = create_policy(policy_cls, policy_options(args), name=args.policy)
    _warn_without_limit(policy_cls, args)
    return policy


def policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """``-p KEY=VALUE`` (VALUE read as JSON when it parses), ``--model`` and ``--base-url``."""
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


def _warn_without_limit(policy_cls: Any, args: argparse.Namespace) -> None:
    """A live policy with no turn limit may never stop: say so, once, on stderr."""
    from ..runtime.policies.base import ReplayPolicy

    if policy_cls is ReplayPolicy or args.max_assistant_turns or args.max_user_turns:
        return
    if not args.config:  # no interactions: every episode is a single turn
        return
    sys.stderr.write(
        f"interactions: warning: no turn limit is set, so with --policy {args.policy} an "
        "episode ends only when its interaction terminates it (or the policy stops); set one "
        "with --max-assistant-turns N or --max-user-turns N\n"
    )


# -- where the results go ------------------------------------------------------------


class RecordSink:
    """Each finished record: stamped for ``--resume``, to ``--output`` and to ``--report``."""

    def __init__(self, output: Any, report: Any, stamp: dict[str, Any], track: bool) -> None:
        self.output = output
        self.report = report
        self.stamp = stamp
        #: With ``track`` (``--resume``), the ``(index, repeat)`` of every record written.
        self.played: set[tuple[int, int]] | None = set() if track else None

    def write(self, record: dict[str, Any]) -> None:
        if self.played is not None:  # a plain run keeps nothing per episode
            self.played.add(record_key(record))
        if self.stamp:
            record.update(self.stamp)
        if self.output is not None:
            self.output.write(record)
        if self.report is not None:
            self.report.add(record)


class RecordHandler:
    """The ``on_record`` of a run: each episode record to the sink, counted, shown on the bar.

    A ``--trace`` that could not be written (a full disk, a reader gone from the
    pipe) stops the run here, before the next record, as a failing ``--output`` does.
    """

    def __init__(
        self, sink: RecordSink | None, progress: Progress | None, trace: Any = None
    ) -> None:
        self.sink = sink
        self.progress = progress
        self.trace = trace
        self.done = 0
        self.errors = 0
        self.pid = os.getpid()

    def __call__(self, record: Any) -> None:
        if os.getpid() != self.pid:
            _leave_a_forked_copy()
        if self.trace is not None and self.trace.failure is not None:
            raise self.trace.failure
        if self.sink is not None:
            self.sink.write(record.to_dict())
        self.done += 1
        self.errors += bool(record.errors)
        if self.progress is not None:
            self.progress.update(self.done, self.errors)


def _leave_a_forked_copy() -> None:
    """End a copy of the run that plugin code made with ``os.fork()`` and returned into.

    The copy would play the rest of the run a second time, writing each record
    and the summary twice. It ends at its first record, writing nothing (its
    copies of the files' unwritten lines are dropped with it).
    """
    sys.stderr.write(
        f"interactions: warning: plugin code forked the run (process {os.getpid()}) and "
        "returned into it; that copy stops here, the run goes on in the original\n"
    )
    sys.stderr.flush()
    import signal

    os.kill(os.getpid(), signal.SIGKILL)  # at once, as os._exit: no cleanup, no flush


@dataclass
class RunOutputs:
    """The open outputs of a run; :meth:`close` them whatever happens."""

    progress: Progress | None
    resume: Resume | None
    output: Any
    trace: Any
    report: Any
    sink: RecordSink | None

    def close(self) -> None:
        """Clear the bar and close the files; the trace is closed even when the output fails.

        A ``--trace`` that failed after the last record is told here.
        """
        if self.progress is not None:
            self.progress.close()
        try:
            if self.output is not None:
                self.output.close()
        finally:
            if self.trace is not None:
                self.trace.close()
                if getattr(self.trace, "failure", None) is not None:
                    raise self.trace.failure


def open_outputs(args: argparse.Namespace, inputs: RunInputs) -> RunOutputs:
    """The progress bar, the ``--resume`` state, then the files, in that order."""
    progress = progress_bar(args, inputs.reader, inputs.policy)
    resume = resume_state(args, inputs.reader)
    output, trace = _open_files(args)
    report = None
    if args.report:
        from ..report import RunData

        # Written at the end, after plugin code that may have changed the working folder.
        args.report = os.path.abspath(args.report)

        report = RunData(os.path.basename(args.output or args.data))
    stamp = resume.stamp if resume is not None else {}
    sink = None
    if output is not None or report is not None:
        sink = RecordSink(output, report, stamp, track=bool(args.resume))
    return RunOutputs(progress, resume, output, trace, report, sink)


class RunTrace(TraceWriter):
    """``--trace``: a trace writer whose failure stops the run instead of every episode.

    A line that cannot be written (the disk is full, the pipe's reader is gone)
    is not the episode's fault: :meth:`write` keeps the error in :attr:`failure`
    for :class:`RecordHandler` to stop the run with, where the plain writer's
    error, raised again for every later event, would make each later episode an
    error (its exception's traceback growing with each, at a quadratic cost).
    """

    failure: DatasetError | None = None

    def write(self, obj: Any) -> None:
        if self.failure is not None:
            return
        try:
            super().write(obj)
        except DatasetError as exc:
            self.failure = exc.with_traceback(None)


def _open_files(args: argparse.Namespace) -> tuple[Any, Any]:
    """Open ``--output`` and ``--trace``; when one fails, the other is not left behind."""
    import functools

    from ..runtime.record import shorten_record
    from ..runtime.records import LineWriter

    appending = bool(args.resume)
    opened: list[Any] = []
    created: list[str] = []
    try:
        for flag, path, writer in (
            ("--output", args.output, functools.partial(LineWriter, shorten=shorten_record)),
            ("--trace", args.trace, RunTrace),
        ):
            if not path:
                opened.append(None)
                continue
            existed = os.path.lexists(path)
            # opening a pipe waits for its reader: a run that waits without a word looks hung
            with telling_a_wait(path, pipe_note(path, flag)):
                opened.append(
                    writer(path, overwrite=args.overwrite, append=appending, autoflush=True)
                )
            if not existed:
                created.append(path)
    except BaseException:
        _discard(opened, created)
        raise
    output, trace = opened
    return output, trace


def _discard(opened: list[Any], created: list[str]) -> None:
    """Close what was opened and remove the files created: nothing was written to them."""
    for writer in opened:
        if writer is not None:
            writer.close()
    for path in created:
        try:
            os.remove(path)
        except OSError:
            pass


# -- --resume -------------------------------------------------------------------


class Resume:
    """The records already in ``--output`` (``--resume``) and this run's fingerprints."""

    def __init__(self, state: Any, stamp: dict[str, Any], retry_errors: bool) -> None:
        self.state = state
        self.stamp = stamp
        self.done = state.done(retry_errors) if state is not None else set()
        self.resumed = 0

    def complete(self, summary: Any, outputs: RunOutputs) -> None:
        """Add every earlier record this run did not record again to the summary and the
        report (their counters: no conversation), errored ones left out by ``--limit``
        or a stop too, so both cover the dataset."""
        if self.state is None:
            return
        played = summary.episodes
        again = (outputs.sink.played if outputs.sink is not None else None) or set()
        earlier = self.state.done(retry_errors=False) - again
        for record in self.state.episodes(earlier):
            summary.add(record)
            if outputs.report is not None:
                outputs.report.add(record.to_dict())
        self.resumed = summary.episodes - played


def _check_flags(args: argparse.Namespace) -> None:
    """``--retry-errors`` implies ``--resume``, which needs ``--output`` and not ``--overwrite``."""
    from ..errors import ConfigError

    if args.retry_errors:
        args.resume = True
    if args.resume:
        if not args.output:
            raise ConfigError(["--resume needs --output FILE (the records of the run to continue)"])
        if args.overwrite:
            raise ConfigError(
                ["--resume continues --output and --overwrite replaces it: choose one"]
            )


def _fingerprints(args: argparse.Namespace) -> tuple[str, str | None]:
    """The hash of the settings that shape an episode, and of the data (``None``: not a file)."""
    from ..runtime.records import config_hash, data_hash

    options = {
        "policy": args.policy,
        "policy_options": policy_options(args),
        "max_assistant_turns": args.max_assistant_turns,
        "max_user_turns": args.max_user_turns,
        "default_interaction": args.default_interaction,
    }
    if getattr(args, "repeat", 1) != 1:  # absent when 1: earlier runs' records still match
        options["repeat"] = args.repeat
    return config_hash(args.config, options), data_hash(args.data)


def resume_state(args: argparse.Namespace, reader: Any = None) -> Resume | None:
    """Fingerprint this run; with ``--resume``, read what ``--output`` already holds.

    ``None`` when there is no ``--output`` (nothing to stamp, nothing to resume).
    ``reader`` (the dataset) bounds the ``index`` a resumed record may have.
    """
    from ..errors import ConfigError
    from ..runtime.records import is_special_file, read_records

    _check_flags(args)
    if not args.output:
        return None
    config, data = _fingerprints(args)
    stamp = {"config_hash": config, "data_hash": data}
    if not args.resume:
        return Resume(None, stamp, False)
    if data is None:
        raise ConfigError(
            [
                "--resume needs --data to be a regular file (it checks that the records were "
                "made from the same data), not standard input or a pipe"
            ]
        )
    if is_special_file(args.output):
        raise ConfigError(
            [
                f"--resume reads --output back, so it must be a regular file; {args.output} "
                "is a pipe or device (write to a file, or leave out --resume)"
            ]
        )
    samples = reader.count() if reader is not None else None
    state = read_records(args.output, config, data, samples=samples or None)
    _refuse_other_repeats(args, state)
    if state.unmarked:
        sys.stderr.write(
            f"interactions: warning: {state.unmarked} record(s) in {args.output} carry no "
            "config or data fingerprint (an older version wrote them); they are trusted "
            "to belong to this run\n"
        )
    return Resume(state, stamp, args.retry_errors)


def _refuse_other_repeats(args: argparse.Namespace, state: Any) -> None:
    """Refuse records of a repeat this run does not play (``repeat`` >= ``--repeat``).

    The fingerprint holds ``--repeat`` only when it is not 1, and older files hold
    none, so such records can pass it; counted, they would add episodes no sample
    has (12 for 11 samples) and replay the repeat they stand in for.
    """
    from ..errors import ConfigError

    repeat = getattr(args, "repeat", 1)
    beyond = next((key for key in state.records if key[1] >= repeat), None)
    if beyond is not None:
        raise ConfigError(
            [
                f"{args.output} holds a record of sample {beyond[0]}, repeat {beyond[1]:,}, "
                f"but this run plays --repeat {repeat} (repeats 0 to {repeat - 1}); resume "
                "with the --repeat of the run that wrote it, or write to a new --output file"
            ]
        )


# -- the progress bar ----------------------------------------------------------


def progress_bar(args: argparse.Namespace, reader: Any, policy: Any) -> Progress | None:
    """The bar for this run, or ``None`` when it is not to be shown.

    Its total counts episodes (samples times ``--repeat``); counting the samples
    reads the data once more, which is why it is done only for a terminal.
    """
    if args.no_progress or getattr(policy, "interactive", False) or not sys.stderr.isatty():
        return None
    from ._command import Progress

    total = reader.count()
    samples_total = min(total, args.limit) if args.limit else total
    return Progress(sys.stderr, samples_total * args.repeat)
