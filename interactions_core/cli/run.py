"""``interactions run``: play episodes of a dataset and print a summary.

This module declares the command and reads as the steps of a run:
``_run_setup`` (arguments to samples, interactions and policy; records,
trace, report, progress bar, ``--resume``),
``_run_play`` (playing here, with the event loop and the stop signals, or on
Ray workers with ``--ray``), then the end of the run, here: the summary, what
the user should know, and the exit code. See ``docs/run.md`` for the
reference and worked examples.

The end of a run: the summary goes to standard output (text, or one JSON
object with ``--json``) so it can be piped; everything else goes to standard
error, in a fixed order: bad rows, samples that ran without their interaction,
plugin calls that blocked the event loop, then either the stop or the errors.
The exit code is 0, 1 when any episode errored or every row was bad, or 130 /
143 after Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import os
import sys

from ..errors import cut_text, shown
from ._command import (
    Arg,
    Command,
    config_file,
    default_interaction,
    finite_number,
    flag,
    own_stdout,
    positive_int,
    printable,
    printable_lines,
    timeout,
    turn_limit,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from ._run_play import Played
    from ._run_setup import RunInputs, RunOutputs

#: The config, the samples and how they are read; the policy.
_INPUT = [
    config_file(
        "interactions config (YAML); without one, every episode is single-turn", optional=True
    ),
    Arg("--data", metavar="FILE", help="samples: JSONL, or parquet with pyarrow"),
    Arg("--format", choices=("jsonl", "parquet"), help="data format (default: suffix)"),
    Arg(
        "--policy",
        default=None,
        metavar="NAME",
        help="replay (default), openai, human, or a plugin's policy",
    ),
    Arg(
        "-p",
        "--policy-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy option (repeatable); VALUE is read as JSON when it parses, else as text",
    ),
]

#: The model side, how many episodes at once, and the turn limits.
_POLICY_AND_LIMITS = [
    Arg("--model", help="shortcut for --policy-option model=NAME (openai)"),
    Arg("--base-url", help="shortcut for --policy-option base_url=URL (openai)"),
    Arg(
        "--concurrency",
        type=positive_int,
        default=16,
        metavar="N",
        help="episodes in flight (default 16); the openai policy keeps one request per "
        "episode in flight unless -p concurrency=N caps it",
    ),
    Arg(
        "--repeat",
        type=positive_int,
        default=1,
        metavar="K",
        help="play every sample K times as independent episodes; the summary gives pass@k "
        "for k = 1..K (default 1)",
    ),
    Arg(
        "--pass-score",
        type=finite_number,
        default=1.0,
        metavar="X",
        help="an episode passes (for pass@k) when its final score is at least X (default 1.0)",
    ),
    Arg("--max-assistant-turns", type=turn_limit, metavar="N", help="turn limit (at most 100,000)"),
    Arg("--max-user-turns", type=turn_limit, metavar="N", help="feedback message limit"),
    timeout("a timeout is an error for that episode only"),
    default_interaction("samples"),
]

#: Where records, traces and reports go, and how the run is shown and stopped.
_OUTPUT_AND_CONTROL = [
    Arg("--output", metavar="FILE", help="write one JSON record per episode"),
    Arg("--trace", metavar="FILE", help="write a JSONL trace of every session event"),
    Arg(
        "--report",
        metavar="FILE",
        help="also write an HTML report of the run (see 'interactions report')",
    ),
    flag("--overwrite", "replace an existing --output/--trace/--report file"),
    flag(
        "--resume",
        "continue the run whose records are in --output: play only the samples without "
        "a record, append, and summarize the whole dataset",
    ),
    flag("--retry-errors", "with --resume, play errored samples again too (implies --resume)"),
    flag("--strict", "stop at the first bad row instead of skipping it"),
    Arg("--limit", type=positive_int, metavar="N", help="run the first N samples only"),
    flag("--json", "print the summary as one JSON object"),
    flag("--no-progress", "never show the progress bar"),
    flag("--list-policies", "list the available policies and exit"),
    Arg(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="shard the episodes over Ray workers: the cluster at ADDRESS (HOST:PORT or "
        "'auto'), else a new local one; put it after CONFIG (docs/ray.md)",
    ),
]

COMMAND = Command(
    "run",
    help="play episodes of a dataset between a policy and interactions",
    description="Play one episode per sample of a dataset: a policy (the model side) "
    "replies, the sample's interaction (chosen by interaction_kwargs.name) judges each "
    "turn, until it terminates, a turn limit is reached or the policy has nothing more "
    "to say. Prints a summary; exits 1 when any episode errored, 130 when interrupted "
    "(Ctrl-C), 143 when terminated (SIGTERM).",
    arguments=[*_INPUT, *_POLICY_AND_LIMITS, *_OUTPUT_AND_CONTROL],
)


def run(args: argparse.Namespace) -> int:
    """Check, open the outputs, play (here or on Ray), close, then report; the exit code."""
    if args.list_policies:
        return list_policies(args.json)
    from ._run_play import LocalRun, ShardedRun
    from ._run_setup import open_outputs, prepare

    args.umask = os.umask(0o022)  # read before plugin code runs, which may change it
    os.umask(args.umask)
    inputs = prepare(args)
    outputs = open_outputs(args, inputs)
    stopped = [0]  # 128 + the number of the first stop signal received
    # Every episode not already in a resumed --output: locally, or sharded with --ray.
    branch = (LocalRun if args.ray is None else ShardedRun)(args, inputs, outputs, stopped)
    try:
        try:
            played = branch.play(outputs.resume.done if outputs.resume is not None else None)
        finally:
            outputs.close()
        return finish(args, inputs, outputs, played, stopped[0])
    finally:
        if branch.closing is not None:  # the run's stop signals, held until the summary is out
            branch.closing.restore()


def list_policies(as_json: bool) -> int:
    """Print every policy (name, distribution, kind, target, status); exit code 0."""
    from ..registry import get_registry
    from ..runtime.policies import list_policies as policies

    rows = [p.as_dict() for p in policies(get_registry())]
    if as_json:
        from ._command import print_json

        print_json(rows)
        return 0
    from ._command import table

    headers = ("name", "distribution", "kind", "target", "status")
    print(table(headers, [[str(r[h] or "") for h in headers] for r in rows]))
    problems = [r for r in rows if r["error"]]
    if problems:
        print()
        for r in problems:
            print(f"{r['name']} ({r['distribution']}): {r['status']}: {r['error']}")
    return 0


# -- the end of a run -----------------------------------------------------------


def finish(
    args: argparse.Namespace, inputs: RunInputs, outputs: RunOutputs, played: Played, stopped: int
) -> int:
    """Complete and print the summary, write the report, tell stderr; return the exit code.

    ``stopped`` is 128 + the number of the stop signal received, or 0.
    """
    summary = played.summary
    if outputs.resume is not None:
        _complete_resumed(args, outputs, summary)
    summary.skipped_rows = inputs.reader.skipped
    unwritten = _write_report(args, outputs)
    unprinted = _print_summary(args, summary, played.watchdog)
    code = _tell(args, inputs, played, stopped)
    for problem in (unprinted, unwritten):  # told last, the summary and the rest above it
        if problem is not None:
            sys.stderr.write(f"interactions: error: {printable_lines(problem)}\n")
            code = code or 1
    return code


def _write_report(args: argparse.Namespace, outputs: RunOutputs) -> str | None:
    """Write ``--report``; why it could not be (a full disk), or ``None``.

    A report that cannot be written loses no record and is told after the
    summary, which it would otherwise have kept from being printed.
    """
    if outputs.report is None or not outputs.report.seen:
        return None
    from .._files import telling_a_wait
    from ..report import RecordsError, write_report
    from ..runtime.records import is_special_file
    from ._command import pipe_note

    try:
        with telling_a_wait(args.report, pipe_note(args.report, "--report")):
            write_report([outputs.report], args.report)
        if not is_special_file(args.report):  # the umask the run began with, not a plugin's
            try:
                os.chmod(args.report, 0o666 & ~args.umask)
            except OSError:  # written all the same, readable as the folder allows
                pass
    except RecordsError as exc:
        return str(exc)
    except Exception as exc:  # a fault of the report's own: still after the summary
        return f"the report could not be made: {exc.__class__.__name__}: {exc} (please report it)"
    return None


def _tell(args: argparse.Namespace, inputs: RunInputs, played: Played, stopped: int) -> int:
    """Everything after the summary, on stderr in its fixed order; the exit code."""
    summary = played.summary
    _tell_bad_rows(inputs.reader)
    if inputs.unrouted:
        sys.stderr.write(
            f"note: no CONFIG was given, so {inputs.unrouted} sample(s) with interaction_kwargs "
            "ran as single-turn episodes without their interaction\n"
        )
    if played.watchdog is not None:
        _tell_blocking(played.watchdog)
    if played.broken is not None:
        where = f"; records are in {args.output} (continue with --resume)" if args.output else ""
        told = f"{played.broken} after {summary.episodes} episode(s) "
        sys.stderr.write(
            printable(f"interactions: error: {told}({played.still_open} session(s) left open)")
            + printable(where)
            + "\n"
        )
        return 1
    if summary.interrupted or stopped:
        return _tell_stop(args, summary, played.still_open, stopped)
    if not summary.episodes and inputs.reader.skipped:  # a gzip file, say: nothing was run
        sys.stderr.write(
            f"interactions: error: no episode was played: every row of {args.data} was bad "
            "(see above)\n"
        )
        return 1
    if summary.errors:
        _tell_errors(args, summary)
        return 1
    return 0


def _complete_resumed(args: argparse.Namespace, outputs: RunOutputs, summary: Any) -> None:
    """A resumed run's summary covers the earlier records too; say how many there were."""
    resume = outputs.resume
    if resume is None:
        return
    resume.complete(summary, outputs)
    if resume.state is not None:
        sys.stderr.write(
            f"interactions: resumed {args.output}: {resume.resumed} episode(s) from earlier "
            f"runs, {summary.episodes - resume.resumed} played now\n"
        )


