"""One served episode: a reset starts it, each step judges one assistant message.

:class:`ServedEpisode` plays verl's multi-turn semantics (the same as
``interactions run``, see ``docs/episodes.md``) one turn per request:

* ``start(prompt, interaction_kwargs)`` routes to an interaction, opens a
  :class:`~interactions_core.runtime.session.Session` and returns the prompt;
  ``start(split=, index=)`` does the same with a row the hub serves (``--data``):
  its prompt and its ``interaction_kwargs``, read as ``interactions run`` reads
  a sample;
* ``step(content)`` appends ``{"role": "assistant", "content": content}``, calls
  ``generate_response`` on the whole conversation, appends the feedback as a user
  message unless the episode ends here, and returns the observation;
* each step is the runtime's one episode step (:mod:`~interactions_core.runtime.step`):
  the episode ends when the interaction says terminate, after ``max_turns``
  assistant turns, or once ``max_user_turns`` feedback messages were appended;
  the last turn a limit allows is judged, and no feedback follows the end.
  ``calculate_score`` then gives ``final_score`` and the session is finalized
  at once. A plugin error also ends it (one fault, one episode), and so does
  :meth:`end`, which the server calls when the client goes away.

Every observation carries the whole conversation, so its size is bounded by the
hub's ``max_episode_chars``, counted as the characters of message content an
observation carries: every message of ``messages`` (its content, and any field
but its role, such as ``name`` or ``tool_calls``) and the ``feedback`` field,
which repeats the feedback just appended (or carries the last turn's, which is
not appended). The messages themselves are bounded too, one per
:data:`CHARS_PER_MESSAGE` characters of the bound (at least :data:`MIN_MESSAGES`),
and a role is at most :data:`MAX_ROLE` characters: short messages cost the server
memory whatever their text. A prompt over a bound is refused; an assistant message
(or a turn) that would take the conversation past one, or a plugin's feedback that
would take the observation past it, ends the episode (its session finalized, the feedback
dropped) with an error that says which. ``interaction_kwargs`` count against the
bound at the reset, as their JSON text with the prompt (the session keeps them). A prompt message or
``interaction_kwargs`` nested more than :data:`MAX_NESTING` levels is refused
the same way, before any session is taken.

Observations are plain dicts with the fields of the OpenEnv observation:
``messages``, ``feedback``, ``turn``, ``final_score``, ``interaction``,
``reward`` and ``done``. ``reward`` follows the hub's ``rewards`` mode: the
turn's score (``turn``), or 0 until the last step, which carries the episode's
score (``final``), so a consumer summing step rewards gets ``calculate_score``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import (
    BadActionError,
    BadResetError,
    InteractionCallError,
    ServeError,
    exception_text,
    printable,
    sendable,
)
from ..runtime.datasets import MAX_NESTING, too_deep
from ..runtime.session import Session
from ..runtime.step import judge
from ..runtime.watchdog import BLOCKING_ADVICE, LoopWatchdog, tracked
from .guard import PASSED_TOKEN
from .hub import Hub

__all__ = [
    "CHARS_PER_MESSAGE",
    "MAX_NESTING",
    "MAX_ROLE",
    "MIN_MESSAGES",
    "REPORT_AFTER",
    "ServeWatchdog",
    "ServedEpisode",
    "check_prompt",
    "message_limit",
    "playable",
]

log = logging.getLogger("interactions_core.serve")


#: One message an episode may hold per this many characters of ``max_episode_chars``
#: (and ``MIN_MESSAGES`` at least). A message costs the server several hundred bytes
#: however short its content: a reset of 400,000 empty messages (12 MB) made the
#: server hold 360 MB for the session and send 11 MB at every step, though it
#: counted no characters.
CHARS_PER_MESSAGE = 256
#: The fewest messages an episode may hold, whatever ``max_episode_chars``.
MIN_MESSAGES = 256
#: The longest ``role`` a message may have: a role is a short name such as ``user``.
MAX_ROLE = 64


def message_limit(max_episode_chars: int) -> int:
    """How many messages one episode may hold under ``max_episode_chars``."""
    return max(MIN_MESSAGES, max_episode_chars // CHARS_PER_MESSAGE)


def _text(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    return 0 if value is None else len(json.dumps(value, default=str))


def _chars(message: Mapping[str, Any]) -> int:
    """The characters a message adds to every observation: its content's text, and
    every field but its role (``name``, ``tool_calls``, ...) with its name."""
    extra = sum(
        len(str(key)) + _text(value)
        for key, value in message.items()
        if key not in ("role", "content")
    )
    return _text(message.get("content")) + extra


def check_prompt(prompt: object) -> list[dict[str, Any]]:
    """A copy of ``prompt`` as a list of chat messages (a string is one user message)."""
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)):
        raise BadResetError(
            "prompt must be a list of chat messages such as "
            f'[{{"role": "user", "content": "..."}}], not {type(prompt).__name__}'
        )
    messages = []
    for i, message in enumerate(prompt):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise BadResetError(
                f"prompt[{i}] must be a chat message with a 'role' and a 'content', "
                f"not {message!r:.80}"
            )
        if len(message["role"]) > MAX_ROLE:
            raise BadResetError(
                f"prompt[{i}]'s role is {len(message['role']):,} characters long; a role is "
                f"a short name such as 'user' or 'system' (at most {MAX_ROLE} characters)"
            )
        if too_deep(message):
            raise BadResetError(
                f"prompt[{i}] nests lists and objects more than {MAX_NESTING} levels deep; "
                "a chat message needs a few: send its content as text or a flat list of parts"
            )
        messages.append({_key(k): v for k, v in message.items()})
    return messages


def _key(key: Any) -> Any:
    """A message's key as it can be sent: a lone surrogate in it written as its escape.

    The observation's check (``openenv_app.sendable``) writes a message's own keys
    lossily rather than failing, while OpenEnv's reply failed on them: the episode
    played on with every answer an error.
    """
    return sendable(key) if type(key) is str and not key.isascii() else key


def _bounded_prompt(prompt: object, max_chars: int) -> tuple[list[dict[str, Any]], int]:
    """The prompt's messages and characters, refused when over the episode's bounds."""
    most = message_limit(max_chars)
    count = len(prompt) if isinstance(prompt, (list, tuple)) else 1
    if count > most:
        raise BadResetError(
            f"the prompt holds {count:,} messages, over this server's limit of "
            f"{most:,} for a whole episode (one per {CHARS_PER_MESSAGE} characters of "
            "--max-episode-chars)"
        )
    messages = check_prompt(prompt)
    chars = sum(map(_chars, messages))
    if chars > max_chars:
        raise BadResetError(
            f"the prompt holds {chars:,} characters, over this server's limit of "
            f"{max_chars:,} for a whole episode (--max-episode-chars)"
        )
    return messages, chars


def _bounded_kwargs(interaction_kwargs: object, prompt_chars: int, max_chars: int) -> int:
    """The characters of ``interaction_kwargs`` as JSON, refused when they and the
    prompt's pass the episode's bound: the session keeps them as long as it is open.

    They are counted at the reset only: an observation does not carry them, so the
    bound on what each observation carries (``chars``) leaves them out.
    """
    try:
        chars = _text(interaction_kwargs)
    except (TypeError, ValueError):  # a served row's keys that JSON cannot write
        chars = len(str(interaction_kwargs))
    if prompt_chars + chars > max_chars:
        raise BadResetError(
            f"interaction_kwargs hold {chars:,} characters (as JSON) and the prompt "
            f"{prompt_chars:,}, over this server's limit of {max_chars:,} for a whole "
            "episode (--max-episode-chars); send shorter arguments"
        )
    return chars


def playable(hub: Hub, row: Mapping[str, Any]) -> None:
    """Refuse (:class:`BadResetError`) a served row whose reset would be refused for its
    size or shape: the checks :meth:`ServedEpisode.start` makes of a row it plays."""
    import warnings

    from ..runtime.episode import interaction_kwargs_of, prompt_of

    with warnings.catch_warnings():  # the routing check has said what it warns of
        warnings.simplefilter("ignore")
        interaction_kwargs = interaction_kwargs_of(row)
    if too_deep(interaction_kwargs):
        raise BadResetError(
            f"interaction_kwargs nests lists and objects more than {MAX_NESTING} levels deep"
        )
    _, chars = _bounded_prompt(prompt_of(row), hub.max_episode_chars)
    _bounded_kwargs(interaction_kwargs, chars, hub.max_episode_chars)


class ServedEpisode:
    """The state of one client's episode; see the module docstring.

    One instance serves one connection and may play several episodes in turn: a
    new :meth:`start` ends the previous episode first.
    """

    __slots__ = (
        "_lock",
        "chars",
        "done",
        "final_score",
        "hub",
        "messages",
        "name",
        "session",
        "turn",
        "user_turns",
    )

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.session: Session | None = None
        self.name = ""
        self.messages: list[dict[str, Any]] = []
        self.chars = 0  # the characters of ``messages``, bounded by the hub
        self.turn = 0
        self.user_turns = 0
        self.done = False
        self.final_score: float | None = None
        self._lock = asyncio.Lock()

    @property
    def instance_id(self) -> str | None:
        """The session id of the current (or last) episode."""
        return self.session.instance_id if self.session is not None else None

    @property
    def is_open(self) -> bool:
        """True while an episode is in progress (its session is open)."""
        return self.session is not None and self.session.is_open

    def observation(self, feedback: str = "", reward: float | None = None) -> dict[str, Any]:
        """The observation of the episode as it stands."""
        return {
            "messages": list(self.messages),
            "feedback": feedback,
            "turn": self.turn,
            "final_score": self.final_score,
            "interaction": self.name,
            "reward": reward,
            "done": self.done,
        }

    async def start(
        self,
        prompt: object = None,
        interaction_kwargs: object = None,
        token: object = None,
        split: object = None,
        index: object = None,
    ) -> dict[str, Any]:
        """Start an episode; return the first observation (the prompt, turn 0).

        With ``split`` and ``index``, the episode plays that served row: both are
        needed, and neither ``prompt`` nor ``interaction_kwargs`` may come too.

        A reset refused by its checks (the token, the row, the route, the bounds)
        leaves the episode in progress playing: it had ended it first, and the next
        step was told the episode "ended with an error".
        """
        hub = self.hub
        hub.check_token(token)
        if split is not None or index is not None:
            prompt, interaction_kwargs = self._task(split, index, prompt, interaction_kwargs)
        if too_deep(interaction_kwargs):
            raise BadResetError(
                f"interaction_kwargs nests lists and objects more than {MAX_NESTING} levels "
                "deep; give the interaction its arguments as plain, shallow values"
            )
        name, interaction, kwargs = hub.route(interaction_kwargs)
        messages, chars = _bounded_prompt(prompt, hub.max_episode_chars)
        _bounded_kwargs(interaction_kwargs, chars, hub.max_episode_chars)
        await self.end()  # a new episode replaces the one in progress
        async with self._lock:
            hub.admit(self)
            # This connection took a session: never evicted now, even while the start
            # is slow. Not before: a reset refused (a wrong name, the server full) took
            # nothing, and without a token every reset passes the token check.
            passed = PASSED_TOKEN.get()
            if passed is not None:
                passed()
            session = Session(
                interaction,
                name=name,
                instance_id=hub.new_instance_id(),
                timeout=hub.timeout,
                tracker=hub.tracker,
            )
            self.session = session
            self.name = name
            self.messages = messages
            self.chars = chars
            self.turn = 0
            self.user_turns = 0
            self.done = False
            self.final_score = None
            hub.busy += 1  # a drain waits for a start in flight as for a step
            try:
                with tracked(inspect.currentframe()):  # as a step is (see there)
                    failure = await self._started(session, kwargs)
                    # What the plugin kept in its kwargs (a resource in a nested one) goes
                    # now, within this reset, when its start failed: the error's traceback
                    # carried this frame, and them, out to the web server's handler.
                    kwargs = {}
            finally:
                hub.busy -= 1
            if failure is not None:
                # Raised without a local holding it: the frame stays in the error's
                # traceback, and the two would hold each other until the collector ran.
                held, failure = [failure], None
                raise held.pop()
        return self.observation()

    async def _started(self, session: Session, kwargs: dict[str, Any]) -> ServeError | None:
        """Start ``session``; the error to answer with when the plugin's start failed."""
        try:
            await session.start(**kwargs)
        except BaseException as exc:
            await self._close(session)
            self.session = None
            if not issubclass(type(exc), InteractionCallError):
                raise
            return _answer(exc, "; no episode was started")
        return None

    def _task(
        self, split: object, index: object, prompt: object, interaction_kwargs: object
    ) -> tuple[list[dict[str, Any]], Any]:
        """The prompt and ``interaction_kwargs`` of served row ``split``/``index``."""
        from ..runtime.episode import interaction_kwargs_of, prompt_of

        if prompt is not None or interaction_kwargs is not None:
            raise BadResetError(
                "a reset takes either split and index (a served row brings its prompt and "
                "interaction_kwargs) or prompt and interaction_kwargs, not both"
            )
        if split is None or index is None:
            missing = "split" if split is None else "index"
            raise BadResetError(
                f"a reset with a served row needs both split and index; {missing} is missing "
                f"(splits: {', '.join(self.hub.tasks.names()) or 'none, no --data given'})"
            )
        row = self.hub.tasks.row(split, index)
        return prompt_of(row), interaction_kwargs_of(row)

    async def step(self, content: object) -> dict[str, Any]:
        """Judge one assistant message; return the observation with the turn's reward."""
        if not isinstance(content, str):
            raise BadActionError(
                "the action's 'content' must be the assistant's message as a string, "
                f"not {type(content).__name__}"
            )
        async with self._lock:
            session = self.session
            if session is None or not session.is_open:
                raise BadActionError(
                    f"{self._why_closed()}: call reset (with prompt and interaction_kwargs) "
                    "to start one"
                )
            hub = self.hub
            problem = self._no_room_for(content)
            if problem is not None:
                await self._close(session)
                raise BadActionError(
                    f"{problem}: the episode is over and its session finalized; call reset "
                    "to start another"
                )
            self.turn += 1
            self.messages.append({"role": "assistant", "content": content})
            self.chars += len(content)
            # In flight until its answer is ready, the finalize of a last turn included: a
            # drain that stopped waiting before that closed the connection (1012) while
            # the reward and the final score were still to be sent.
            hub.busy += 1
            try:
                # What the runtime runs around the calls (the plugin's copy of the
                # conversation dropped, a result made plain) is this step's: a block there
                # is charged to it, not to the steps of other clients awaiting beside it.
                with tracked(inspect.currentframe()):
                    return await self._judged(session)
            finally:
                hub.busy -= 1

    async def _judged(self, session: Session) -> dict[str, Any]:
        """The step's observation, once the interaction has judged the turn just appended."""
        hub = self.hub
        try:
            result, end = await judge(
                session,
                self.messages,
                self.turn,
                self.user_turns,
                hub.max_turns,
                hub.max_user_turns,
            )
            if end is not None:
                self.final_score = await session.score()
        except BaseException as exc:
            await self._close(session)
            if not issubclass(type(exc), InteractionCallError):
                raise
            failure: ServeError | None = _answer(
                exc, ". The episode is over and its session finalized; call reset to start another."
            )
        else:
            failure = None
        if failure is not None:
            held, failure = [failure], None  # raised without a local holding it: see start
            raise held.pop()  # the plugin's error is dropped by now, within this step
        await self._bound_feedback(session, result.content, end is None)
        if end is not None:
            failed = await self._close(session)
            if failed is not None:  # as `run` records it: an error, no reward
                self.final_score = None
                raise ServeError(
                    f"{failed}. The episode is over and its session finalized, with no "
                    "reward; call reset to start another."
                )
            self.done = True
        else:
            self.user_turns += 1  # the step appended the feedback
            self.chars += len(result.content)
        return self.observation(result.content, self._reward(result.score))

    def _no_room_for(self, content: str) -> str | None:
        """Why the conversation cannot take ``content`` (and the feedback after it), if so."""
        limit = self.hub.max_episode_chars
        if self.chars + len(content) > limit:
            return (
                f"this message would take the conversation to {self.chars + len(content):,} "
                f"characters, over this server's limit of {limit:,} (--max-episode-chars)"
            )
        most = message_limit(limit)
        if len(self.messages) + 2 > most:
            return (
                f"this turn would take the conversation past {most:,} messages, this "
                f"server's limit (one per {CHARS_PER_MESSAGE} of --max-episode-chars)"
            )
        return None

    def _why_closed(self) -> str:
        """Why a step finds no open episode."""
        if self.session is None:
            return "no episode has been started"
        if self.done:
            return f"the episode ended after turn {self.turn}"
        return "the episode ended with an error"

    async def _bound_feedback(self, session: Session, feedback: str, appended: bool) -> None:
        """End the episode when the feedback would take the observation past the bound.

        The observation carries the feedback twice when it was appended (in
        ``messages`` and in ``feedback``), once after the last turn (in ``feedback``
        only): what it carries is what is counted, so no frame grows past the bound
        whatever a plugin answers. The feedback is dropped, not kept until the reset.
        """
        size = self.chars + len(feedback) * (2 if appended else 1)
        limit = self.hub.max_episode_chars
        if size <= limit:
            return
        if appended:
            self.messages.pop()
        self.final_score = None
        await self._close(session)
        error = (
            f"the interaction's feedback ({len(feedback):,} characters) would take this "
            f"step's observation to {size:,} characters, over this server's limit of "
            f"{limit:,} (--max-episode-chars): the episode is over and its session "
            "finalized; call reset to start another"
        )
        log.warning("%s", printable(f"{error} (interaction {self.name!r})"))
        raise ServeError(error)

    def _reward(self, turn_score: float) -> float:
        """The step's reward under the hub's ``rewards`` mode (see the module docstring)."""
        if self.hub.rewards == "turn":
            return turn_score
        return self.final_score if self.done and self.final_score is not None else 0.0

    async def end(self) -> None:
        """End the episode in progress, if any, finalizing its session; never raises.

        Returns only once no finalize of this episode is under way: a step that
        failed (or was cancelled by a shutdown) finalizes its session under the
        lock, and a shutdown that counted the sessions left unfinalized before that
        finished would report a finalize that in fact completed as not done.
        """
        if self.session is None:
            return
        async with self._lock:
            session = self.session
            if session is not None and session.is_open:
                await self._close(session)

    async def _close(self, session: Session) -> str | None:
        """Finalize ``session``; the text of the finalize's error, if it failed.

        Tracked as a step is, wherever it is called from (a new reset, a message too
        long, a client gone, an idle timeout): a finalize's error, and what it holds,
        is dropped here, charged to this close; it had been dropped outside every
        tracked frame, where a slow __del__ timed out other clients' steps.
        """
        with tracked(inspect.currentframe()):
            try:
                error = await session.finalize()
            finally:
                self.hub.release(self)
            if error is None:
                return None
            told = exception_text(error)
            log.warning("%s", printable(told))  # one line: a plugin's text may hold breaks
            del error
            return told

    def __repr__(self) -> str:
        state = "open" if self.is_open else ("done" if self.done else "idle")
        return f"<ServedEpisode {self.name!r} {self.instance_id!r} turn={self.turn} {state}>"


