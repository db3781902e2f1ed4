"""The hub: every interaction of one config, shared by all the episodes a server plays.

A :class:`Hub` holds what outlives an episode: the interaction instances (created
once; their per-session state is keyed by ``instance_id``), the routing of a
reset to one of them, the ``--max-sessions`` limit, the optional shared token,
and one :class:`~interactions_core.runtime.session.SessionTracker` that counts
every session started and finalized. It knows nothing about HTTP or OpenEnv, so
the in-process TRL adapter plays episodes on the very same object.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import uuid
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import AuthError, BadResetError, CapacityError
from ..runtime.session import SessionTracker

if TYPE_CHECKING:
    from .episode import ServedEpisode

__all__ = ["REWARD_MODES", "Hub"]

#: What a step's ``reward`` carries: ``turn``, the turn's score (the default);
#: ``final``, 0 until the last step, which carries ``calculate_score``, so a
#: consumer that sums the step rewards gets the interaction's score.
REWARD_MODES = ("turn", "final")


class Hub:
    """Interactions by name, plus the limits and counters of the episodes played on them.

    ``interactions`` maps served names to instances; ``origins`` maps the same
    names to where each came from (``distribution:name`` or a dotted path), for
    the start-up summary. ``max_sessions`` bounds the episodes open at once,
    ``max_turns`` the assistant turns of one episode, ``max_user_turns`` the
    feedback messages appended in one episode, ``timeout`` (seconds) each
    call into a plugin; ``token``, when set, must come with every reset;
    ``rewards`` is one of :data:`REWARD_MODES`.
    """

    def __init__(
        self,
        interactions: Mapping[str, Any],
        *,
        default: str | None = None,
        origins: Mapping[str, str] | None = None,
        max_sessions: int | None = None,
        max_turns: int | None = None,
        max_user_turns: int | None = None,
        timeout: float | None = None,
        token: str | None = None,
        rewards: str = "turn",
    ) -> None:
        if not interactions:
            raise ValueError("a hub needs at least one interaction")
        if default is not None and default not in interactions:
            raise ValueError(
                f"default interaction {default!r} is not one of {', '.join(interactions)}"
            )
        for label, value in (
            ("max_sessions", max_sessions),
            ("max_turns", max_turns),
            ("max_user_turns", max_user_turns),
        ):
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ValueError(f"{label} must be a positive integer or None, not {value!r}")
        if rewards not in REWARD_MODES:
            raise ValueError(
                f"rewards must be one of {', '.join(REWARD_MODES)}, not {rewards!r}: 'turn' "
                "gives each step its turn score, 'final' gives the episode's score at the end"
            )
        self.interactions = dict(interactions)
        self.rewards = rewards
        self.default = default
        self.origins = dict(origins or {})
        self.max_sessions = max_sessions
        self.max_turns = max_turns
        self.max_user_turns = max_user_turns
        self.timeout = timeout
        self.token = token or None
        self.tracker = SessionTracker()
        #: Steps being judged right now (a drain waits for them).
        self.busy = 0
        #: False once the server is shutting down: new episodes are refused.
        self.accepting = True
        self._open: set[ServedEpisode] = set()
        #: Episodes a drain could not finalize (their plugin's finalize hung).
        self.unfinalized: list[ServedEpisode] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count()
        self._prefix = "serve-" + uuid.uuid4().hex[:8] + "-"

    @classmethod
    def from_config(cls, source: Any, *, default: str | None = None, **options: Any) -> Hub:
        """Load, check and instantiate every interaction of a config (path or mapping).

        ``default`` overrides the config's ``default:``; ``options`` are the
        keyword arguments of :class:`Hub`. Config problems raise
        :class:`~interactions_core.errors.ConfigError` before anything is created.
        """
        from ..loader import load_config

        loaded = load_config(source, default=default)
        origins = {r.name: r.origin for r in loaded.entries}
        return cls(loaded.instantiate(), default=loaded.default, origins=origins, **options)

    # -- sessions ------------------------------------------------------------------

    @property
    def open_sessions(self) -> int:
        """Episodes started and not ended yet (each holds one open session)."""
        return len(self._open)

    def new_instance_id(self) -> str:
        """A server-unique session id."""
        return f"{self._prefix}{next(self._ids)}"

    def check_token(self, token: object) -> None:
        """Raise :class:`AuthError` unless ``token`` is the server's (when it has one)."""
        if self.token is None:
            return
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), self.token.encode("utf-8", "surrogatepass")
        ):
            problem = "no token was given" if token is None else "the token does not match"
            raise AuthError(
                f"this server requires its shared token and {problem}: pass it as the "
                "reset argument token=... (the server reads it from INTERACTIONS_SERVE_TOKEN)"
            )

    def admit(self, episode: ServedEpisode) -> None:
        """Count ``episode`` as open, or raise :class:`CapacityError` when the server is full."""
        if not self.accepting:
            raise CapacityError(
                "the server is shutting down and starts no new episode; retry on another "
                "server or once this one is back"
            )
        limit = self.max_sessions
        if limit is not None and len(self._open) >= limit:
            raise CapacityError(
                f"the server is at capacity: {len(self._open)} of {limit} sessions are open "
                "(--max-sessions). Retry when an episode ends, or start the server with a "
                "larger --max-sessions."
            )
        self._open.add(episode)

    def release(self, episode: ServedEpisode) -> None:
        """Stop counting ``episode`` as open (it ended)."""
        self._open.discard(episode)

    def route(self, interaction_kwargs: object) -> tuple[str, Any, dict[str, Any]]:
        """``(name, interaction, kwargs)`` for a reset's ``interaction_kwargs``.

        The name is ``interaction_kwargs["name"]``, else the config's ``default:``.
        ``kwargs`` (with the name) are passed to the interaction's lifecycle calls.
        """
        from ..runtime.episode import choose

        return choose(
            self.interactions, interaction_kwargs, self.default, error=BadResetError, served=True
        )

    # -- background work and shutdown -------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task of the running loop; :meth:`drain` waits for it."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait_idle(self, timeout: float) -> bool:
        """Stop admitting episodes; wait up to ``timeout`` s for steps in flight to finish."""
        self.accepting = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.busy and loop.time() < deadline:
            await asyncio.sleep(0.02)
        return not self.busy

    async def drain(self, wait: float | None = None) -> int:
        """End every episode still open (finalizing its session); return how many there were.

        With ``wait``, each end is given at most ``wait`` seconds: a plugin whose
        ``finalize_interaction`` hangs must not hold the shutdown. The episodes
        whose session was not finalized are left in :attr:`unfinalized`.
        """
        if wait is None:
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
        elif self._tasks:
            await asyncio.wait(list(self._tasks), timeout=wait)
        still_open = list(self._open)
        for episode in still_open:
            try:
                await asyncio.wait_for(episode.end(), wait)
            except asyncio.TimeoutError:
                pass
        self.unfinalized = [episode for episode in still_open if episode in self._open]
        return len(still_open)

    # -- description ---------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What is served and how many sessions are open (the ``/interactions`` endpoint)."""
        tracker = self.tracker
        return {
            "interactions": [
                {"name": name, "origin": self.origins.get(name, type(obj).__qualname__)}
                for name, obj in self.interactions.items()
            ],
            "default": self.default,
            "max_sessions": self.max_sessions,
            "max_turns": self.max_turns,
            "max_user_turns": self.max_user_turns,
            "rewards": self.rewards,
            "sessions": {
                "open": tracker.open,
                "started": tracker.started,
                "finalized": tracker.finalized,
            },
        }

    def summary(self) -> str:
        """One line for the server's start-up log."""
        parts = []
        for name in self.interactions:
            origin = self.origins.get(name)
            marker = " [default]" if name == self.default else ""
            parts.append(f"{name} ({origin}){marker}" if origin else f"{name}{marker}")
        limits = f"max {self.max_sessions} sessions" if self.max_sessions else "no session limit"
        if self.max_turns:
            limits += f", max {self.max_turns} turns"
        if self.max_user_turns:
            limits += f", max {self.max_user_turns} user turns"
        if self.rewards != "turn":
            limits += f", {self.rewards} rewards"
        plural = "s" if len(parts) != 1 else ""
        return f"serving {len(parts)} interaction{plural}: {', '.join(parts)}; {limits}"
