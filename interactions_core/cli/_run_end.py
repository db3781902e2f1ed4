"""The end of ``interactions run``: the summary, what the user should know, the exit code.

The summary goes to standard output (text, or one JSON object with
``--json``) so it can be piped; everything else goes to standard error, in a
fixed order: bad rows, samples that ran without their interaction, plugin
calls that blocked the event loop, then either the stop or the errors. The
exit code is 0, 1 when any episode errored, or 130 / 143 after Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from ._run_outputs import RunOutputs
    from ._run_setup import RunInputs

__all__ = ["Played", "finish"]


class Played:
    """What a run leaves for its report: the summary, sessions left open, the watchdog."""

    def __init__(self, summary: Any, still_open: int, watchdog: Any = None) -> None:
        self.summary = summary
        self.still_open = still_open
        #: The local run's ``LoopWatchdog`` (what blocked the event loop); ``None`` with ``--ray``.
        self.watchdog = watchdog


def finish(
    args: argparse.Namespace, inputs: RunInputs, outputs: RunOutputs, played: Played, stopped: int
) -> int:
    """Complete and print the summary, write the report, tell stderr; return the exit code.

    ``stopped`` is 128 + the number of the stop signal received, or 0.
    """
    summary = played.summary
    if outputs.resume is not None:
        _complete_resumed(args, outputs.resume, summary)
    summary.skipped_rows = inputs.reader.skipped
    if outputs.report is not None and outputs.report.seen:
        from ..report import write_report

        write_report([outputs.report], args.report)
    _print_summary(args, summary, played.watchdog)
    _tell_bad_rows(inputs.reader)
    if inputs.unrouted:
        sys.stderr.write(
            f"note: no CONFIG was given, so {inputs.unrouted} sample(s) with interaction_kwargs "
            "ran as single-turn episodes without their interaction\n"
        )
    if played.watchdog is not None:
        _tell_blocking(played.watchdog)
    if summary.interrupted or stopped:
        return _tell_stop(args, summary, played.still_open, stopped)
    if summary.errors:
        _tell_errors(args, summary)
        return 1
    return 0


def _complete_resumed(args: argparse.Namespace, resume: Any, summary: Any) -> None:
    """A resumed run's summary covers the earlier records too; say how many there were."""
    resume.complete(summary)
    if resume.state is not None:
        sys.stderr.write(
            f"interactions: resumed {args.output}: {resume.resumed} episode(s) from earlier "
            f"runs, {summary.episodes - resume.resumed} played now\n"
        )


def _print_summary(args: argparse.Namespace, summary: Any, watchdog: Any) -> None:
    if not args.json:
        print(summary.format())
        return
    from ._output import print_json

    document = summary.as_dict()
    if watchdog is not None and watchdog.blocks:  # plugin methods that blocked the event loop
        document["blocking"] = {
            name: {"times": times, "longest_s": round(longest, 3)}
            for name, (times, longest) in sorted(watchdog.blocks.items())
        }
    print_json(document)


def _tell_bad_rows(reader: Any) -> None:
    """The first ten rows of the data that were skipped, and how many more."""
    if not reader.bad_rows:
        return
    err = sys.stderr
    err.write(f"skipped {reader.skipped} bad row{'s' if reader.skipped != 1 else ''}:\n")
    for bad in reader.bad_rows[:10]:
        err.write(f"  {bad}\n")
    if reader.skipped > 10:
        err.write(f"  ... and {reader.skipped - 10} more\n")


def _tell_blocking(watchdog: Any) -> None:
    for line in watchdog.report():
        sys.stderr.write(f"interactions: warning: {line}\n")
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
        sys.stderr.write(
            f"  sample {example['sample_id']!r}: {example['where']}: {example['message']}\n"
        )
