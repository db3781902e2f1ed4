"""The conformance rules judged by playing conversations through the runtime.

``results`` and ``scores`` judge what a turn returns and what a score is: the
runtime coerces what ``generate_response`` returns and adds up the scores, so a
wrongly typed field or an ``int``/NaN score would surface far from the plugin
that caused it. ``messages`` plays odd but legal conversations: trainers send
what the model produced (an empty history, ``None`` content, a list of content
parts, no assistant turn yet), and a plugin should answer or refuse with a clear
``InteractionsError``, never crash.

Scripted episodes are played the way a run plays them: through
:class:`~interactions_core.runtime.session.Session` (the interaction kwargs
reach every call, a failed start is not finalized) and the runtime's one episode
step (:mod:`interactions_core.runtime.step`: no feedback is appended after the
end). A :class:`Probe` stands in front of the instance: every call goes through
the context's timed, watched :meth:`~._rules.CheckContext.call`, and the raw
return value is kept, so the rules see what the plugin returned before the
session coerced it.

``isolation`` plays every episode alone, twice (to tell non-determinism apart),
then all of them together, turn ``k`` of each at the same time: state kept on
the instance (``self.truth = ...``) instead of per ``instance_id`` passes every
one-at-a-time test and then mixes up answers in a run. ``state`` plays the
episodes three times and watches the containers the instance holds (its
attributes, and one level inside dicts): one that grows with every batch of
finished sessions, or still holds a finished ``instance_id``, is a slow memory
leak, as is an ``open_sessions`` that does not return to where it was.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Mapping
from typing import Any

from .._interaction import InteractionResult
from ..errors import InteractionCallError, InteractionsError
from ..runtime.session import Session
from ..runtime.step import conclude_turn
from ._rules import CheckContext, describe_exc, new_id, short
from .driver import Episode, plugin_error

__all__ = [
    "Probe",
    "Trace",
    "check_episodes",
    "check_isolation",
    "check_messages",
    "check_result",
    "check_score",
    "check_state",
    "holding",
    "odd_conversations",
    "open_session",
    "open_sessions",
    "play",
    "returned",
    "sizes",
]


# -- ``results`` and ``scores``: what a turn's result and a score must look like ---

#: The fields of a turn's result the ``results`` check types: (field, type, as said).
_RESULT_FIELDS = (
    ("should_terminate", bool, "a bool"),
    ("content", str, "a str"),
    ("extra", Mapping, "a mapping"),
)


def check_result(ctx: CheckContext, raw: Any, where: str) -> InteractionResult | None:
    """Check one turn's result; return it coerced, or ``None`` when unusable."""
    try:
        result = InteractionResult.coerce(raw)
    except TypeError as exc:
        ctx.add(
            "results",
            f"generate_response returned a wrong result (first seen {where}): {exc}",
            key=f"coerce:{exc}",
        )
        return None
    except ValueError:  # a score that is not finite: the scores rule names it
        check_score(ctx, raw[2], "the turn score of generate_response", where)
        return None
    for field, wanted, described in _RESULT_FIELDS:
        value = getattr(result, field)
        if not isinstance(value, wanted):
            kind = type(value).__name__
            ctx.add(
                "results",
                f"generate_response's {field} must be {described}, got {kind} (first seen {where})",
                key=f"{field}:{kind}",
            )
    # the score as returned: coercion would hide an int or a bool
    score = raw[2] if isinstance(raw, (tuple, list)) and len(raw) == 4 else result.score
    check_score(ctx, score, "the turn score of generate_response", where)
    return result


def check_score(ctx: CheckContext, score: Any, what: str, where: str) -> None:
    """A score must be a finite ``float``: not an ``int``, a ``bool``, NaN or infinity."""
    kind = type(score).__name__
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        problem, fix = f"a {kind}", "return a float"
    elif not isinstance(score, float):
        problem, fix = f"an {kind}", f"return a float ({float(score)!r}, not {score!r})"
    elif not math.isfinite(score):
        problem, fix = "not finite", "scores must be finite floats"
        kind = repr(score)
    else:
        return
    ctx.add(
        "scores",
        f"{what} is {problem} (first seen {where}: {short(score)}); {fix}",
        key=f"{what}:{kind}",
    )


# -- ``messages``: odd but legal conversations get an answer, not a crash ----------


