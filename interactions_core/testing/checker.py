"""The conformance checker: does an interaction keep the contract the runtime relies on?

:func:`check_interaction` takes a class, an instance or a registered name, plays
scripted episodes against it and collects *every* violation it finds before
reporting, the way Gymnasium's ``check_env`` and scikit-learn's
``check_estimator`` do. The checks, by name (pass names in ``skip`` to leave
some out):

``spec``
    The four lifecycle methods exist, are ``async def`` and have the spec's
    parameters (the same validation the registry runs when a class is loaded).
``config``
    The class can be built with the given config; a declared ``config_schema``
    is an attrs class and unknown options are refused with a ``ConfigError``.
``lifecycle``
    ``start_interaction`` returns the given ``instance_id``, or a fresh unique
    string id when given none.
``results``
    Every turn returns ``(should_terminate: bool, content: str, score: float,
    extra: Mapping)`` (:meth:`InteractionResult.coerce
    <interactions_core.result.InteractionResult.coerce>` semantics) and no
    exception escapes a normal turn.
``scores``
    Turn scores and ``calculate_score`` are finite ``float`` values (not ``int``,
    ``bool``, NaN or infinity).
``messages``
    Odd but legal conversations (no messages, ``None`` content, a list of content
    parts, no assistant turn yet) get a valid result or a clear
    ``InteractionsError``, never a crash.
``unknown_session``
    Using an id that was never started, or was finalized, raises a clear
    ``SessionError`` (not a bare ``KeyError``, and not silently); finalizing an
    unknown id or finalizing twice is harmless.
``reuse``
    Starting a session with the id of a live one is refused with a
    ``SessionError`` (verl silently overwrote it); the id is usable again once
    finalized.
``isolation``
    Sessions run concurrently and interleaved on one instance see exactly what
    they see when run alone: state is per session, not on the shared instance.
``state``
    Nothing is left behind after ``finalize_interaction``: ``open_sessions``
    returns to zero and no container on the instance keeps growing with the
    number of finished sessions or holds a finished ``instance_id``.
``blocking``
    No lifecycle call holds the event loop (runs without awaiting) for more
    than a quarter of a second: a synchronous HTTP client, ``time.sleep`` or a
    long computation inside ``async def`` stops every other episode of a run.

Episodes are scripted with :class:`Episode`: the sample's ``interaction_kwargs``
and the assistant replies to play. Give two or more with different kwargs so the
isolation check can tell sessions apart; without any, a generic set that passes
a ``ground_truth`` is used.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import InteractionsError
from ..result import InteractionResult
from ..runtime.errors import InteractionCallError
from ..runtime.session import Session
from ..validation import LIFECYCLE
from ._holdings import holding, open_sessions, sizes
from .driver import bounded, run_sync
from .report import CHECKS, ConformanceReport
from .target import Episode, Target, episodes_from, resolve_target

__all__ = ["acheck_interaction", "check_interaction"]

#: A lifecycle call that holds the event loop this long without awaiting is reported.
BLOCKING_LIMIT = 0.25

#: Option name no schema declares; a class with a schema must refuse it.
UNKNOWN_OPTION = "__conformance_unknown_option__"


def _describe_exc(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "did not return in time (timeout)"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"raised {exc.__class__.__name__}" + (f": {text}" if text else "")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_float(value: Any) -> bool:
    return isinstance(value, float) and not isinstance(value, bool)


class _Checker:
    """Runs the checks against one target and fills a report."""

    def __init__(
        self,
        target: Target,
        config: Mapping[str, Any] | None,
        episodes: list[Episode],
        report: ConformanceReport,
        timeout: float | None,
    ) -> None:
        self.target = target
        self.config = dict(config or {})
        self.episodes = episodes
        self.report = report
        self.timeout = timeout
        self.missing = [m for m in LIFECYCLE if not callable(getattr(target.cls, m, None))]

    def add(self, check: str, message: str, key: str | None = None) -> None:
        self.report.add(check, message, key)

    # -- helpers ---------------------------------------------------------------------

    def instance(self) -> Any:
        return self.target.make()

    async def _invoke(self, obj: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        # A ticker measures the longest stretch the loop could not run anything.
        loop = asyncio.get_running_loop()
        clock = time.perf_counter
        last = [clock()]
        longest = [0.0]
        handle: list[Any] = []

        def tick() -> None:
            now = clock()
            longest[0] = max(longest[0], now - last[0])
            last[0] = now
            handle[:] = [loop.call_later(0.01, tick)]

        handle.append(loop.call_soon(tick))
        try:
            return await bounded(getattr(obj, method)(*args, **kwargs), self.timeout)
        finally:
            handle[0].cancel()
            held = max(longest[0], clock() - last[0])
            if held > BLOCKING_LIMIT:
                from ..runtime.watchdog import BLOCKING_ADVICE

                cls = type(obj)
                self.add(
                    "blocking",
                    f"{cls.__module__}.{cls.__qualname__}.{method} held the event loop for "
                    f"{held:.2f} s without awaiting; {BLOCKING_ADVICE}",
                    key=f"blocking:{method}",
                )

    def _check_result(self, raw: Any, where: str) -> InteractionResult | None:
        """Check one turn's result; return it coerced, or ``None`` when unusable."""
        try:
            result = InteractionResult.coerce(raw)
        except TypeError as exc:
            self.add(
                "results",
                f"generate_response returned a wrong result (first seen {where}): {exc}",
                key=f"coerce:{exc}",
            )
            return None
        for field, wanted, described in _RESULT_FIELDS:
            value = getattr(result, field)
            if not isinstance(value, wanted):
                kind = type(value).__name__
                self.add(
                    "results",
                    f"generate_response's {field} must be {described}, got {kind} "
                    f"(first seen {where})",
                    key=f"{field}:{kind}",
                )
        score = raw[2] if isinstance(raw, (tuple, list)) and len(raw) == 4 else result.score
        self._check_score(score, "the turn score of generate_response", where)
        return result

    def _check_score(self, score: Any, what: str, where: str) -> None:
        kind = type(score).__name__
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            problem, fix = f"a {kind}", "return a float"
        elif not _is_float(score):
            problem, fix = f"an {kind}", f"return a float ({float(score)!r}, not {score!r})"
        elif not math.isfinite(score):
            problem, fix = "not finite", "scores must be finite floats"
            kind = repr(score)
        else:
            return
        self.add(
            "scores",
            f"{what} is {problem} (first seen {where}: {_short(score)}); {fix}",
            key=f"{what}:{kind}",
        )

    def _raised(self, check: str, method: str, where: str, exc: BaseException) -> None:
        text = _describe_exc(exc)
        self.add(check, f"{method} {text} (first seen {where})", key=f"{method}:{text}")

    async def play(
        self, obj: Any, episode: Episode, number: int
    ) -> tuple[str | None, list[tuple[Any, ...]]]:
        """Play one episode under a fresh explicit id (verl passes one); return id and trace.

        The episode is played through :class:`Session`, the lifecycle a run uses
        (the interaction kwargs reach every call, a failed start is not
        finalized); a :class:`_Probe` in front of the instance keeps each raw
        return value, so the checks see what the plugin returned before the
        session coerced it.
        """
        where = f"in episode {number}"
        probe = _Probe(self, obj)
        session = Session(probe, name=self.target.label, instance_id=_new_id(f"episode{number}"))
        try:
            await session.start(**episode.kwargs)
        except InteractionCallError as exc:
            self._raised("results", "start_interaction", where, _cause(exc))
            return None, []
        trace: list[tuple[Any, ...]] = []
        messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
        try:
            for turn, reply in enumerate(episode.replies, 1):
                messages.append({"role": "assistant", "content": reply})
                at = f"{where}, turn {turn}"
                result = await self._judged(session, probe, list(messages), at)
                if result is None:
                    return session.instance_id, trace
                trace.append((result.should_terminate, result.content, result.score))
                messages.append({"role": "user", "content": result.content})
                if result.should_terminate:
                    break
            probe.raw = _NOTHING
            try:
                await session.score()
            except InteractionCallError as exc:
                if probe.raw is _NOTHING:  # the plugin raised; else its score is checked below
                    self._raised("results", "calculate_score", where, _cause(exc))
                    return session.instance_id, trace
            self._check_score(probe.raw, "calculate_score's result", where)
            trace.append(("score", probe.raw))
            return session.instance_id, trace
        finally:
            problem = await session.finalize()
            if problem is not None:
                self._raised("results", "finalize_interaction", where, _cause(problem))

    async def _judged(
        self, session: Session, probe: _Probe, messages: list[dict[str, Any]], where: str
    ) -> InteractionResult | None:
        """One turn's checked result, or ``None`` (recorded) when the turn failed."""
        probe.raw = _NOTHING
        try:
            await session.respond(messages)
        except InteractionCallError as exc:
            if probe.raw is _NOTHING:  # the plugin raised; else its result is checked below
                self._raised("results", "generate_response", where, _cause(exc))
                return None
        return self._check_result(probe.raw, where)

    async def finalize(self, obj: Any, iid: str, where: str) -> None:
        try:
            await self._invoke(obj, "finalize_interaction", iid)
        except Exception as exc:
            self._raised("results", "finalize_interaction", where, exc)

    # -- the checks ----------------------------------------------------------------------

    async def check_config(self) -> bool:
        """Build the instance; check the schema. Returns False when nothing else can run."""
        cls = self.target.cls
        schema = getattr(cls, "config_schema", None)
        if schema is not None:
            import attrs

            if not (isinstance(schema, type) and attrs.has(schema)):
                self.add(
                    "config",
                    f"config_schema must be an attrs class (@attrs.define), got {_short(schema)}",
                )
                schema = None
        try:
            self.instance()
        except Exception as exc:
            options = {k: v for k, v in self.config.items() if k != "name"}
            self.add(
                "config",
                f"the class cannot be built with config {options!r}: {_describe_exc(exc)}",
            )
            return False
        if self.target.shared:
            return True
        if schema is None:
            self.report.notes.append(
                "no config_schema declared: config options are passed through unchecked"
            )
            return True
        bad = {**self.config, UNKNOWN_OPTION: 1}
        try:
            cls(bad)
        except InteractionsError:
            pass
        except Exception as exc:
            self.add(
                "config",
                f"an unknown config option made __init__ raise {exc.__class__.__name__} "
                "instead of ConfigError (call super().__init__(config) so the schema is applied)",
            )
        else:
            self.add(
                "config",
                f"config_schema is declared but the unknown option {UNKNOWN_OPTION!r} was "
                "accepted (call super().__init__(config) so the schema is applied)",
            )
        return True

    async def check_lifecycle(self) -> None:
        obj = self.instance()
        kwargs = self.episodes[0].kwargs
        ids: list[str] = []
        for attempt in (1, 2):
            try:
                iid = await self._invoke(obj, "start_interaction", None, **kwargs)
            except Exception as exc:
                self.add("lifecycle", f"start_interaction(None) {_describe_exc(exc)}")
                return
            if not isinstance(iid, str) or not iid:
                self.add(
                    "lifecycle",
                    f"start_interaction(None) returned {_short(iid)}; it must return a new, "
                    "non-empty str id",
                )
            ids.append(iid)
            if attempt == 2 and isinstance(iid, str) and iid and ids[0] == ids[1]:
                self.add(
                    "lifecycle",
                    f"start_interaction(None) returned the same id {ids[0]!r} twice; "
                    "generated ids must be unique",
                )
        for iid in ids:
            await self.finalize(obj, iid, "after start_interaction(None)")
        given = f"conformance-{uuid.uuid4().hex[:8]}"
        try:
            iid = await self._invoke(obj, "start_interaction", given, **kwargs)
        except Exception as exc:
            self.add("lifecycle", f"start_interaction({given!r}) {_describe_exc(exc)}")
            return
        if iid != given:
            self.add(
                "lifecycle",
                f"start_interaction({given!r}) returned {_short(iid)}; it must return the "
                "instance_id it was given",
            )
        await self.finalize(obj, iid if isinstance(iid, str) else given, "after a given id")

    async def check_episodes(self) -> None:
        """``results`` and ``scores``: play every episode on a fresh instance."""
        obj = self.instance()
        for number, episode in enumerate(self.episodes, 1):
            await self.play(obj, episode, number)

    async def check_messages(self) -> None:
        odd: list[tuple[str, list[dict[str, Any]]]] = [
            ("an empty conversation", []),
            ("no assistant turn yet", [{"role": "user", "content": "hello"}]),
            ("assistant content None", [{"role": "assistant", "content": None}]),
            (
                "assistant content as a list of parts",
                [{"role": "assistant", "content": [{"type": "text", "text": "#### 1"}]}],
            ),
        ]
        obj = self.instance()
        kwargs = self.episodes[0].kwargs
        for label, messages in odd:
            try:
                iid = await self._invoke(obj, "start_interaction", None, **kwargs)
            except Exception as exc:
                self.add("messages", f"start_interaction {_describe_exc(exc)}")
                return
            try:
                raw = await self._invoke(obj, "generate_response", iid, messages)
            except InteractionsError:
                pass  # a clear, documented refusal is fine
            except Exception as exc:
                self.add(
                    "messages",
                    f"generate_response crashed on {label} ({_short(messages)}): "
                    f"{_describe_exc(exc)}; return a result or raise an InteractionsError",
                )
            else:
                self._check_result(raw, f"on {label}")
            await self.finalize(obj, iid, f"on {label}")

    async def _expect_session_error(self, what: str, call: Any) -> None:
        try:
            await call
        except InteractionsError:  # SessionError, or another clear framework error
            return
        except Exception as exc:
            self.add(
                "unknown_session",
                f"{what} {_describe_exc(exc)}; raise interactions_core.SessionError "
                "(SessionInteraction does this for you)",
            )
        else:
            self.add(
                "unknown_session",
                f"{what} returned normally; it must raise SessionError so a misrouted turn is "
                "not scored silently",
            )

    async def check_unknown_session(self) -> None:
        obj = self.instance()
        never = f"never-started-{uuid.uuid4().hex[:8]}"
        messages = [{"role": "assistant", "content": "hello"}]
        await self._expect_session_error(
            "generate_response on an instance_id that was never started",
            self._invoke(obj, "generate_response", never, messages),
        )
        await self._expect_session_error(
            "calculate_score on an instance_id that was never started",
            self._invoke(obj, "calculate_score", never),
        )
        try:
            await self._invoke(obj, "finalize_interaction", never)
        except Exception as exc:
            self.add(
                "unknown_session",
                f"finalize_interaction on an unknown instance_id {_describe_exc(exc)}; "
                "finalizing must be harmless (the runtime finalizes on every error path)",
            )
        try:
            iid = await self._invoke(obj, "start_interaction", None, **self.episodes[0].kwargs)
        except Exception:
            return  # reported by other checks
        await self.finalize(obj, iid, "once")
        try:
            await self._invoke(obj, "finalize_interaction", iid)
        except Exception as exc:
            self.add(
                "unknown_session",
                f"finalize_interaction called twice for one session {_describe_exc(exc)}; "
                "the second call must be a no-op",
            )
        await self._expect_session_error(
            "generate_response after finalize_interaction",
            self._invoke(obj, "generate_response", iid, messages),
        )

    async def check_reuse(self) -> None:
        obj = self.instance()
        live = f"live-{uuid.uuid4().hex[:8]}"
        kwargs = self.episodes[0].kwargs
        try:
            await self._invoke(obj, "start_interaction", live, **kwargs)
        except Exception:
            return  # reported by other checks
        try:
            await self._invoke(obj, "start_interaction", live, **kwargs)
        except InteractionsError:
            pass
        except Exception as exc:
            self.add(
                "reuse",
                f"starting a second session with the live instance_id {live!r} "
                f"{_describe_exc(exc)}; raise SessionError instead",
            )
        else:
            self.add(
                "reuse",
                f"starting a second session with the live instance_id {live!r} was accepted "
                "silently (the first session's state is lost); raise SessionError",
            )
        await self.finalize(obj, live, "of the reused id")
        try:
            await self._invoke(obj, "start_interaction", live, **kwargs)
        except Exception as exc:
            self.add(
                "reuse",
                f"an instance_id could not be started again after it was finalized: "
                f"{_describe_exc(exc)}",
            )
            return
        await self.finalize(obj, live, "of the restarted id")

    async def check_isolation(self) -> None:
        distinct = {repr(sorted(e.kwargs.items(), key=repr)) for e in self.episodes}
        if len(self.episodes) < 2 or len(distinct) < 2:
            self.report.notes.append(
                "isolation not checked: give at least two episodes with different kwargs"
            )
            return
        obj = self.instance()
        alone = []
        for number, episode in enumerate(self.episodes, 1):
            first = (await self.play(obj, episode, number))[1]
            second = (await self.play(obj, episode, number))[1]
            alone.append(first if first == second else None)
        skipped = [str(n) for n, t in enumerate(alone, 1) if t is None]
        if skipped:
            self.report.notes.append(
                f"episode(s) {', '.join(skipped)} gave different results on two solo runs "
                "(non-deterministic); isolation was not compared for them"
            )
        together = await self._interleaved(obj)
        for number, (solo, mixed) in enumerate(zip(alone, together, strict=True), 1):
            if solo is None or mixed is None or solo == mixed:
                continue
            turn = next(
                (i for i, (a, b) in enumerate(zip(solo, mixed, strict=False), 1) if a != b),
                min(len(solo), len(mixed)) + 1,
            )
            self.add(
                "isolation",
                f"episode {number} behaved differently when run concurrently with the others "
                f"(first difference at step {turn}: alone {_short(_at(solo, turn))}, "
                f"concurrently {_short(_at(mixed, turn))}): sessions share state; keep it per "
                "instance_id (SessionInteraction.new_session)",
            )

    async def _interleaved(self, obj: Any) -> list[list[tuple[Any, ...]] | None]:
        """Start every episode, then play turn k of all of them together, for each k."""
        ids: list[str | None] = []
        for number, episode in enumerate(self.episodes, 1):
            iid = _new_id(f"concurrent{number}")
            try:
                await self._invoke(obj, "start_interaction", iid, **episode.kwargs)
                ids.append(iid)
            except Exception:
                ids.append(None)
        traces: list[list[tuple[Any, ...]] | None] = [[] if i else None for i in ids]
        convs = [[{"role": "user", "content": e.prompt}] for e in self.episodes]
        done = [iid is None for iid in ids]

        async def turn(n: int, k: int) -> None:
            trace = traces[n]
            assert trace is not None
            convs[n].append({"role": "assistant", "content": self.episodes[n].replies[k]})
            try:
                raw = await self._invoke(obj, "generate_response", ids[n], list(convs[n]))
                result = InteractionResult.coerce(raw)
            except Exception:
                traces[n], done[n] = None, True  # reported by the solo runs
                return
            trace.append((result.should_terminate, result.content, result.score))
            convs[n].append({"role": "user", "content": result.content})
            if result.should_terminate or k + 1 >= len(self.episodes[n].replies):
                done[n] = True

        try:
            k = 0
            while not all(done):
                await asyncio.gather(*(turn(n, k) for n in range(len(ids)) if not done[n]))
                k += 1
            for n, sid in enumerate(ids):
                trace = traces[n]
                if sid is None or trace is None:
                    continue
                try:
                    trace.append(("score", await self._invoke(obj, "calculate_score", sid)))
                except Exception:
                    traces[n] = None
        finally:
            for sid in ids:
                if sid is not None:
                    await self.finalize(obj, sid, "after the concurrent run")
        return traces

    async def check_state(self) -> None:
        obj = self.instance()
        baseline = open_sessions(obj)
        finished: list[str] = []

        async def batch() -> None:
            for number, episode in enumerate(self.episodes, 1):
                iid = (await self.play(obj, episode, number))[0]
                if iid is not None:
                    finished.append(iid)

        await batch()  # warm-up: caches may fill here
        seen = [sizes(obj)]
        for _ in range(2):
            await batch()
            seen.append(sizes(obj))
        for attr, first in seen[0].items():
            second, third = seen[1].get(attr, first), seen[2].get(attr, first)
            if first < second < third:
                self.add(
                    "state",
                    f"attribute {attr!r} of the instance grew from {first} to {third} items over "
                    f"{2 * len(self.episodes)} finished sessions: per-session state is kept after "
                    "finalize_interaction (delete it there, or use SessionInteraction)",
                )
        held = holding(obj, set(finished))
        for attr, count in held.items():
            self.add(
                "state",
                f"attribute {attr!r} still holds {count} finalized instance_id(s) after "
                "finalize_interaction; drop a session's entry when it is finalized",
            )
        after = open_sessions(obj)
        if baseline is not None and after is not None and after != baseline:
            self.add(
                "state",
                f"open_sessions is {after} after every session was finalized (it was "
                f"{baseline} before): finalize_interaction does not release sessions",
            )

    # -- driver ------------------------------------------------------------------------

    async def run(self, skip: set[str]) -> None:
        wanted = [c for c in CHECKS if c not in skip]
        self.report.checks_run = wanted
        if self.missing:
            self.report.notes.append(
                f"missing lifecycle method(s) {', '.join(self.missing)}: no episode was played"
            )
            return
        if "config" in wanted:
            if not await self.check_config():
                self.report.notes.append("the class could not be built: no episode was played")
                return
        else:
            try:
                self.instance()
            except Exception as exc:
                self.add("config", f"the class cannot be built: {_describe_exc(exc)}")
                return
        steps: list[tuple[tuple[str, ...], Callable[[], Any]]] = [
            (("lifecycle",), self.check_lifecycle),
            (("results", "scores"), self.check_episodes),
            (("messages",), self.check_messages),
            (("unknown_session",), self.check_unknown_session),
            (("reuse",), self.check_reuse),
            (("isolation",), self.check_isolation),
            (("state",), self.check_state),
        ]
        for names, step in steps:
            if not any(n in wanted for n in names):
                continue
            try:
                await step()
            except Exception as exc:  # a bug in the interaction the check did not expect
                self.add(names[0], f"the check could not finish: {_describe_exc(exc)}")
        if skip:  # steps share helpers: drop what they found for checks that were skipped
            self.report.violations = [v for v in self.report.violations if v.check not in skip]


