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
   ``generate_response(instance_id, messages, **interaction_kwargs)`` sees a
   copy of the whole list (its edits never reach the record or the policy);
   its score is recorded; unless the episode ends here, its feedback is
   appended as ``{"role": "user", "content": feedback}``.
4. The episode ends, checked in this order after each judged turn, when the
   interaction says terminate (``terminated``), when ``max_assistant_turns``
   assistant turns were judged (``max_assistant_turns``), when
   ``max_user_turns`` feedback messages were already appended
   (``max_user_turns``); and before a turn when the policy returns ``None``
   (``exhausted``). Without an interaction the first reply ends it
   (``single_turn``). Any failure ends it as ``error``. The judging, the
   feedback and the ending checks are the one episode step of :mod:`.step`.
5. ``calculate_score(instance_id, **interaction_kwargs)`` gives the final score;
   ``finalize_interaction(instance_id)`` runs on every path, including errors,
   timeouts and cancellation.

Every interaction call goes through one :class:`~interactions_core.runtime.session.Session`,
the lifecycle's only implementation: its rules (the failed-start rule, timeouts,
legacy verl signatures, the error every failure becomes) are the loop's rules.
The loop adds what a whole episode needs around it: routing, the policy, the
limits, the observers and the record.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..errors import PolicyError, SampleError, note_on
from .observers import Observers
from .record import MAX_TURNS, EpisodeRecord
from .session import Session, SessionTracker, call_error, stops_the_run
from .stats import PASS_SCORE, counted_usage
from .step import CANCELLED, ERROR, EXHAUSTED, SINGLE_TURN, conclude_turn, copy_messages
from .watchdog import tracked

__all__ = [
    "PARTIAL_RECORD",
    "EpisodeLoop",
    "RunOptions",
    "check_positive_int",
    "choose",
    "copy_messages",
    "interaction_kwargs_of",
    "positive_int",
    "prompt_of",
    "sample_id_of",
]


# -- the options of a run ---------------------------------------------------------------
#
# A local run, the episode loop, ``interactions run`` and a sharded run on Ray
# workers all take the same options. :class:`RunOptions` is their one
# declaration: an immutable attrs class whose validators run once, when it is
# built, so every consumer can trust the values it reads. A sharded run sends it
# to its workers (it is picklable) and keys their state by
# :meth:`RunOptions.worker_key`.