def _print_summary(args: argparse.Namespace, summary: Any, watchdog: Any) -> str | None:
    """The summary on standard output; a reader gone (``| head``) still gets stderr's part.

    What follows the summary (errored episodes, bad rows, an unwritten report) and
    the exit code do not depend on anyone reading it. Standard output that refuses
    the summary (a full disk) has it printed on stderr; why is returned, to be told.
    """
    from ._command import StdoutError, stdout_reader_gone, stdout_unwritable

    try:
        _summary_to_stdout(args, summary, watchdog)
    except BrokenPipeError:
        stdout_reader_gone()
    except StdoutError as exc:
        if args.json:  # the text summary is on stderr already
            import json

            sys.stderr.write("the summary, which standard output refused:\n")
            sys.stderr.write(json.dumps(summary.as_dict(), indent=2, default=str) + "\n")
        return stdout_unwritable(exc)
    return None


def _summary_to_stdout(args: argparse.Namespace, summary: Any, watchdog: Any) -> None:
    if not args.json:
        # Error kinds are plugin class names, which may hold control characters.
        text = printable_lines(summary.format())
        try:
            own_stdout()  # a plugin may have replaced sys.stdout: the summary is not its
            print(text)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except (ValueError, OSError) as exc:
            import errno

            from ._command import StdoutError

            if isinstance(exc, OSError) and exc.errno != errno.EBADF:  # a full disk
                sys.stderr.write(f"the summary, which standard output refused:\n{text}\n")
                raise StdoutError(exc.errno, exc.strerror) from exc
            # closed by plugin code (sys.stdout.close(), os.close(1))
            sys.stderr.write(
                "interactions: warning: standard output was closed during the run (by plugin "
                f"code?); the summary is printed here instead\n{text}\n"
            )
        return
    from ._command import print_json

    document = summary.as_dict()
    if watchdog is not None and watchdog.blocks:  # plugin methods that blocked the event loop
        document["blocking"] = {
            name: {"times": times, "longest_s": round(longest, 3)}
            for name, (times, longest) in sorted(watchdog.blocks.items())
        }
    print_json(document)


