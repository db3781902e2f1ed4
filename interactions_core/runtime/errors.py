"""Errors raised by the episode runtime.

Every one derives from :class:`~interactions_core.errors.InteractionsError`, so the
CLI turns them into a one-paragraph message.
"""

from __future__ import annotations

from ..errors import InteractionsError

__all__ = ["DatasetError", "InteractionCallError", "PolicyError", "SampleError"]


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