def check_positive_int(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is an ``int`` of at least 1 (``bool`` is refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator: :func:`check_positive_int` on the attribute."""
    check_positive_int(attribute.name, value)


def _limit(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A turn limit: ``None`` (no limit) or a positive integer, at most :data:`MAX_TURNS`."""
    if value is not None:
        try:
            positive_int(instance, attribute, value)
        except ValueError:
            raise ValueError(
                f"{attribute.name} must be a positive integer or None, not {value!r}"
            ) from None
        if value > MAX_TURNS:
            raise ValueError(
                f"{attribute.name} must be at most {MAX_TURNS:,} (the most turns an "
                f"episode's record holds), not {value:,}"
            )


def _seconds(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A timeout: ``None`` (no bound) or a positive number of seconds."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{attribute.name} must be a positive number of seconds, not {value!r}")


def _finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, not {value!r}")


@attrs.frozen(kw_only=True)
class RunOptions:
    """How a run plays its episodes; every field is checked when the object is built.

    ``concurrency``: episodes in flight (the policy's ``max_concurrency`` may
    lower it). ``repeat``: episodes per sample (pass@k for k = 1..repeat).
    ``pass_score``: the final score at which an episode counts as passed.
    ``default``: the interaction of samples whose kwargs name none.
    ``max_assistant_turns`` / ``max_user_turns``: turn limits (``None``: none).
    ``timeout``: the bound on every interaction call, in seconds (``None``: none).
    """

    concurrency: int = attrs.field(default=16, validator=positive_int)
    repeat: int = attrs.field(default=1, validator=positive_int)
    pass_score: float = attrs.field(default=PASS_SCORE, validator=_finite)
    default: str | None = None
    max_assistant_turns: int | None = attrs.field(default=None, validator=_limit)
    max_user_turns: int | None = attrs.field(default=None, validator=_limit)
    timeout: float | None = attrs.field(default=None, validator=_seconds)

    #: Options only the driver of a sharded run uses (it expands repeats, counts pass@k).
    DRIVER_ONLY = ("repeat", "pass_score")

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes``, checked like a new one."""
        return attrs.evolve(self, **changes)

    def worker_key(self) -> str:
        """The options that shape how a worker plays an episode, as a stable string."""
        shared = attrs.asdict(self, filter=lambda a, _: a.name not in self.DRIVER_ONLY)
        return json.dumps(shared, sort_keys=True)


_perf_counter = time.perf_counter
_let_others_run = functools.partial(asyncio.sleep, 0)

#: Seconds an episode may run without waiting before it lets the event loop run
#: others: each turn of a long episode copies the whole conversation for the
#: interaction, so thousands of turns that never wait would hold the loop for
#: seconds (the copy is timed in ``docs/reliability.md``).
HOLD_LIMIT = 0.05


def _overridden(policy: Any, method: str) -> Callable[..., Any] | None:
    """``policy.method`` unless it is missing or :class:`Policy`'s no-op."""
    from .policies.base import Policy

    bound = getattr(policy, method, None)
    if bound is None:
        return None
    if getattr(type(policy), method, None) is getattr(Policy, method):
        return None
    return bound  # type: ignore[no-any-return]


def _takes_repeat(start: Callable[..., Any]) -> bool:
    """Whether a policy's ``start`` accepts ``repeat=`` (older policies take the sample only)."""
    try:
        parameters = inspect.signature(start).parameters
    except (TypeError, ValueError):
        return False
    return "repeat" in parameters or any(p.kind == p.VAR_KEYWORD for p in parameters.values())


#: The attribute of the exception (a cancellation) that stopped an episode holding its
#: record as far as it got, finalized and closed: when the cancellation reached that
#: episode alone, this record is the one to keep (``runner.Workers``), not a stand-in.
#: The exception itself is re-raised unchanged, as ``asyncio.timeout`` needs it.
PARTIAL_RECORD = "episode_record"


class EpisodeLoop:
    """Plays episodes; one loop serves a whole run (it holds no per-episode state).

    ``interactions`` maps names to instances (``None``: no interactions at all,
    every episode is single-turn whatever its ``interaction_kwargs``).
    ``default`` names the interaction of samples whose kwargs have no ``name``.
    ``timeout`` bounds every interaction call, in seconds (``None``: no bound).
    ``options`` (a :class:`~.options.RunOptions`) gives all three and the turn
    limits at once, in place of the keyword arguments.
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
        options: RunOptions | None = None,
    ) -> None:
        if options is None:
            options = RunOptions(
                default=default,
                max_assistant_turns=max_assistant_turns,
                max_user_turns=max_user_turns,
                timeout=timeout,
            )
        default = options.default
        if interactions is not None and default is not None and default not in interactions:
            from .._names import summarize

            raise ValueError(
                f"default interaction {default!r} is not one of the configured ones "
                f"({summarize(interactions) or 'none'})"
            )
        self.policy = policy
        self.interactions = interactions
        self.default = default
        self.max_assistant_turns = options.max_assistant_turns
        self.max_user_turns = options.max_user_turns
        self.timeout = options.timeout
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
        self._prefix = uuid.uuid4().hex[:12] + "-"
        self._ids = itertools.count()
        #: Tells a real cancellation from a ``CancelledError`` a plugin raised
        #: (the :class:`Runner` sets it to its own "stopping" flag).
        self.stopping: Callable[[], bool] | None = None

    # -- choosing the interaction ----------------------------------------------

    def route(self, sample: Mapping[str, Any]) -> tuple[str, Any, dict[str, Any]] | None:
        """``(name, interaction, kwargs)`` for ``sample``, or ``None`` for no interaction.

        ``kwargs`` is a copy the session may keep. Raises :class:`SampleError`
        naming the choices when the name is missing (and there is no default) or
        unknown.
        """
        if self.interactions is None:
            return None
        kwargs = interaction_kwargs_of(sample)
        if kwargs is None:
            return None
        return choose(self.interactions, kwargs, self.default, error=SampleError)

    def new_instance_id(self) -> str:
        """A process-unique session id (verl passes its request id the same way)."""
        return f"{self._prefix}{next(self._ids)}"

    # -- one episode --------------------------------------------------------------

    async def run(
        self, sample: Mapping[str, Any], index: int = 0, repeat: int = 0
    ) -> EpisodeRecord:
        """Play one episode of ``sample``; never raises except for a real stop of the run.

        ``repeat`` numbers the episodes of one sample under ``--repeat`` (0-based);
        a policy whose ``start`` takes a ``repeat`` argument receives it. Anything
        a plugin or the policy raises, of any class (a stray ``CancelledError``,
        ``SystemExit``, ``KeyboardInterrupt``), ends this episode only, as an error
        in its record.
        """
        record = EpisodeRecord(index, index, repeat)
        record.started_at = _perf_counter()
        session: Session | None = None
        state: Any = _NO_STATE
        error: BaseException | None = None
        # The policy's reply, and plugin code the runtime runs between calls, lie outside
        # every bounded call: a block there is the episode's, timed as one, and charged
        # to it, so that the calls awaiting beside it are not charged its time (Session).
        with tracked(inspect.currentframe()):
            try:
                if type(sample) is not dict and not isinstance(sample, Mapping):
                    raise SampleError(f"a sample must be a mapping, not {type(sample).__name__}")
                record.sample_id = sample_id_of(sample, index)
                record.messages = prompt_of(sample)
                routed = self.route(sample)
                if routed is not None:  # counted under it, however the episode ends
                    record.interaction = routed[0]
                record.stage = "policy.start"
                start = self._start
                if start is None:
                    state = None
                elif repeat and self._start_takes_repeat:
                    state = start(sample, repeat=repeat)
                else:
                    state = start(sample)
                if routed is None:
                    await self._single_turn(record, state)
                else:
                    session = Session(  # by position: see Session
                        routed[1],
                        record.interaction,
                        self.new_instance_id(),
                        self.timeout,
                        self.tracker,
                        self.stopping,
                    )
                    await self._play(record, session, state, routed[2])
            except BaseException as exc:
                if stops_the_run(exc, self.stopping):
                    record.end_reason = CANCELLED
                    record.add_error(record.stage, RuntimeError("the episode was cancelled"))
                    note_on(exc, PARTIAL_RECORD, record)  # the runner may keep it: see there
                    raise
                error = self._failed(record, session, exc)
            finally:
                # Finalized here rather than in a coroutine of its own: one call less per
                # episode.
                if session is not None:
                    problem = await session.finalize()
                    if problem is not None:
                        error = self._finalize_failed(record, problem, error)
                self._close(record, session, state, error)
                # Dropped here, within the episode's bounds: what the plugin left in the
                # kwargs, the policy's state, an error and what it holds. Kept in locals
                # to the return, their __del__ ran charged to no call.
                routed = session = state = error = problem = None
        return record

    async def _single_turn(self, record: EpisodeRecord, state: Any) -> None:
        record.stage = "policy.reply"
        text = self._reply(state, record.messages)
        if self._reply_is_async:
            text = await text
        if type(text) is not str:
            _no_reply(text)
            record.end_reason = EXHAUSTED
            return
        record.messages.append({"role": "assistant", "content": text})
        record.turns = 1
        record.end_reason = SINGLE_TURN

    async def _play(
        self, record: EpisodeRecord, session: Session, state: Any, kwargs: dict[str, Any]
    ) -> None:
        """Start the session, play its turns until one of the ends, score it."""
        record.stage = "start_interaction"
        record.instance_id = session.instance_id
        await session.start(**kwargs)
        record.instance_id = session.instance_id
        observers = self.observers
        if observers is not None:
            observers.notify(record, "on_session_start", kwargs=kwargs)
            if observers.on_turn is None:
                observers = None  # nothing to call per turn
        messages = record.messages
        scores = record.scores
        reply, reply_is_async, respond = self._reply, self._reply_is_async, session.respond
        # Without a limit, MAX_TURNS is one: a record of more turns is one no reader of
        # records takes (--resume and `report` refused the run's own records).
        max_assistant_turns = self.max_assistant_turns or MAX_TURNS
        max_user_turns = self.max_user_turns
        stopping = self.stopping
        turns = 0
        held_since = _perf_counter()
        while True:
            record.stage = "policy.reply"
            if _perf_counter() - held_since > HOLD_LIMIT:
                # An episode whose calls never wait would otherwise hold the loop to its
                # end: stop signals, other episodes and the progress line wait for it.
                await _let_others_run()
                if stopping is not None and stopping():
                    # The run is stopping (a signal handler says so at once): stop here
                    # rather than hold the loop again before the cancellation reaches
                    # this task, behind every other long episode's turn of the loop.
                    raise asyncio.CancelledError
                held_since = _perf_counter()
            text = reply(state, messages)
            if reply_is_async:
                text = await text
            if type(text) is not str:
                _no_reply(text)
                record.end_reason = EXHAUSTED
                break
            messages.append({"role": "assistant", "content": text})
            record.turns = turns = turns + 1
            record.stage = "generate_response"
            result = await respond(copy_messages(messages))  # the record keeps what the policy saw
            scores.append(result.score)
            if result.extra or record.extras is not None:
                record.keep_extra(result.extra)
            if observers is not None:
                observers.notify(record, "on_turn", turn=turns, messages=messages, result=result)
            end = conclude_turn(
                result, messages, turns, record.user_turns, max_assistant_turns, max_user_turns
            )
            if end is not None:
                record.end_reason = end
                break
            record.user_turns += 1
        record.stage = "calculate_score"
        record.final_score = await session.score()

    def _failed(
        self, record: EpisodeRecord, session: Session | None, exc: BaseException
    ) -> BaseException:
        """Record an error that ends this episode; return it."""
        record.end_reason = ERROR
        record.final_score = None
        if session is not None and record.stage in _LIFECYCLE:
            exc = call_error(session.name, session.instance_id, record.stage, exc, self.timeout)
        record.add_error(record.stage, exc)
        return exc

    @staticmethod
    def _finalize_failed(
        record: EpisodeRecord, problem: BaseException, error: BaseException | None
    ) -> BaseException:
        """Record a failed ``finalize_interaction``; return the episode's error."""
        record.add_error("finalize_interaction", problem)
        if error is None:
            record.end_reason = ERROR
            record.final_score = None
            return problem
        return error

    def _close(
        self,
        record: EpisodeRecord,
        session: Session | None,
        state: Any,
        error: BaseException | None,
    ) -> None:
        """Close the policy's state and the record, on every way out of :meth:`run`."""
        if state is not _NO_STATE and (self._usage is not None or self._finish is not None):
            self._close_policy(record, state)
        record.duration_s = _perf_counter() - record.started_at
        if session is not None and self.observers is not None:
            # Made plain data first (the runner does it again, for what a hook adds): a
            # value that cannot be written is this episode's error, and the hooks, the
            # trace among them, had been told an episode the record calls an error fine.
            record.keep_plain()
            self.observers.notify(record, "on_session_end", record=record, error=error)

    def _close_policy(self, record: EpisodeRecord, state: Any) -> None:
        if self._usage is not None:
            try:
                usage = self._usage(state)
                if usage is not None and not isinstance(usage, Mapping):
                    raise PolicyError(f"usage() must return a dict, not {type(usage).__name__}")
                record.usage = None if usage is None else counted_usage(usage)
            except BaseException as exc:  # any class: it costs this episode only
                if stops_the_run(exc, self.stopping):
                    raise
                record.add_error("policy.usage", exc)
        if self._finish is not None:
            try:
                self._finish(state)
            except BaseException as exc:
                if stops_the_run(exc, self.stopping):
                    raise
                record.add_error("policy.finish", exc)


#: The policy's state before ``start`` ran (``None`` is a valid state).
_NO_STATE: Any = object()
_LIFECYCLE = frozenset(("start_interaction", "generate_response", "calculate_score"))


def _no_reply(text: Any) -> None:
    """Accept ``None`` (the policy has no more replies); refuse anything else not a str."""
    if text is not None:
        raise PolicyError(f"reply must be a str or None, not {type(text).__name__}")


# Reading a sample: its prompt, its id, and which interaction plays it with what kwargs.
#
# verl keeps a sample's interaction kwargs and id under ``extra_info``; a sample
# names its interaction in ``interaction_kwargs["name"]``, and without a name the
# config's ``default:`` is used. The episode loop and ``interactions serve``
# choose the interaction the same way, through :func:`choose`; they differ only in
# the exception they raise (a bad sample, a bad reset) and in what a missing
# ``interaction_kwargs`` means (a single-turn episode for the loop).


def interaction_kwargs_of(sample: Mapping[str, Any]) -> Any:
    """The sample's ``interaction_kwargs``: ``extra_info``'s (verl) or the top-level one.

    ``extra_info``'s wins because it is the only one verl reads: a row then
    plays the same interaction here as in training. When both are present and
    name different interactions, an :class:`~interactions_core.errors.InteractionsWarning`
    says which is used and why, instead of a silent pick.
    """
    extra = sample.get("extra_info")
    if extra is not None and (type(extra) is dict or isinstance(extra, Mapping)):
        kwargs = extra.get("interaction_kwargs")
        if kwargs is not None:
            top = sample.get("interaction_kwargs")
            if top is not None:
                _warn_if_names_differ(kwargs, top)
            return kwargs
    return sample.get("interaction_kwargs")


def _warn_if_names_differ(used: Any, ignored: Any) -> None:
    """Warn when ``extra_info``'s and the top-level ``interaction_kwargs`` name different ones."""
    if not (isinstance(used, Mapping) and isinstance(ignored, Mapping)):
        return
    name, other = used.get("name"), ignored.get("name")
    if other is None or name == other:
        return
    import warnings

    from ..errors import InteractionsWarning

    warnings.warn(
        f"the sample names interaction {name!r} in extra_info.interaction_kwargs and "
        f"{other!r} in its top-level interaction_kwargs; using extra_info's ({name!r}), "
        "the one verl reads. Remove one of the two so that the row says what it plays.",
        InteractionsWarning,
        stacklevel=3,
    )


def sample_id_of(sample: Mapping[str, Any], index: int) -> Any:
    """``id`` of the row, else ``extra_info.index`` (verl's), else the row's position."""
    value = sample.get("id")
    if value is None:
        extra = sample.get("extra_info")
        if extra is not None and isinstance(extra, Mapping):
            value = extra.get("index")
    return index if value is None else value


def _shown(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters: a name of megabytes (from a served
    client, say) is not echoed back whole."""
    import reprlib

    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = limit
    shortened.maxlist = shortened.maxdict = 8
    return shortened.repr(value)


def prompt_of(sample: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A copy of the sample's prompt that the episode may extend and plugins may edit."""
    prompt = sample.get("prompt")
    if type(prompt) is not list:
        raise SampleError(
            "the sample's 'prompt' must be a list of chat messages "
            '([{"role": ..., "content": ...}, ...])'
        )
    return copy_messages(prompt)


#: Values of interaction kwargs a plugin could edit in place: copied for each episode.
_EDITABLE = (list, dict, set)


def _fresh_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the kwargs that one episode may edit, nested lists and dicts included.

    A plugin appending to a kwarg's list (or setting a key of a nested dict) must not
    change what the sample's next repeat, or the caller's sample, starts with.
    """
    fresh = kwargs.copy() if type(kwargs) is dict else dict(kwargs)
    for key, value in fresh.items():
        if type(value) in _EDITABLE:
            import copy

            fresh[key] = copy.deepcopy(value)
    return fresh


def choose(
    interactions: Mapping[str, Any],
    kwargs: Any,
    default: str | None,
    *,
    error: type[Exception] = ValueError,
    served: bool = False,
) -> tuple[str, Any, dict[str, Any]]:
    """``(name, interaction, kwargs)`` for ``interaction_kwargs``; ``kwargs`` is a fresh copy.

    The copy carries the chosen name (the default's, when the sample named
    none), as verl passes it. Raises ``error`` naming the choices when the
    kwargs are not a mapping, when there is no name and no default, or when the
    name is unknown (with a did-you-mean). ``served`` words the messages for a
    server ("served here") instead of a config ("configured").
    """
    if kwargs is None:
        kwargs = {}
    elif isinstance(kwargs, Mapping):
        kwargs = _fresh_kwargs(kwargs)
    else:
        raise error(
            "interaction_kwargs must be a mapping such as "
            f'{{"name": "gsm8k", "ground_truth": "72"}}, not {type(kwargs).__name__}'
        )
    name = kwargs.get("name")
    if name is None:
        if default is None:
            raise error(
                "interaction_kwargs has no 'name' and no default interaction is set; "
                f"name one of: {', '.join(interactions) or 'none'}, "
                "or set 'default:' in the config"
            )
        name = kwargs["name"] = default
    if not isinstance(name, str):
        raise error(
            f"interaction_kwargs 'name' must be a string such as \"gsm8k\", "
            f"not {type(name).__name__} {_shown(name)}"
            + (f"; write {name[0]!r}" if isinstance(name, list) and len(name) == 1 else "")
        )
    interaction = interactions.get(name)
    if interaction is None:
        from .._names import suggest

        where = "served here" if served else "configured"
        raise error(
            f"interaction {_shown(name)} is not {where}"
            f"{suggest(name, interactions, n=1) or '.'} "
            f"{'Served' if served else 'Configured'}: {', '.join(interactions) or 'none'}."
        )
    reserved = sorted(RESERVED_KWARGS.intersection(kwargs))
    if reserved:
        raise error(
            f"interaction_kwargs hold {', '.join(map(repr, reserved))}, a name the runtime "
            "passes itself (instance_id: the session id; messages: the conversation); "
            "rename the key"
        )
    return name, interaction, kwargs


#: Names ``interaction_kwargs`` may not use: the lifecycle calls pass the session id and
#: the conversation under them (and ``self`` is the interaction), so such a key had
#: failed the plugin's call ("got multiple values for argument 'instance_id'"), told
#: as the plugin's error.
RESERVED_KWARGS = frozenset({"instance_id", "messages", "self"})
