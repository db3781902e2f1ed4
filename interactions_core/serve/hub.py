"""The hub: every interaction of one config, shared by all the episodes a server plays.

A :class:`Hub` holds what outlives an episode: the interaction instances (created
once; their per-session state is keyed by ``instance_id``), the routing of a
reset to one of them, the ``--max-sessions`` limit, the optional shared token,
and one :class:`~interactions_core.runtime.session.SessionTracker` that counts
every session started and finalized. It knows nothing about HTTP or OpenEnv, so
the in-process TRL adapter plays episodes on the very same object.

:class:`Tasks` holds the rows a server was given with ``--data`` (read up-front
by the runtime's dataset reader), which OpenEnv's Task API lists and
``reset(split=, index=)`` plays; :func:`parse_data_argument` reads one
``--data [NAME=]FILE`` argument.
"""

from __future__ import annotations

import asyncio
import bisect
import hmac
import itertools
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import AuthError, BadResetError, CapacityError, DatasetError, shown
from ..runtime.session import SessionTracker

if TYPE_CHECKING:
    from .episode import ServedEpisode

__all__ = ["FINALIZE_WAIT", "FORCED_WAIT", "REWARD_MODES", "Hub", "Tasks", "parse_data_argument"]

log = logging.getLogger("interactions_core.serve")

#: Seconds the shutdown gives the sessions still open to be finalized.
FINALIZE_WAIT = 10.0
#: The same after a second stop signal, which ends the process 5 s later in any case.
FORCED_WAIT = 3.0
#: Both count from the moment the server began to close its connections (whose
#: sessions are finalized as they close); a session the shutdown itself finalizes
#: gets at least this long.
LAST_WAIT = 0.5

#: What a step's ``reward`` carries: ``turn``, the turn's score (the default);
#: ``final``, 0 until the last step, which carries ``calculate_score``, so a
#: consumer that sums the step rewards gets the interaction's score.
REWARD_MODES = ("turn", "final")


#: The default bound on one served episode's conversation, in characters: far beyond
#: any model's context window, small enough that a client sending 10 MB messages
#: cannot make every later frame carry them all again.
MAX_EPISODE_CHARS = 2_000_000