def odd_conversations() -> list[tuple[str, list[dict[str, Any]]]]:
    """(what it is, the messages passed to ``generate_response``), new on every call
    so that a plugin which edits the list it was given cannot change the next run."""
    return [
        ("an empty conversation", []),
        ("no assistant turn yet", [{"role": "user", "content": "hello"}]),
        ("assistant content None", [{"role": "assistant", "content": None}]),
        (
            "assistant content as a list of parts",
            [{"role": "assistant", "content": [{"type": "text", "text": "#### 1"}]}],
        ),
    ]


async def check_messages(ctx: CheckContext) -> None:
    """Each odd conversation, in a session of its own, gets a valid result or a clear refusal.

    Each call gets the episode's interaction kwargs, as in a run.
    """
    obj = ctx.instance()
    kwargs = ctx.episodes[0].kwargs
    for label, messages in odd_conversations():
        try:
            iid = await ctx.call(obj, "start_interaction", None, **kwargs)
        except Exception as exc:
            ctx.add("messages", f"start_interaction {describe_exc(exc)}")
            return
        try:
            raw = await ctx.call(obj, "generate_response", iid, messages, **kwargs)
        except InteractionsError:
            pass  # a clear, documented refusal is fine
        except Exception as exc:
            ctx.add(
                "messages",
                f"generate_response crashed on {label} ({short(messages)}): "
                f"{describe_exc(exc)}; return a result or raise an InteractionsError",
            )
        else:
            check_result(ctx, raw, f"on {label}")
        await ctx.finalize(obj, iid, f"on {label}")


# -- playing one scripted episode the way a run does -------------------------------

#: What an episode did, step by step: ``(should_terminate, content, score)`` per
#: turn, then ``("score", final score)``; two runs compare equal when they agree.
Trace = list[tuple[Any, ...]]

#: No return value seen yet (``None`` is a return value).
_NOTHING: Any = object()


class Probe:
    """Stands in front of an instance: each call goes through the context's ``call``
    (time limit, blocking detection) and its raw return value is kept in ``raw``."""

    def __init__(self, ctx: CheckContext, obj: Any) -> None:
        self._ctx = ctx
        self._obj = obj
        self.raw: Any = _NOTHING
        self.name = getattr(obj, "name", "?")

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> Any:
        return await self._ctx.call(self._obj, "start_interaction", instance_id, **kwargs)

    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        self.raw = await self._ctx.call(
            self._obj, "generate_response", instance_id, messages, **kwargs
        )
        return self.raw

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> Any:
        self.raw = await self._ctx.call(self._obj, "calculate_score", instance_id, **kwargs)
        return self.raw

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> Any:
        return await self._ctx.call(self._obj, "finalize_interaction", instance_id)


def open_session(ctx: CheckContext, obj: Any, tag: str) -> tuple[Session, Probe]:
    """A session on ``obj`` under a fresh explicit id (verl passes one), and its probe."""
    probe = Probe(ctx, obj)
    return Session(probe, name=ctx.target.label, instance_id=new_id(tag)), probe


async def returned(probe: Probe, call: Awaitable[Any]) -> Any:
    """``await call`` (a session call); return what the plugin returned, even a value
    the session refused. Raises the session's ``InteractionCallError`` only when the
    plugin itself raised (or timed out)."""
    probe.raw = _NOTHING
    try:
        await call
    except InteractionCallError:
        if probe.raw is _NOTHING:
            raise
    return probe.raw


async def check_episodes(ctx: CheckContext) -> None:
    """``results`` and ``scores``: play every episode on a fresh instance."""
    obj = ctx.instance()
    for number, episode in enumerate(ctx.episodes, 1):
        await play(ctx, obj, episode, number)


async def play(
    ctx: CheckContext, obj: Any, episode: Episode, number: int
) -> tuple[str | None, Trace]:
    """Play one episode under a fresh explicit id (verl passes one); return id and trace.

    What the plugin got wrong is recorded on ``ctx``; the episode stops at the
    first turn that gave nothing usable, and the session is always finalized
    once started.
    """
    where = f"in episode {number}"
    session, probe = open_session(ctx, obj, f"episode{number}")
    try:
        await session.start(**episode.kwargs)
    except InteractionCallError as exc:
        ctx.raised("results", "start_interaction", where, plugin_error(exc))
        return None, []
    trace: Trace = []
    try:
        if await _turns(ctx, session, probe, episode, where, trace):
            await _final_score(ctx, session, probe, where, trace)
        return session.instance_id, trace
    finally:
        problem = await session.finalize()
        if problem is not None:
            ctx.raised("results", "finalize_interaction", where, plugin_error(problem))


