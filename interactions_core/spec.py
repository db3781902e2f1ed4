"""The interaction specification: the one place the lifecycle's signatures are written.

An interaction is a plain object that the trainer or the runtime calls directly,
so this is not a pluggy hook specification (pluggy stays off the per-turn path;
the pluggy hooks are in :mod:`interactions_core.hookspecs`). It is the contract
:mod:`interactions_core.validation` reads when a class is loaded: the method
names, their leading parameters and which of them have defaults all come from
the signatures below, and the error messages quote them. Changing a signature
here changes what the validator accepts.

``SessionSpec`` is the same for what a
:class:`~interactions_core.base.SessionInteraction` subclass writes instead of
the lifecycle (``tests/test_spec.py`` checks that the base classes match both).
A method written ``async def`` here must be a coroutine function; one written
plain ``def`` may be either (the base class awaits it only when it is one).
"""

from __future__ import annotations

from typing import Any

__all__ = ["InteractionSpec", "SessionSpec"]


class InteractionSpec:
    """The async lifecycle every interaction implements (verl's calling convention)."""

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        """Open a session. ``kwargs`` are the sample's ``interaction_kwargs``.

        Returns the session id: ``instance_id`` when given, else a new unique one.
        """
        raise NotImplementedError

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> Any:
        """Judge the conversation so far; return an ``InteractionResult``
        ``(should_terminate, content, score, extra)``."""
        raise NotImplementedError

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        """Return the session's score as a float."""
        raise NotImplementedError

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Release the session's state. Called exactly once per started session."""
        raise NotImplementedError


class SessionSpec:
    """What a ``SessionInteraction`` subclass implements instead of the lifecycle."""

    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """Judge the latest assistant turn of the session whose state is given.

        Returns an ``InteractionResult`` or a plain 4-tuple of the same fields.
        Plain or ``async def``.
        """
        raise NotImplementedError

    def score(self, state: Any, **kwargs: Any) -> Any:
        """Score the session whose state is given (a float). Plain or ``async def``."""
        raise NotImplementedError
