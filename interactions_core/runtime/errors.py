"""Errors raised by the episode runtime.

Every one derives from :class:`~interactions_core.errors.InteractionsError`, so the
CLI turns them into a one-paragraph message.
"""

from __future__ import annotations

from ..errors import InteractionsError, Interrupted

__all__ = [
    "DatasetError",
    "InteractionCallError",
    "PolicyError",
    "RunInterrupted",
    "SampleError",
]


class InteractionCallError(InteractionsError):
    """A call into an interaction failed, timed out or returned the wrong shape.

    The message names the interaction, the session (``instance_id``) and the
    lifecycle method; the original exception is chained as ``__cause__``.
    """

    def __init__(self, interaction: str, instance_id: str, method: str, problem: str) -> None:
        self.interaction = interaction
        self.instance_id = instance_id
        self.method = method
        self.problem = problem
        super().__init__(
            f"interaction {interaction!r}, session {instance_id!r}: {method} {problem}"
        )


class PolicyError(InteractionsError):
    """The policy (the model side) could not produce a reply for a sample."""


class SampleError(InteractionsError, ValueError):
    """A sample cannot be run: bad shape, unknown or missing interaction name."""


class DatasetError(InteractionsError, ValueError):
    """A dataset file cannot be read, or a bad row was met in strict mode."""


class RunInterrupted(Interrupted):
    """The run was stopped at once (a second Ctrl-C or SIGTERM).

    It derives from :class:`KeyboardInterrupt`, so it leaves the event loop
    immediately even from inside a plugin call that blocks the loop; the
    episode loop lets it through, where a ``KeyboardInterrupt`` raised by a
    plugin only ends that plugin's episode.
    """