class Hub:
    """Interactions by name, plus the limits and counters of the episodes played on them.

    ``interactions`` maps served names to instances; ``origins`` maps the same
    names to where each came from (``distribution:name`` or a dotted path), for
    the start-up summary. ``max_sessions`` bounds the episodes open at once,
    ``max_turns`` the assistant turns of one episode, ``max_user_turns`` the
    feedback messages appended in one episode, ``max_episode_chars`` the
    characters of message content one observation carries (the whole
    conversation and the step's feedback, so this bounds the frames and the
    memory an episode holds), ``timeout``
    (seconds) each call into a plugin; ``token``, when set, must come with every reset;
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
        max_episode_chars: int = MAX_EPISODE_CHARS,
        timeout: float | None = None,
        token: str | None = None,
        rewards: str = "turn",
        tasks: Tasks | None = None,
    ) -> None:
        if not interactions:
            raise ValueError("a hub needs at least one interaction")
        if default is not None and default not in interactions:
            from .._names import summarize

            raise ValueError(
                f"default interaction {default!r} is not one of {summarize(interactions)}"
            )
        for label, value in (
            ("max_sessions", max_sessions),
            ("max_turns", max_turns),
            ("max_user_turns", max_user_turns),
            ("max_episode_chars", max_episode_chars),
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
        self.max_episode_chars = max_episode_chars
        self.timeout = timeout
        self.token = token or None
        self.tracker = SessionTracker()
        #: The rows served through the Task API (none without ``--data``).
        self.tasks = tasks if tasks is not None else Tasks({})
        #: Steps being judged and sessions being started right now (a drain waits for them).
        self.busy = 0
        #: False once the server is shutting down: new episodes are refused.
        self.accepting = True
        #: True once a second stop signal cut the shutdown short: what runs is cancelled.
        self.forced = False
        #: When the server began to close its connections (``time.monotonic()``), and
        #: how many sessions had been finalized by then.
        self.exiting_since: float | None = None
        self.finalized_before = 0
        self._open: set[ServedEpisode] = set()
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

        With ``wait``, the whole drain takes at most about ``wait`` seconds: a plugin
        whose ``finalize_interaction`` hangs must not hold the shutdown, and the
        episodes are ended together, so one that hangs delays none of the others.
        What was finalized is the tracker's to count (:meth:`shut_down`).
        """
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        if wait is None:
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
        elif self._tasks:
            await asyncio.wait(list(self._tasks), timeout=wait)
        still_open = list(self._open)
        if still_open:
            ends = [loop.create_task(episode.end()) for episode in still_open]
            left = None if deadline is None else max(0.0, deadline - loop.time())
            _, late = await asyncio.wait(ends, timeout=left)
            for task in late:
                task.cancel()
            if late:  # let the cancellations land (a plugin may swallow them: bounded)
                await asyncio.wait(late, timeout=1.0)
        return len(still_open)

    def exiting(self, forced: bool = False) -> None:
        """The server begins to close its connections; ``forced``: a second stop signal
        cut the shutdown short. :meth:`shut_down`'s wait counts from the last call."""
        self.forced = self.forced or forced
        if self.exiting_since is None:
            self.finalized_before = self.tracker.finalized
        if forced or self.exiting_since is None:
            self.exiting_since = time.monotonic()

    async def shut_down(self) -> None:
        """Lifespan shutdown: finalize the sessions still open and log how it went.

        They get ``FINALIZE_WAIT`` from the moment the connections began to close,
        or ``FORCED_WAIT`` after a second stop signal: the process ends by itself
        5 s after that signal, and the log must be written before. Waiting for a
        finalize already under way (a closing connection's) is what makes the
        count true: one still running when it was taken was counted as not done.
        The counts are the tracker's: a finalize the forced stop cancelled (a closing
        connection's) did not finish, and its session is still open.
        """
        tracker = self.tracker
        since = self.exiting_since
        if since is None:
            self.finalized_before = tracker.finalized
        budget = FORCED_WAIT if self.forced else FINALIZE_WAIT
        spent = 0.0 if since is None else time.monotonic() - since
        await self.drain(max(LAST_WAIT, budget - spent))
        drained = tracker.finalized - self.finalized_before
        if tracker.open:
            why = (
                f"the second stop signal ended them (a finalize gets at most {budget:g} s then)"
                if self.forced
                else f"finalize_interaction did not return within {budget:g} s of the shutdown"
            )
            log.warning("%d session(s) not finalized: %s", tracker.open, why)
        log.info(
            "shut down: %d session%s finalized at shutdown; %d started, %d finalized, %d open",
            drained,
            "" if drained == 1 else "s",
            tracker.started,
            tracker.finalized,
            tracker.open,
        )

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
            # false once a stop signal started the drain: new episodes are refused
            "accepting": self.accepting,
            "max_sessions": self.max_sessions,
            "max_turns": self.max_turns,
            "max_user_turns": self.max_user_turns,
            "max_episode_chars": self.max_episode_chars,
            "rewards": self.rewards,
            "splits": self.tasks.describe(),
            "sessions": {
                "open": tracker.open,
                # what --max-sessions counts: the open ones and those still starting
                "admitted": len(self._open),
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
        if self.tasks.splits:
            limits += "; tasks: " + ", ".join(
                f"{name} ({len(rows)} rows)" for name, rows in self.tasks.splits.items()
            )
        plural = "s" if len(parts) != 1 else ""
        return f"serving {len(parts)} interaction{plural}: {', '.join(parts)}; {limits}"


# -- tasks from data files (``--data``) ----------------------------------------------

#: What a split name given as ``--data NAME=FILE`` may look like; anything else
#: before an ``=`` is taken as part of the file name.
SPLIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: Split names OpenEnv gives a type of their own; any other split is typed ``validation``
#: (what OpenEnv's server does for a split given as a plain name).
SPLIT_TYPES = frozenset({"train", "validation", "test"})
#: Rows ``list_tasks`` returns at most: a preview, as OpenEnv allows for large splits;
#: ``num_tasks`` gives the true count and ``get_task_range`` any slice.
LIST_PREVIEW = 1000
#: Bytes of JSON (UTF-8) one Task API response may hold (a preview or a range, never less
#: than one row): a response is held whole until its client has read it.
MAX_TASK_BYTES = 4 * 1024 * 1024
#: Bad rows quoted in the error that refuses a data file.
BAD_ROWS_SHOWN = 3


def parse_data_argument(text: str) -> tuple[str, str]:
    """``(split, path)`` for one ``--data`` argument: ``NAME=FILE``, or ``FILE`` (split = stem)."""
    name, eq, path = text.partition("=")
    if eq and SPLIT_NAME.fullmatch(name) and path:
        return name, path
    if eq and not name:
        raise ValueError(f"{text!r}: the split name before '=' is empty; write NAME=FILE")
    if text == "-":
        return "stdin", text
    stem = os.path.basename(text.rstrip("/\\"))
    for suffix in (".jsonl", ".json", ".ndjson", ".parquet", ".pq"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if not SPLIT_NAME.fullmatch(stem):
        raise ValueError(
            f"{text!r}: cannot name a split after this file ({stem!r} is not a split name: "
            "letters, digits, '_', '.', '-'); write --data NAME=FILE"
        )
    return stem, text


def _shown(value: Any) -> str:
    """How the Task API shows a value JSON has no type for (a parquet timestamp, a decimal),
    as FastAPI does; bytes are refused instead: their text would not be the row's value."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError("bytes")
    return str(value)


class Tasks:
    """Rows by split name, served through OpenEnv's Task API and played by ``reset(split, index)``.

    Rows are kept exactly as the dataset reader produced them (no copy, no
    re-encoding): a row is what ``get_task`` returns and what ``interactions run
    --data`` would play. Lookups raise :class:`~interactions_core.errors.BadResetError`
    naming the splits and their sizes, so a client learns what to ask for.
    """

    __slots__ = ("ends", "sources", "splits")

    def __init__(
        self,
        splits: Mapping[str, list[Mapping[str, Any]]],
        sources: Mapping[str, str] | None = None,
    ) -> None:
        self.splits = dict(splits)
        self.sources = dict(sources or {})
        #: Where each row's JSON (UTF-8) ends in its split's text: any range sized at once.
        self.ends = {name: self._ends(name, rows) for name, rows in self.splits.items()}

    def _ends(self, split: str, rows: list[Mapping[str, Any]]) -> Any:
        """The running total of the rows' JSON sizes; a :class:`DatasetError` naming the
        first row the Task API could not send (found here, not at the first request)."""
        from array import array

        from ..runtime.datasets import MAX_NESTING, too_deep

        ends, total = array("q"), 0
        for number, row in enumerate(rows, 1):
            problem = f"nests lists and objects more than {MAX_NESTING} levels deep"
            try:
                if not too_deep(row):
                    text = json.dumps(row, ensure_ascii=False, allow_nan=False, default=_shown)
                    problem, total = "", total + len(text.encode("utf-8"))
            except TypeError:
                problem = "holds binary data (bytes), which JSON cannot carry as it is"
            except UnicodeEncodeError:
                problem = "holds a lone surrogate (such as \\ud800), which UTF-8 cannot carry"
            except ValueError:
                problem = "holds NaN or Infinity, which JSON has no value for"
            if problem:
                where = self.sources.get(split, f"split {split!r}")
                raise DatasetError(
                    f"{where}: row {number} {problem}, so the Task API could not send it; "
                    "fix or remove the row"
                )
            ends.append(total)
        return ends

    @classmethod
    def load(
        cls,
        specs: Sequence[tuple[str, str]],
        hub: Hub | None = None,
        check: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> Tasks:
        """Read every ``(split, path)`` now; a one-paragraph :class:`DatasetError` if one fails.

        A bad row refuses the whole file rather than being skipped: indexes must
        be the file's row numbers for a client's ``get_task(split, i)`` to mean
        the ``i``-th row. With ``hub``, each row must also name (or default to) an
        interaction it serves, and pass ``check`` (the bounds a reset of it meets,
        raising :class:`BadResetError`), here rather than at the first reset: a row
        no reset could play had been handed out by the Task API.
        """
        from ..runtime.datasets import SampleReader
        from ..runtime.episode import interaction_kwargs_of

        splits: dict[str, list[Mapping[str, Any]]] = {}
        sources: dict[str, str] = {}
        for split, path in specs:
            if split in splits:
                raise DatasetError(
                    f"--data: split {split!r} is given twice ({sources[split]} and {path}); "
                    "name them apart with --data NAME=FILE"
                )
            reader = SampleReader(path, max_examples=BAD_ROWS_SHOWN)
            try:
                rows: list[Mapping[str, Any]] = list(reader)
            except OSError as exc:
                raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from None
            if reader.skipped:
                shown = "; ".join(str(bad) for bad in reader.bad_rows)
                more = reader.skipped - len(reader.bad_rows)
                raise DatasetError(
                    f"{path}: {reader.skipped} bad row(s), e.g. {shown}"
                    + (f" (and {more} more)" if more > 0 else "")
                    + ". A served split must be all good rows (a task's index is its row "
                    "number); fix or remove them, or check the file with interactions run "
                    "--data."
                )
            if not rows:
                raise DatasetError(f"{path} has no rows: a served split needs at least one")
            if hub is not None:
                for number, row in enumerate(rows):
                    try:
                        hub.route(interaction_kwargs_of(row))
                        if check is not None:
                            check(row)
                    except BadResetError as exc:
                        raise DatasetError(
                            f"{path}: row {number + 1} cannot be played here: {exc}"
                        ) from None
            splits[split] = rows
            sources[split] = path
        return cls(splits, sources)

    def names(self) -> list[str]:
        """The split names, in the order they were given."""
        return list(self.splits)

    def describe(self) -> list[dict[str, Any]]:
        """One descriptor per split: ``name``, ``type`` (OpenEnv's), ``num_tasks``."""
        return [
            {
                "name": name,
                "type": name if name in SPLIT_TYPES else "validation",
                "num_tasks": len(rows),
            }
            for name, rows in self.splits.items()
        ]

    def rows(self, split: object) -> list[Mapping[str, Any]]:
        """The rows of ``split``; a readable error naming the served splits otherwise."""
        rows = self.splits.get(split) if isinstance(split, str) else None
        if rows is None:
            if not self.splits:
                raise BadResetError(
                    f"no split {shown(split)}: this server serves no data (start it with "
                    "--data FILE to serve tasks); reset with prompt and interaction_kwargs"
                )
            served = ", ".join(f"{name} ({len(r)} rows)" for name, r in self.splits.items())
            raise BadResetError(f"unknown split {shown(split)}; served splits: {served}")
        return rows

    def row(self, split: object, index: object) -> Mapping[str, Any]:
        """Row ``index`` (0-based) of ``split``; else a readable error giving the valid range."""
        rows = self.rows(split)
        if isinstance(index, bool) or not isinstance(index, int):
            raise BadResetError(
                f"index must be an integer row number (0 to {len(rows) - 1} in split "
                f"{split!r}), not {type(index).__name__} {index!r:.40}"
            )
        if not 0 <= index < len(rows):
            raise BadResetError(
                f"index {index} is out of range: split {split!r} has {len(rows)} rows "
                f"(0 to {len(rows) - 1})"
            )
        return rows[index]

    def preview(self, split: object) -> list[Mapping[str, Any]]:
        """The first rows of ``split``: at most ``LIST_PREVIEW``, within ``MAX_TASK_BYTES``."""
        return self.rows(split)[: max(1, min(LIST_PREVIEW, self._fitting(split, 0)))]

    def _fitting(self, split: Any, first: int) -> int:
        """How many rows from ``first`` on fit in one response."""
        ends = self.ends[split]
        base = ends[first - 1] if first else 0
        return bisect.bisect_right(ends, base + MAX_TASK_BYTES, lo=first) - first

    def range(self, split: object, start: int | None, stop: int | None) -> list[Mapping[str, Any]]:
        """Rows ``start:stop`` of ``split``, with Python's slice rules (as OpenEnv specifies).

        At most ``LIST_PREVIEW`` rows, and ``MAX_TASK_BYTES`` bytes of JSON, per
        request: a response is held in memory for as long as a client takes to
        read it.
        """
        rows = self.rows(split)
        first, last, _ = slice(start, stop).indices(len(rows))
        if last - first > LIST_PREVIEW:
            raise BadResetError(
                f"a range holds at most {LIST_PREVIEW} rows per request; split {split!r} has "
                f"{len(rows)}: ask for start and stop {LIST_PREVIEW} rows apart and page on"
            )
        ends = self.ends[split]  # type: ignore[index]
        size = ends[last - 1] - (ends[first - 1] if first else 0) if last > first else 0
        if last - first > 1 and size > MAX_TASK_BYTES:
            fit = max(1, self._fitting(split, first))
            raise BadResetError(
                f"rows {first} to {last} of split {split!r} hold {size:,} bytes of JSON, "
                f"over the {MAX_TASK_BYTES:,} one response may hold: ask for fewer rows "
                f"(from row {first}, {fit} fit) and page on"
            )
        return rows[start:stop]