async def _turns(
    ctx: CheckContext, session: Session, probe: Probe, episode: Episode, where: str, trace: Trace
) -> bool:
    """Play the scripted replies onto ``trace``; False when a turn failed (recorded).

    Each judged turn ends with the runtime's episode step: the feedback goes in
    only while the episode goes on.
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
    for turn, reply in enumerate(episode.replies, 1):
        messages.append({"role": "assistant", "content": reply})
        result = await _judged(ctx, session, probe, list(messages), f"{where}, turn {turn}")
        if result is None:
            return False
        trace.append((result.should_terminate, result.content, result.score))
        if conclude_turn(result, messages, turn, turn - 1) is not None:
            break
    return True


async def _judged(
    ctx: CheckContext, session: Session, probe: Probe, messages: list[dict[str, Any]], where: str
) -> InteractionResult | None:
    """One turn's checked result, or ``None`` (recorded) when the turn failed."""
    try:
        raw = await returned(probe, session.respond(messages))
    except InteractionCallError as exc:
        ctx.raised("results", "generate_response", where, plugin_error(exc))
        return None
    return check_result(ctx, raw, where)


async def _final_score(
    ctx: CheckContext, session: Session, probe: Probe, where: str, trace: Trace
) -> None:
    """``calculate_score``, checked and added to ``trace`` unless the plugin raised."""
    try:
        raw = await returned(probe, session.score())
    except InteractionCallError as exc:
        ctx.raised("results", "calculate_score", where, plugin_error(exc))
        return
    check_score(ctx, raw, "calculate_score's result", where)
    trace.append(("score", raw))


# -- ``isolation``: concurrent sessions on one instance do not see each other ------


async def check_isolation(ctx: CheckContext) -> None:
    """Compare each episode played alone with the same episode played among the others."""
    distinct = {repr(sorted(e.kwargs.items(), key=repr)) for e in ctx.episodes}
    if len(ctx.episodes) < 2 or len(distinct) < 2:
        ctx.report.notes.append(
            "isolation not checked: give at least two episodes with different kwargs"
        )
        return
    obj = ctx.instance()
    alone = await _solo_traces(ctx, obj)
    together = await _interleaved(ctx, obj)
    for number, (solo, mixed) in enumerate(zip(alone, together, strict=True), 1):
        if solo is None or mixed is None or solo == mixed:
            continue
        step = next(
            (i for i, (a, b) in enumerate(zip(solo, mixed, strict=False), 1) if a != b),
            min(len(solo), len(mixed)) + 1,
        )
        ctx.add(
            "isolation",
            f"episode {number} behaved differently when run concurrently with the others "
            f"(first difference at step {step}: alone {short(_at(solo, step))}, "
            f"concurrently {short(_at(mixed, step))}): sessions share state; keep it per "
            "instance_id (SessionInteraction.new_session)",
        )


async def _solo_traces(ctx: CheckContext, obj: Any) -> list[Trace | None]:
    """Each episode's trace played alone; ``None`` (noted) when two solo runs disagree."""
    alone: list[Trace | None] = []
    for number, episode in enumerate(ctx.episodes, 1):
        first = (await play(ctx, obj, episode, number))[1]
        second = (await play(ctx, obj, episode, number))[1]
        alone.append(first if first == second else None)
    skipped = [str(n) for n, t in enumerate(alone, 1) if t is None]
    if skipped:
        ctx.report.notes.append(
            f"episode(s) {', '.join(skipped)} gave different results on two solo runs "
            "(non-deterministic); isolation was not compared for them"
        )
    return alone


def _at(trace: Trace, step: int) -> Any:
    return trace[step - 1] if 0 < step <= len(trace) else "(episode ended)"


class _Concurrent:
    """One episode of the interleaved run: its session, conversation and trace so far.

    ``trace`` is ``None`` when the episode cannot be compared (it did not start,
    or a call failed: the solo runs report that); ``done`` once it ended or ran
    out of replies.
    """

    def __init__(self, ctx: CheckContext, obj: Any, episode: Episode, number: int) -> None:
        self.episode = episode
        self.session, self.probe = open_session(ctx, obj, f"concurrent{number}")
        self.trace: Trace | None = None
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
        self.done = True

    async def start(self) -> None:
        try:
            await self.session.start(**self.episode.kwargs)
        except InteractionCallError:
            return
        self.trace, self.done = [], False

    async def turn(self, k: int) -> None:
        """Play the episode's ``k``-th reply."""
        trace = self.trace
        assert trace is not None
        self.messages.append({"role": "assistant", "content": self.episode.replies[k]})
        try:
            raw = await returned(self.probe, self.session.respond(list(self.messages)))
            result = InteractionResult.coerce(raw)
        except Exception:
            self.trace, self.done = None, True
            return
        trace.append((result.should_terminate, result.content, result.score))
        ended = conclude_turn(result, self.messages, k + 1, k) is not None
        self.done = ended or k + 1 >= len(self.episode.replies)

    async def score(self) -> None:
        """Add the final score to a comparable episode's trace."""
        if self.trace is None:
            return
        try:
            self.trace.append(("score", await returned(self.probe, self.session.score())))
        except InteractionCallError:
            self.trace = None


