"""From the arguments of ``interactions run`` to what it plays, checked before anything is written.

The order of the checks is the order of the errors a user meets: the data is
required, no output may destroy an input or another output, an existing output
is kept unless ``--overwrite`` (or continued with ``--resume``), then the config
is loaded and the policy created. A mistake in any of them stops the run with
every file untouched.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Iterator
    from typing import Any

__all__ = ["RunInputs", "check_paths", "policy_options", "prepare"]


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
        from ..runtime.samples import interaction_kwargs_of

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
    """An existing output needs ``--overwrite``; ``--resume`` appends to records and trace."""
    from ..runtime.records import refuse_existing

    resuming = args.resume or args.retry_errors
    for path in (args.output, args.trace, args.report):
        if path and not (resuming and path != args.report):
            refuse_existing(path, args.overwrite)


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
    from .._names import suggest
    from ..errors import ConfigError

    hint = suggest(name, loaded.names, n=1)
    raise ConfigError(
        [
            f"--default-interaction {name!r} is not one of the interactions configured in "
            f"{loaded.source or 'the config'} ({', '.join(loaded.names) or 'none'}){hint}"
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