def _text(value: Any) -> str:
    """A field of a record's error as text: itself when it is text, else shown."""
    return value if type(value) is str else shown(value)


def _tell_bad_rows(reader: Any) -> None:
    """The first ten rows of the data that were skipped, and how many more."""
    if not reader.bad_rows:
        return
    err = sys.stderr
    err.write(f"skipped {reader.skipped} bad row{'s' if reader.skipped != 1 else ''}:\n")
    for bad in reader.bad_rows[:10]:
        err.write(f"  {printable(str(bad))}\n")
    if reader.skipped > 10:
        err.write(f"  ... and {reader.skipped - 10} more\n")


def _tell_blocking(watchdog: Any) -> None:
    for line in watchdog.report():
        sys.stderr.write(f"interactions: warning: {printable_lines(line)}\n")
    if watchdog.blocks:
        from ..runtime.watchdog import BLOCKING_ADVICE

        sys.stderr.write(f"  ({BLOCKING_ADVICE})\n")


def _tell_stop(args: argparse.Namespace, summary: Any, still_open: int, stopped: int) -> int:
    """How far an interrupted run got, and how to continue it; the exit code."""
    where = f"; records are in {args.output}" if args.output else ""
    how = "terminated" if stopped == 143 else "interrupted"
    sys.stderr.write(
        f"interactions: {how} after {summary.episodes} episode(s); open sessions "
        f"finalized ({still_open} left open){where}\n"
    )
    if args.output:
        sys.stderr.write("  (continue with the same command and --resume)\n")
    return stopped or 130


def _tell_errors(args: argparse.Namespace, summary: Any) -> None:
    """How many episodes errored, and the examples the summary keeps."""
    sys.stderr.write(
        f"interactions: {summary.errors} of {summary.episodes} episode(s) errored"
        + (f" (records with 'errors' in {args.output})" if args.output else "")
        + ":\n"
    )
    for example in summary.error_examples:
        # A resumed record's error may lack 'where' or hold odd values (a hand-made file).
        at = f" (at {cut_text(_text(example['at']), 1000)})" if example.get("at") else ""
        what = ": ".join(_text(example[k]) for k in ("where", "message") if k in example)
        told = f"  sample {shown(example.get('sample_id'))}: {cut_text(what, 1000)}{at}"
        sys.stderr.write(printable(told) + "\n")
        if example.get("traceback"):  # INTERACTIONS_DEBUG=1
            told = printable_lines(str(example["traceback"]))
            sys.stderr.write("    " + told.replace("\n", "\n    ") + "\n")
