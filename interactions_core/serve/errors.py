"""Errors a served episode reports to its client.

Each one is a mistake the client can fix (or wait out), so its message says what
was wrong and what to send instead. They reach an OpenEnv client as the text of a
WebSocket error message, and an HTTP client as the ``detail`` of a 4xx response;
the server keeps serving either way.
"""

from __future__ import annotations

from ..errors import InteractionsError

__all__ = ["AuthError", "BadActionError", "BadResetError", "CapacityError", "ServeError"]


class ServeError(InteractionsError):
    """A request to the server could not be carried out; the message says why."""

    #: The HTTP status the server answers with for this error.
    status = 400


class BadResetError(ServeError, ValueError):
    """A reset names an unknown interaction, or its prompt or arguments have the wrong shape."""


class BadActionError(ServeError, TypeError):
    """A step's action is not ``{"content": "<the assistant's message>"}``, or comes too early.

    A ``TypeError`` and never a ``ValueError``: pydantic lets it through its
    validators unchanged, so the client sees this message, not a generic
    "invalid message".
    """

    status = 422


class CapacityError(ServeError):
    """``--max-sessions`` sessions are already open."""

    status = 503


class AuthError(ServeError):
    """The server has a shared token and the reset did not bring it."""

    status = 401
