"""The episode loop: one sample, one policy, at most one interaction.

verl's multi-turn semantics, precisely (see ``docs/episodes.md``):

1. The sample picks its interaction by ``interaction_kwargs["name"]``
   (``extra_info.interaction_kwargs``, verl's location, or a top-level
   ``interaction_kwargs``). No ``interaction_kwargs``: no interaction, a
   single-turn episode. No ``name``: the run's default interaction, else an error.
2. A session starts with a fresh, unique ``instance_id``:
   ``start_interaction(instance_id, **interaction_kwargs)``.
3. ``messages`` starts as a copy of the sample's ``prompt``. Each turn: the
   policy's reply is appended as ``{"role": "assistant", "content": reply}``;
   ``generate_response(instance_id, messages, **interaction_kwargs)`` sees the
   whole list; its score is recorded; unless the episode ends here, its feedback
   is appended as ``{"role": "user", "content": feedback}``.
4. The episode ends, checked in this order after each judged turn, when the
   interaction says terminate (``terminated``), when ``max_assistant_turns``
   assistant turns were judged (``max_assistant_turns``), when
   ``max_user_turns`` feedback messages were already appended
   (``max_user_turns``); and before a turn when the policy returns ``None``
   (``exhausted``). Without an interaction the first reply ends it
   (``single_turn``). Any failure ends it as ``error``.
5. ``calculate_score(instance_id, **interaction_kwargs)`` gives the final score;
   ``finalize_interaction(instance_id)`` runs on every path, including errors,
   timeouts and cancellation.

The per-turn path calls the policy and the interaction directly: no pluggy, no
wrapper coroutine, no per-turn allocation beyond the two messages appended and
the score; a result that is already an ``InteractionResult`` is used as is.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import Interrupted
from ..result import InteractionResult, as_score
from .errors import InteractionCallError, PolicyError, SampleError
from .session import SessionTracker, call_error

__all__ = [
    "END_REASONS",
    "EpisodeLoop",
    "EpisodeRecord",
    "Observers",
    "interaction_kwargs_of",
    "stops_the_run",
]

TERMINATED = "terminated"
MAX_ASSISTANT_TURNS = "max_assistant_turns"
MAX_USER_TURNS = "max_user_turns"
EXHAUSTED = "exhausted"
SINGLE_TURN = "single_turn"
ERROR = "error"
CANCELLED = "cancelled"
#: Why an episode can end.
END_REASONS = (
    TERMINATED,
    MAX_ASSISTANT_TURNS,
    MAX_USER_TURNS,
    EXHAUSTED,
    SINGLE_TURN,
    ERROR,
    CANCELLED,
)
"""Every ``end_reason`` an :class:`EpisodeRecord` can carry."""

_coerce = InteractionResult.coerce
_isfinite = math.isfinite
_perf_counter = time.perf_counter
_new_record = object.__new__
#: Add to a ``perf_counter`` reading to get wall-clock (epoch) seconds.
_WALL_OFFSET = time.time() - time.perf_counter()
_LIFECYCLE = frozenset(("start_interaction", "generate_response", "calculate_score"))


def _overridden(policy: Any, method: str) -> Callable[..., Any] | None:
    """``policy.method`` unless it is missing or :class:`Policy`'s no-op."""
    from .policies.base import Policy

    bound = getattr(policy, method, None)
    if bound is None:
        return None
    if getattr(type(policy), method, None) is getattr(Policy, method):
        return None
    return bound  # type: ignore[no-any-return]


def _replay_field(policy: Any) -> str | None:
    """The sample key a plain :class:`ReplayPolicy` reads its replies from, else ``None``.

    Such a policy's ``start`` is ``iter(sample[field])`` for a list and its
    ``reply`` is ``next(state, None)``: the loop does both inline. A subclass or
    an instance that replaces either method, or a dotted field, is called as usual.
    """
    from .policies.replay import ReplayPolicy

    cls = type(policy)
    if (
        not isinstance(policy, ReplayPolicy)
        or cls.start is not ReplayPolicy.start
        or cls.reply is not ReplayPolicy.reply
        or "start" in vars(policy)
        or "reply" in vars(policy)
    ):
        return None
    key: str | None = policy._key
    return key