# The server's event-loop watchdog: the guarantees ``interactions run`` gives, for serve.
# Served episodes share one event loop, so a plugin's synchronous call holds up every
# client. The same :class:`~interactions_core.runtime.watchdog.LoopWatchdog` logs a block
# longer than ``REPORT_AFTER`` seconds by the plugin's method name; with ``--timeout S``
# breaks it after ``S`` seconds (its episode ends with a readable error, its session is
# finalized); once a stop signal arrived, breaks it after ``REPORT_AFTER`` seconds, so a
# second signal stops at once. Code that never returns to Python cannot be broken.


#: Seconds the loop may be held before the block is logged (and, when stopping, broken).
REPORT_AFTER = 1.0


class ServeWatchdog:
    """Starts and stops a :class:`LoopWatchdog` with the server and logs what it finds."""

    def __init__(self, timeout: float | None, stopping: Callable[[], bool]) -> None:
        self.timeout = timeout
        self.stopping = stopping
        self.watchdog: LoopWatchdog | None = None
        self._logged: dict[str, int] = {}
        self._task: asyncio.Task[Any] | None = None

    async def start(self) -> None:
        """Lifespan start-up (on the loop, in the main thread, so it can break a block)."""
        loop = asyncio.get_running_loop()
        self.watchdog = LoopWatchdog(
            loop, limit=self.timeout, report_after=REPORT_AFTER, should_break=self.stopping
        ).start()
        self._task = loop.create_task(self._report_forever())

    async def stop(self) -> None:
        """Lifespan shutdown: report the last blocks and stop watching."""
        if self._task is not None:
            self._task.cancel()
        if self.watchdog is not None:
            self.report()
            self.watchdog.stop()

    def report(self) -> None:
        """Log each block not logged yet (the loop is free again when this runs)."""
        watchdog = self.watchdog
        if watchdog is None:
            return
        for name, (count, longest) in list(watchdog.blocks.items()):
            if self._logged.get(name, 0) >= count:
                continue
            self._logged[name] = count
            log.warning(
                "%s blocked the event loop for %.1f s (%d time(s) so far): %s",
                printable(name),
                longest,
                count,
                BLOCKING_ADVICE,
            )

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(REPORT_AFTER / 2)
            self.report()


def _answer(exc: BaseException, then: str) -> ServeError:
    """The client's answer to a failed plugin call: its text only.

    The plugin's exception is not chained to it. Chained, it left the step's tracked
    frame with its traceback, and what those hold (the error itself, its arguments,
    the runtime's frames with a bad result) was dropped later, inside OpenEnv's handler,
    where a slow ``__del__`` was charged to no call and timed out other clients' steps.
    Dropped where this answer is made, it is charged to this step.
    """
    text = exception_text(exc)  # the runtime's own error: its text is the runtime's
    # The text, not the error (a log record keeps its arguments), on one line: a plugin's
    # message often quotes the client's text, which must not forge lines of the log.
    log.warning("%s", printable(text))
    return ServeError(text + then)