#: The fields of a turn's result the ``results`` check types: (field, type, as said).
_RESULT_FIELDS = (
    ("should_terminate", bool, "a bool"),
    ("content", str, "a str"),
    ("extra", Mapping, "a mapping"),
)

#: No return value seen yet (``None`` is a return value).
_NOTHING: Any = object()


class _Probe:
    """Stands in front of an instance: each call goes through the checker's ``_invoke``
    (time limit, blocking detection) and its raw return value is kept in ``raw``."""

    def __init__(self, checker: _Checker, obj: Any) -> None:
        self._checker = checker
        self._obj = obj
        self.raw: Any = _NOTHING
        self.name = getattr(obj, "name", "?")

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> Any:
        return await self._checker._invoke(self._obj, "start_interaction", instance_id, **kwargs)

    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        self.raw = await self._checker._invoke(
            self._obj, "generate_response", instance_id, messages, **kwargs
        )
        return self.raw

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> Any:
        self.raw = await self._checker._invoke(self._obj, "calculate_score", instance_id, **kwargs)
        return self.raw

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> Any:
        return await self._checker._invoke(self._obj, "finalize_interaction", instance_id)


def _cause(error: BaseException) -> BaseException:
    """The plugin's own exception behind a session's ``InteractionCallError``."""
    return error.__cause__ if error.__cause__ is not None else error