def _takes_repeat(start: Callable[..., Any]) -> bool:
    """Whether a policy's ``start`` accepts ``repeat=`` (older policies take the sample only)."""
    try:
        parameters = inspect.signature(start).parameters
    except (TypeError, ValueError):
        return False
    return "repeat" in parameters or any(p.kind == p.VAR_KEYWORD for p in parameters.values())


_NO_ERRORS: list[dict[str, Any]] = []  # shared and never appended to


def stops_the_run(exc: BaseException, stopping: Callable[[], bool] | None = None) -> bool:
    """Whether ``exc`` must leave the episode: a real stop, not something a plugin raised.

    A :class:`CancelledError` is real when the running task was asked to stop
    (``stopping()``, the :class:`Runner`'s own flag, or ``Task.cancelling()``
    on Python 3.11+; on 3.10 outside a runner every cancellation counts).
    :class:`RunInterrupted` is the CLI's second Ctrl-C. Everything else,
    ``SystemExit`` and ``KeyboardInterrupt`` included, is the episode's error:
    a real Ctrl-C reaches a run as a cancellation (``asyncio.run`` and the CLI
    turn the signal into one), never as an exception inside a plugin call.
    """
    if isinstance(exc, Interrupted):  # a real signal (RunInterrupted: the second Ctrl-C)
        return True
    if isinstance(exc, asyncio.CancelledError):
        if stopping is not None and stopping():
            return True
        task = asyncio.current_task()
        cancelling = getattr(task, "cancelling", None)
        if cancelling is None:
            return stopping is None
        if cancelling() > 0:
            return True
    return False


def _copy_message(message: Any) -> Any:
    """A copy of a prompt message deep enough that editing it never reaches the sample."""
    if message.__class__ is dict:
        content = message.get("content")
        if content is None or content.__class__ is str:
            return message.copy()
    import copy

    return copy.deepcopy(message)


class EpisodeRecord:
    """What happened in one episode. ``to_dict()`` is the JSONL record."""

    __slots__ = (
        "duration_s",
        "end_reason",
        "errors",
        "final_score",
        "index",
        "instance_id",
        "interaction",
        "messages",
        "repeat",
        "sample_id",
        "scores",
        "started_at",
        "turns",
        "usage",
        "user_turns",
    )

    def __init__(self, index: int, sample_id: Any, repeat: int = 0) -> None:
        self.index = index
        self.repeat = repeat  # which of the sample's --repeat episodes (0-based)
        self.sample_id = sample_id
        self.interaction: str | None = None
        self.instance_id: str | None = None
        self.messages: list[dict[str, Any]] = []
        self.scores: list[float] = []
        self.turns = 0
        self.user_turns = 0
        self.end_reason = ERROR
        self.final_score: float | None = None
        self.errors: list[dict[str, Any]] = _NO_ERRORS  # replaced by a list on the first error
        self.started_at = 0.0  # a perf_counter reading; to_dict() gives epoch seconds
        self.duration_s = 0.0
        self.usage: dict[str, Any] | None = None  # the policy's accounting (tokens, latency)

    @property
    def ok(self) -> bool:
        """True when the episode ran without any error."""
        return not self.errors

    def add_error(
        self,
        where: str,
        exc: BaseException,
    ) -> None:
        """Record ``exc``, raised in ``where`` (a lifecycle method, ``policy.reply``, ...)."""
        entry: dict[str, Any] = {
            "where": where,
            "interaction": self.interaction,
            "instance_id": self.instance_id,
            "type": exc.__class__.__name__,
            "message": str(exc),
        }
        if isinstance(exc, InteractionCallError):
            entry["where"] = exc.method
            cause = exc.__cause__
            if cause is not None:
                entry["type"] = cause.__class__.__name__
        if self.errors is _NO_ERRORS:
            self.errors = []
        self.errors.append(entry)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "repeat": self.repeat,
            "sample_id": self.sample_id,
            "interaction": self.interaction,
            "instance_id": self.instance_id,
            "end_reason": self.end_reason,
            "turns": self.turns,
            "user_turns": self.user_turns,
            "scores": self.scores,
            "final_score": self.final_score,
            "errors": list(self.errors),
            "started_at": round(self.started_at + _WALL_OFFSET, 6),
            "duration_s": self.duration_s,
            "usage": self.usage,
            "messages": self.messages,
        }

    def __repr__(self) -> str:
        return (
            f"<EpisodeRecord {self.index} {self.interaction!r} {self.end_reason} "
            f"turns={self.turns} final_score={self.final_score!r}>"
        )


