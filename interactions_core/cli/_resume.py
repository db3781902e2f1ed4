"""``run --resume``: what ``--output`` already holds, and the fingerprints that prove it belongs.

Every record a run writes to ``--output`` is stamped with a hash of the run's
settings and one of its data. ``--resume`` reads the file back, refuses records
made from other settings or other data, plays only the samples without a
record (``--retry-errors``: errored ones too) and adds the earlier records to
the summary, so it covers the whole dataset.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = ["Resume", "resume_state"]


class Resume:
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
    from ._run_setup import policy_options

    options = {
        "policy": args.policy,
        "policy_options": policy_options(args),
        "max_assistant_turns": args.max_assistant_turns,
        "max_user_turns": args.max_user_turns,
        "default_interaction": args.default_interaction,
    }
    return config_hash(args.config, options), data_hash(args.data)


def resume_state(args: argparse.Namespace) -> Resume | None:
    """Fingerprint this run; with ``--resume``, read what ``--output`` already holds.

    ``None`` when there is no ``--output`` (nothing to stamp, nothing to resume).
    """
    from ..errors import ConfigError
    from ..runtime.records import read_records

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
    state = read_records(args.output, config, data)
    if state.unmarked:
        sys.stderr.write(
            f"interactions: warning: {state.unmarked} record(s) in {args.output} carry no "
            "config or data fingerprint (an older version wrote them); they are trusted "
            "to belong to this run\n"
        )
    return Resume(state, stamp, args.retry_errors)
