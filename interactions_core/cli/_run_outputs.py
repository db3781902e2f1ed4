"""Where the results of ``interactions run`` go: ``--output``, ``--trace``, ``--report``, the bar.

Local and sharded (``--ray``) runs hand each finished episode record to the
same :class:`RecordHandler`, so their files, reports and progress bars are the
same. The files are opened together and closed together, and a file this run
created is removed again when opening the next one fails.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from ._progress import Progress
    from ._resume import Resume
    from ._run_setup import RunInputs

__all__ = ["RecordHandler", "RecordSink", "RunOutputs", "open_outputs"]


class RecordSink:
    """Each finished record: stamped for ``--resume``, to ``--output`` and to ``--report``."""

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


class RecordHandler:
    """The ``on_record`` of a run: each episode record to the sink, counted, shown on the bar."""

    def __init__(self, sink: RecordSink | None, progress: Progress | None) -> None:
        self.sink = sink
        self.progress = progress
        self.done = 0
        self.errors = 0

    def __call__(self, record: Any) -> None:
        if self.sink is not None:
            self.sink.write(record.to_dict())
        self.done += 1
        self.errors += bool(record.errors)
        if self.progress is not None:
            self.progress.update(self.done, self.errors)


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
        """Clear the bar and close the files; the trace is closed even when the output fails."""
        if self.progress is not None:
            self.progress.close()
        try:
            if self.output is not None:
                self.output.close()
        finally:
            if self.trace is not None:
                self.trace.close()


def open_outputs(args: argparse.Namespace, inputs: RunInputs) -> RunOutputs:
    """The progress bar, the ``--resume`` state, then the files, in that order."""
    from ._progress import progress_bar
    from ._resume import resume_state

    progress = progress_bar(args, inputs.reader, inputs.policy)
    resume = resume_state(args)
    output, trace = _open_files(args)
    report = None
    if args.report:
        from ..report import RunData

        report = RunData(os.path.basename(args.output or args.data))
    stamp = resume.stamp if resume is not None else {}
    sink = RecordSink(output, report, stamp) if output is not None or report is not None else None
    return RunOutputs(progress, resume, output, trace, report, sink)


def _open_files(args: argparse.Namespace) -> tuple[Any, Any]:
    """Open ``--output`` and ``--trace``; when one fails, the other is not left behind."""
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