def _new_id(tag: str) -> str:
    return f"conformance-{tag}-{uuid.uuid4().hex[:12]}"


def _at(trace: list[tuple[Any, ...]], step: int) -> Any:
    return trace[step - 1] if 0 < step <= len(trace) else "(episode ended)"


async def acheck_interaction(
    target: Any,
    config: Mapping[str, Any] | None = None,
    *,
    episodes: Iterable[Episode | Mapping[str, Any] | tuple[Any, ...]] | None = None,
    registry: Any = None,
    skip: Iterable[str] = (),
    timeout: float | None = 10.0,
    raise_on_error: bool = True,
) -> ConformanceReport:
    """The ``async`` form of :func:`check_interaction` (for use inside a running event loop)."""
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping of the interaction's options, not "
            f"{type(config).__name__}; pass scripted episodes by keyword: "
            "check_interaction(target, episodes=[Episode(replies, kwargs), ...])"
        )
    skip_set = set(skip)
    unknown = skip_set - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check(s) in skip: {sorted(unknown)}; known: {', '.join(CHECKS)}")
    played = episodes_from(episodes)
    report = ConformanceReport(repr(target))
    resolved = resolve_target(target, config, registry, report)
    if "spec" in skip_set:
        report.violations = [v for v in report.violations if v.check != "spec"]
    if resolved is not None:
        await _Checker(resolved, config, played, report, timeout).run(skip_set)
    else:
        report.checks_run = [c for c in CHECKS if c not in skip_set]
    if raise_on_error:
        report.raise_for_violations()
    return report


