"""``interactions run``: play episodes of a dataset and print a summary.

This module declares the command and reads as the steps of a run; each step
lives in its own module: ``_run_setup`` (arguments to samples, interactions
and policy), ``_run_outputs`` (records, trace, report, progress bar, with
``_resume`` for ``--resume``), ``_local_run`` (the event loop and the stop
signals; ``--ray`` shards through ``interactions_core.ray.shard`` instead) and
``_run_end`` (the summary, the messages and the exit code). See ``docs/run.md``
for the reference and worked examples.
"""

from __future__ import annotations

from ._command import (
    Arg,
    Command,
    config_file,
    default_interaction,
    finite_number,
    flag,
    positive_int,
    timeout,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from ._run_end import Played
    from ._run_outputs import RunOutputs
    from ._run_setup import RunInputs

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
    Arg("--max-assistant-turns", type=positive_int, metavar="N", help="turn limit"),
    Arg("--max-user-turns", type=positive_int, metavar="N", help="feedback message limit"),
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
        from ._policies import list_policies

        return list_policies(args.json)
    from ._run_end import finish
    from ._run_outputs import open_outputs
    from ._run_setup import prepare

    inputs = prepare(args)
    outputs = open_outputs(args, inputs)
    stopped = [0]  # 128 + the number of the first stop signal received
    try:
        played = _play(args, inputs, outputs, stopped)
    finally:
        outputs.close()
    return finish(args, inputs, outputs, played, stopped[0])


def _play(
    args: argparse.Namespace, inputs: RunInputs, outputs: RunOutputs, stopped: list[int]
) -> Played:
    """Every episode not already in a resumed ``--output``: locally, or sharded with ``--ray``."""
    from ._local_run import LocalRun
    from ._run_end import Played

    skip = outputs.resume.done if outputs.resume is not None else None
    if args.ray is None:
        return LocalRun(args, inputs, outputs, stopped).play(skip)
    from ..ray.shard import run_from_cli
    from ._run_setup import policy_options

    summary, still_open = run_from_cli(
        args,
        inputs.samples(),
        inputs.default,
        policy_options(args),
        outputs.sink,
        outputs.progress,
        skip,
        stopped,
    )
    return Played(summary, still_open)
