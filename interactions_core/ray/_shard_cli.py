"""The ``--ray`` branch of ``interactions run``: the arguments become a sharded run.

It refuses what cannot run on workers (``--trace``, ``--policy human``),
builds :class:`~interactions_core.ray.shard.RunSettings` from the arguments,
chooses the cluster, and writes and counts each record as the local branch
does. A run that fails before its first record leaves no empty ``--output``
behind, so the corrected command can be rerun as it is.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

__all__ = ["run_from_cli"]


def run_from_cli(
    args: Any,
    source: Iterable[Mapping[str, Any]],
    default: str | None,
    policy_options: Mapping[str, Any],
    output: Any = None,
    progress: Any = None,
    skip: Container[tuple[int, int]] | None = None,
    stopped: list[int] | None = None,
) -> tuple[Any, int]:
    """The ``--ray`` branch of ``interactions run``: settings from the arguments, then shard.

    ``output`` is the run's record sink (the same one a local run writes
    through, which stamps records for ``--resume``); ``skip`` holds the
    ``(index, repeat)`` keys a resumed run does not play again; ``stopped[0]``
    receives 128 + the number of a stop signal, as in the local branch. Returns
    ``(summary, still_open)`` like the local branch (sessions live in the
    workers, which finalize each one before returning its record).
    """
    from ..cli._run_outputs import RecordHandler
    from .shard import run_sharded

    settings = _settings(args, default, policy_options)
    on_record = RecordHandler(output, progress)  # the local branch's own handler
    address = _cluster_address(args.ray)
    try:
        summary = run_sharded(
            source, settings, address=address, on_record=on_record, skip=skip, stopped=stopped
        )
    except BaseException:
        if not args.resume:
            _remove_if_unused(getattr(output, "output", None))
        raise
    return summary, 0


def _settings(args: Any, default: str | None, policy_options: Mapping[str, Any]) -> Any:
    """The run's settings from the arguments; options no worker can honour are refused."""
    from .shard import RunSettings

    _refuse_unsupported(args)
    config = None
    if args.config:
        from .._config import load_source

        config, _, _ = load_source(args.config)
    return RunSettings(
        config,
        policy=args.policy,
        policy_options=policy_options,
        default=default,
        concurrency=args.concurrency,
        max_assistant_turns=args.max_assistant_turns,
        max_user_turns=args.max_user_turns,
        timeout=args.timeout,
        repeat=args.repeat,
        pass_score=args.pass_score,
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