def check_interaction(
    target: Any,
    config: Mapping[str, Any] | None = None,
    *,
    episodes: Iterable[Episode | Mapping[str, Any] | tuple[Any, ...]] | None = None,
    registry: Any = None,
    skip: Iterable[str] = (),
    timeout: float | None = 10.0,
    raise_on_error: bool = True,
) -> ConformanceReport:
    """Check an interaction against the runtime's contract; report every violation.

    ``target`` is an interaction class (built with ``config``), an instance (used
    as is), or a registered name (resolved with ``registry``, by default the
    installed plugins; the registration's defaults are applied under
    ``config``). ``episodes`` scripts the conversations to play (see
    :class:`Episode`); ``skip`` names checks to leave out (see :data:`CHECKS`);
    ``timeout`` bounds every lifecycle call in seconds.

    Raises :class:`~interactions_core.errors.ConformanceError` whose message lists
    every violation, unless ``raise_on_error`` is false; returns the
    :class:`ConformanceReport` otherwise. Callable from synchronous code and from
    inside a running event loop (use :func:`acheck_interaction` there to stay on
    the test's loop).
    """
    return run_sync(
        acheck_interaction(
            target,
            config,
            episodes=episodes,
            registry=registry,
            skip=skip,
            timeout=timeout,
            raise_on_error=raise_on_error,
        )
    )