class Observers:
    """The observer hook callers of a run, looked up once (``None``: not implemented)."""

    __slots__ = ("on_session_end", "on_session_start", "on_turn")

    def __init__(
        self,
        on_session_start: Callable[..., Any] | None = None,
        on_turn: Callable[..., Any] | None = None,
        on_session_end: Callable[..., Any] | None = None,
    ) -> None:
        self.on_session_start = on_session_start
        self.on_turn = on_turn
        self.on_session_end = on_session_end

    @classmethod
    def from_registry(cls, registry: Any) -> Observers:
        """Ask the registry's plugin host for each observer hook, once."""
        host = registry.plugin_host
        return cls(
            host.observer("on_session_start"),
            host.observer("on_turn"),
            host.observer("on_session_end"),
        )

    def __bool__(self) -> bool:
        return any((self.on_session_start, self.on_turn, self.on_session_end))


def interaction_kwargs_of(sample: Mapping[str, Any]) -> Any:
    """The sample's ``interaction_kwargs``: ``extra_info``'s (verl) or the top-level one."""
    extra = sample.get("extra_info")
    if extra is not None and (extra.__class__ is dict or isinstance(extra, Mapping)):
        kwargs = extra.get("interaction_kwargs")
        if kwargs is not None:
            return kwargs
    return sample.get("interaction_kwargs")


def sample_id_of(sample: Mapping[str, Any], index: int) -> Any:
    """``id`` of the row, else ``extra_info.index`` (verl's), else the row's position."""
    value = sample.get("id")
    if value is None:
        extra = sample.get("extra_info")
        if isinstance(extra, Mapping):
            value = extra.get("index")
    return index if value is None else value