async def _interleaved(ctx: CheckContext, obj: Any) -> list[Trace | None]:
    """Start every episode, then play turn k of all of them together, for each k.

    The episodes are played through ``Session`` like the solo runs, so both
    sides get the same calls (the interaction kwargs reach every one).
    """
    runs = [_Concurrent(ctx, obj, episode, n) for n, episode in enumerate(ctx.episodes, 1)]
    try:
        for run in runs:
            await run.start()
        k = 0
        while not all(run.done for run in runs):
            await asyncio.gather(*(run.turn(k) for run in runs if not run.done))
            k += 1
        for run in runs:
            await run.score()
    finally:
        for run in runs:
            problem = await run.session.finalize()  # nothing for a session never started
            if problem is not None:
                where = "after the concurrent run"
                ctx.raised("results", "finalize_interaction", where, plugin_error(problem))
    return [run.trace for run in runs]


# -- ``state``: nothing of a session is left once it is finalized ------------------


async def check_state(ctx: CheckContext) -> None:
    """Play the episodes three times; report what grows, what is held, what stays open."""
    obj = ctx.instance()
    baseline = open_sessions(obj)
    finished: list[str] = []
    await _play_all(ctx, obj, finished)  # warm-up: caches may fill here
    seen = [sizes(obj)]
    for _ in range(2):
        await _play_all(ctx, obj, finished)
        seen.append(sizes(obj))
    for attr, first in seen[0].items():
        second, third = seen[1].get(attr, first), seen[2].get(attr, first)
        if first < second < third:
            ctx.add(
                "state",
                f"attribute {attr!r} of the instance grew from {first} to {third} items over "
                f"{2 * len(ctx.episodes)} finished sessions: per-session state is kept after "
                "finalize_interaction (delete it there, or use SessionInteraction)",
            )
    for attr, count in holding(obj, set(finished)).items():
        ctx.add(
            "state",
            f"attribute {attr!r} still holds {count} finalized instance_id(s) after "
            "finalize_interaction; drop a session's entry when it is finalized",
        )
    after = open_sessions(obj)
    if baseline is not None and after is not None and after != baseline:
        ctx.add(
            "state",
            f"open_sessions is {after} after every session was finalized (it was "
            f"{baseline} before): finalize_interaction does not release sessions",
        )


async def _play_all(ctx: CheckContext, obj: Any, finished: list[str]) -> None:
    """Play every episode once; add the ids of the sessions played to ``finished``."""
    for number, episode in enumerate(ctx.episodes, 1):
        iid = (await play(ctx, obj, episode, number))[0]
        if iid is not None:
            finished.append(iid)


def open_sessions(obj: Any) -> int | None:
    """The instance's ``open_sessions`` count, when it keeps one (``SessionInteraction``)."""
    try:
        value = getattr(obj, "open_sessions", None)
    except Exception:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_CONTAINERS = (dict, list, set, frozenset, tuple)


def _members(obj: Any) -> dict[str, Any]:
    out = {}
    try:
        out.update(vars(obj))
    except TypeError:
        pass
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if isinstance(slot, str) and slot not in out and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


def sizes(obj: Any) -> dict[str, int]:
    """Sizes of the containers held by the instance (and one level inside dicts)."""
    sizes: dict[str, int] = {}
    for name, value in _members(obj).items():
        if isinstance(value, (*_CONTAINERS, Mapping)):
            sizes[name] = len(value)
            if isinstance(value, Mapping) and len(value) <= 64:
                for key, inner in value.items():
                    if isinstance(inner, (*_CONTAINERS, Mapping)):
                        sizes[f"{name}[{key!r}]"] = len(inner)
    return sizes


def holding(obj: Any, ids: set[str]) -> dict[str, int]:
    """Containers on the instance that still mention finished instance ids."""
    found: dict[str, int] = {}
    if not ids:
        return found
    for name, value in _members(obj).items():
        if not isinstance(value, (Mapping, list, set, frozenset, tuple)):
            continue
        count = sum(1 for k in value if isinstance(k, str) and k in ids)
        if count:
            found[name] = count
    return found
