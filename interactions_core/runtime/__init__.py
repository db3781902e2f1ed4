"""The episode runtime: play multi-turn episodes between a policy and interactions.

One concept per module:

* :mod:`.session` — :class:`Session`, one interaction lifecycle that always finalizes;
* :mod:`.episode` — :class:`EpisodeLoop` (verl's multi-turn semantics) and
  :class:`EpisodeRecord`;
* :mod:`.runner` — :class:`Runner` / :func:`run_episodes`: concurrency,
  cancellation, :class:`RunSummary`, with the run's options in :mod:`.options`;
* :mod:`.datasets` — reading samples (JSONL, parquet), bad rows, writing datasets,
  and the dataset builders plugins contribute;
* :mod:`.records` — records and traces written whole lines at a time, read back by
  the one records reader (``--resume``, ``interactions report``);
* :mod:`.observers` — observer hooks, and the JSONL trace writer, the built-in one;
* :mod:`.policies` — the model side: ``replay``, ``openai``, ``human``, plugins.

Example::

    import asyncio
    from interactions_core import load_config
    from interactions_core.runtime import ReplayPolicy, SampleReader, run_episodes

    loaded = load_config("examples/config.yaml")
    summary = asyncio.run(
        run_episodes(
            SampleReader("examples/gsm8k_demo.jsonl"),
            ReplayPolicy(),
            loaded.instantiate(),
            default=loaded.default,  # the config's ``default:``
        )
    )
    print(summary.format())
"""

from __future__ import annotations

from ..errors import DatasetError, InteractionCallError, PolicyError, SampleError
from .datasets import SampleReader, write_rows
from .episode import EpisodeLoop
from .observers import Observers
from .policies import Policy, create_policy, get_policy_class, list_policies
from .policies.base import ReplayPolicy
from .record import END_REASONS, EpisodeRecord
from .records import LineWriter
from .runner import Runner, RunSummary, run_episodes
from .session import Session, SessionTracker

__all__ = [
    "END_REASONS",
    "DatasetError",
    "EpisodeLoop",
    "EpisodeRecord",
    "InteractionCallError",
    "LineWriter",
    "Observers",
    "Policy",
    "PolicyError",
    "ReplayPolicy",
    "RunSummary",
    "Runner",
    "SampleError",
    "SampleReader",
    "Session",
    "SessionTracker",
    "create_policy",
    "get_policy_class",
    "list_policies",
    "run_episodes",
    "write_rows",
]