def _positive(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, not {value!r}")
    return value


class EpisodeLoop:
    """Plays episodes; one loop serves a whole run (it holds no per-episode state).

    ``interactions`` maps names to instances (``None``: no interactions at all,
    every episode is single-turn whatever its ``interaction_kwargs``).
    ``default`` names the interaction of samples whose kwargs have no ``name``.
    ``timeout`` bounds every interaction call, in seconds (``None``: no bound).
    """

    def __init__(
        self,
        policy: Any,
        interactions: Mapping[str, Any] | None = None,
        *,
        default: str | None = None,
        max_assistant_turns: int | None = None,
        max_user_turns: int | None = None,
        timeout: float | None = None,
        observers: Observers | None = None,
        tracker: SessionTracker | None = None,
    ) -> None:
        if interactions is not None and default is not None and default not in interactions:
            raise ValueError(
                f"default interaction {default!r} is not one of the configured ones "
                f"({', '.join(interactions) or 'none'})"
            )
        if timeout is not None and (isinstance(timeout, bool) or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.policy = policy
        self.interactions = interactions
        self.default = default
        self.max_assistant_turns = _positive("max_assistant_turns", max_assistant_turns)
        self.max_user_turns = _positive("max_user_turns", max_user_turns)
        self.timeout = timeout
        self.observers = observers if observers else None
        self.tracker = tracker if tracker is not None else SessionTracker()
        self._reply = policy.reply
        self._reply_is_async = inspect.iscoroutinefunction(policy.reply)
        # start/finish are skipped entirely when they are the base class's no-ops.
        self._start = _overridden(policy, "start")
        self._start_takes_repeat = self._start is not None and _takes_repeat(self._start)
        self._finish = _overridden(policy, "finish")
        usage = _overridden(policy, "usage")  # a plugin's own ``usage`` attribute is not ours
        self._usage = usage if callable(usage) else None
        self._replay_field = _replay_field(policy)
        self._prefix = uuid.uuid4().hex[:12] + "-"
        # run() routes the common case inline unless a subclass has its own route().
        self._inline_route = type(self).route is EpisodeLoop.route
        self._ids = itertools.count()
        #: Tells a real cancellation from a ``CancelledError`` a plugin raised
        #: (the :class:`Runner` sets it to its own "stopping" flag).
        self.stopping: Callable[[], bool] | None = None

    # -- choosing the interaction ----------------------------------------------

    def route(self, sample: Mapping[str, Any]) -> tuple[str, Any, dict[str, Any]] | None:
        """``(name, interaction, kwargs)`` for ``sample``, or ``None`` for no interaction.

        Raises :class:`SampleError` naming the choices when the name is missing
        (and there is no default) or unknown.
        """
        interactions = self.interactions
        if interactions is None:
            return None
        kwargs = interaction_kwargs_of(sample)
        if kwargs is None:
            return None
        if kwargs.__class__ is not dict and not isinstance(kwargs, Mapping):
            raise SampleError(f"interaction_kwargs must be a mapping, not {type(kwargs).__name__}")
        name = kwargs.get("name")
        if name.__class__ is str:
            interaction = interactions.get(name)
            if interaction is not None:
                return name, interaction, dict(kwargs)
        if name is None:
            if self.default is None:
                raise SampleError(
                    "interaction_kwargs has no 'name' and no default interaction is set; "
                    f"add a name (one of: {', '.join(interactions) or 'none configured'}) "
                    "or set 'default:' in the config (--default-interaction NAME)"
                )
            name = self.default
        interaction = interactions.get(name) if isinstance(name, str) else None
        if interaction is None:
            import difflib

            close = difflib.get_close_matches(str(name), list(interactions), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SampleError(
                f"the sample names interaction {name!r}, which is not configured{hint} "
                f"Configured: {', '.join(interactions) or 'none'}."
            )
        return name, interaction, dict(kwargs)

    def new_instance_id(self) -> str:
        """A process-unique session id (verl passes its request id the same way)."""
        return f"{self._prefix}{next(self._ids)}"

    # -- one episode --------------------------------------------------------------

    async def _call(self, awaitable: Any) -> Any:
        """Await an interaction call under the run's timeout (only used when one is set)."""
        return await asyncio.wait_for(awaitable, self.timeout)

    async def run(
        self, sample: Mapping[str, Any], index: int = 0, repeat: int = 0
    ) -> EpisodeRecord:
        """Play one episode of ``sample``; never raises except ``CancelledError``.

        ``repeat`` numbers the episodes of one sample under ``--repeat`` (0-based);
        a policy whose ``start`` takes a ``repeat`` argument receives it.

        The lifecycle calls are made inline (not through :class:`Session`) so an
        episode costs little more than the same calls written by hand; the
        guarantees are the same: ``finalize_interaction`` runs on every path.
        The record's fields are kept in locals and written once, on the way out.
        """
        started = _perf_counter()
        record: EpisodeRecord = _new_record(EpisodeRecord)
        record.errors = _NO_ERRORS
        observers = self.observers
        timeout = self.timeout
        interaction: Any = None
        name: str | None = None
        instance_id = ""
        kwargs: Any = None
        messages: list[dict[str, Any]] | None = None
        scores: list[float] | None = None
        end_reason = ERROR
        final_score: float | None = None
        sample_id: Any = index
        is_open = False
        state: Any = None
        have_state = False
        error: BaseException | None = None
        where = "sample"
        turns = user_turns = 0
        try:
            if sample.__class__ is not dict and not isinstance(sample, Mapping):
                raise SampleError(f"a sample must be a mapping, not {type(sample).__name__}")
            get = sample.get
            extra = get("extra_info")
            if extra is not None and extra.__class__ is not dict and not isinstance(extra, Mapping):
                extra = None  # not verl's extra_info: neither its index nor its kwargs count
            value = get("id")
            if value is not None:
                sample_id = value
            elif extra is not None:
                value = extra.get("index")
                if value is not None:
                    sample_id = value
            prompt = get("prompt")
            if prompt.__class__ is not list:
                raise SampleError(
                    "the sample's 'prompt' must be a list of chat messages "
                    '([{"role": ..., "content": ...}, ...])'
                )
            # Each message is copied: a plugin editing the conversation never
            # changes the caller's sample.
            messages = [_copy_message(m) for m in prompt]
            # Routing (see route()): the common case inline, anything else through route().
            target: Any = None
            target_name: str | None = None
            interactions = self.interactions
            if interactions is not None:
                if extra is not None:
                    kwargs = extra.get("interaction_kwargs")
                if kwargs is None:
                    kwargs = get("interaction_kwargs")
                if kwargs is not None:
                    if kwargs.__class__ is dict and self._inline_route:
                        target_name = kwargs.get("name")
                        if target_name.__class__ is str:
                            target = interactions.get(target_name)
                    if target is not None:
                        kwargs = kwargs.copy()
                    else:
                        routed = self.route(sample)
                        if routed is not None:
                            target_name, target, kwargs = routed
            where = "policy.start"
            replay_field = self._replay_field
            if (
                replay_field is not None
                and (value := get(replay_field)).__class__ is list
                and not repeat
                and not (value and value[0].__class__ is list)
            ):
                state = iter(value)  # ReplayPolicy.start's common case, inline
            elif self._start is not None:
                if repeat and self._start_takes_repeat:
                    state = self._start(sample, repeat=repeat)
                else:
                    state = self._start(sample)
            have_state = True
            reply = self._reply
            reply_is_async = self._reply_is_async
            replay = replay_field is not None
            append = messages.append
            if target is None:
                scores = []
                where = "policy.reply"
                if replay:
                    text = next(state, None)  # ReplayPolicy.reply, inline
                else:
                    text = reply(state, messages)
                    if reply_is_async:
                        text = await text
                if text.__class__ is not str:
                    if text is not None:
                        raise PolicyError(f"reply must be a str or None, not {type(text).__name__}")
                    end_reason = EXHAUSTED
                else:
                    append({"role": "assistant", "content": text})
                    turns = 1
                    end_reason = SINGLE_TURN
            else:
                name = target_name
                interaction = target
                instance_id = f"{self._prefix}{next(self._ids)}"
                where = "start_interaction"
                # Counted open before the call: a cancel inside it still finalizes.
                is_open = True
                self.tracker.started += 1
                if timeout is None:
                    returned = await interaction.start_interaction(instance_id, **kwargs)
                else:
                    returned = await self._call(
                        interaction.start_interaction(instance_id, **kwargs)
                    )
                if returned != instance_id and returned.__class__ is str and returned:
                    instance_id = returned
                on_turn = None
                if observers is not None:
                    # An observer's error is recorded with the session it happened in.
                    record.interaction = name
                    record.instance_id = instance_id
                    on_turn = observers.on_turn
                    if observers.on_session_start is not None:
                        self._observe(
                            record,
                            "on_session_start",
                            observers.on_session_start,
                            interaction_name=name,
                            instance_id=instance_id,
                            kwargs=kwargs,
                        )
                generate = interaction.generate_response
                max_assistant = self.max_assistant_turns
                max_user = self.max_user_turns
                scores = []
                while True:
                    where = "policy.reply"
                    if replay:
                        text = next(state, None)  # ReplayPolicy.reply, inline
                    else:
                        text = reply(state, messages)
                        if reply_is_async:
                            text = await text
                    if text.__class__ is not str:
                        if text is not None:
                            raise PolicyError(
                                f"reply must be a str or None, not {type(text).__name__}"
                            )
                        end_reason = EXHAUSTED
                        break
                    append({"role": "assistant", "content": text})
                    turns += 1
                    where = "generate_response"
                    if timeout is None:
                        result = await generate(instance_id, messages, **kwargs)
                    else:
                        result = await self._call(generate(instance_id, messages, **kwargs))
                    if result.__class__ is not InteractionResult:
                        result = _coerce(result)
                    elif not _isfinite(result.score):
                        raise ValueError(f"returned a non-finite score ({result.score!r})")
                    scores.append(result.score)
                    if on_turn is not None:
                        self._observe(
                            record,
                            "on_turn",
                            on_turn,
                            interaction_name=name,
                            instance_id=instance_id,
                            turn=turns,
                            messages=messages,
                            result=result,
                        )
                    if result.should_terminate:
                        end_reason = TERMINATED
                        break
                    if max_assistant is not None and turns >= max_assistant:
                        end_reason = MAX_ASSISTANT_TURNS
                        break
                    if max_user is not None and user_turns >= max_user:
                        end_reason = MAX_USER_TURNS
                        break
                    append({"role": "user", "content": result.content})
                    user_turns += 1
                where = "calculate_score"
                if timeout is None:
                    value = await interaction.calculate_score(instance_id, **kwargs)
                else:
                    value = await self._call(interaction.calculate_score(instance_id, **kwargs))
                if value.__class__ is not float or not _isfinite(value):
                    value = as_score(value, "the returned score")
                final_score = value
        except BaseException as exc:
            if stops_the_run(exc, self.stopping):
                error = RuntimeError("the episode was cancelled")
                end_reason = CANCELLED
                record.interaction = name
                record.instance_id = instance_id or None
                record.add_error(where, error)
                raise
            # Anything else a plugin or policy raised, of any class (a stray
            # CancelledError, SystemExit, KeyboardInterrupt, a BaseException
            # subclass), ends this episode only.
            error = exc
            end_reason = ERROR
            final_score = None
            if interaction is not None and where in _LIFECYCLE:
                exc = call_error(name or "?", instance_id, where, exc, timeout)
            record.interaction = name
            record.instance_id = instance_id or None
            record.add_error(where, exc)
        finally:
            record.index = index
            record.repeat = repeat
            record.usage = None
            record.sample_id = sample_id
            record.interaction = name
            record.instance_id = instance_id or None
            record.messages = messages if messages is not None else []
            record.scores = scores if scores is not None else []
            record.turns = turns
            record.user_turns = user_turns
            record.end_reason = end_reason
            record.final_score = final_score
            record.started_at = started
            if is_open:
                try:
                    if timeout is None:
                        await interaction.finalize_interaction(instance_id)
                    else:
                        await self._call(interaction.finalize_interaction(instance_id))
                except BaseException as exc:
                    if stops_the_run(exc, self.stopping):
                        raise
                    problem = call_error(
                        name or "?", instance_id, "finalize_interaction", exc, timeout
                    )
                    record.add_error("finalize_interaction", problem)
                    if error is None:
                        error = problem
                        record.end_reason = ERROR
                        record.final_score = None
                finally:
                    self.tracker.finalized += 1
            if have_state and self._usage is not None:
                try:
                    record.usage = self._usage(state)
                except Exception as exc:
                    record.add_error("policy.usage", exc)
            if have_state and self._finish is not None:
                try:
                    self._finish(state)
                except BaseException as exc:
                    if stops_the_run(exc, self.stopping):
                        raise
                    record.add_error("policy.finish", exc)
            record.duration_s = _perf_counter() - started
            if (
                interaction is not None
                and observers is not None
                and observers.on_session_end is not None
            ):
                self._observe(
                    record,
                    "on_session_end",
                    observers.on_session_end,
                    interaction_name=name,
                    instance_id=instance_id or None,
                    record=record,
                    error=error,
                )
        return record

    @staticmethod
    def _observe(
        _record: EpisodeRecord, _hook: str, _caller: Callable[..., Any], /, **kw: Any
    ) -> None:
        try:
            _caller(**kw)
        except BaseException as exc:  # an observer's bug is recorded, the episode goes on
            if stops_the_run(exc):
                raise
            _record.add_error(f"observer {_hook}", exc)
