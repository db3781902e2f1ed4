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
    <interactions_core.InteractionResult.coerce>` semantics) and no
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

This module is the entry point, what is checked (the target resolved, the
episodes scripted) and the order the checks run in. The rules live in two
modules: ``_rules`` (the context every rule calls through, ``config``,
``lifecycle``, ``unknown_session``, ``reuse``, and the ``blocking`` watch) and
``_rules_play`` (``results``, ``scores``, ``messages``, ``isolation``,
``state``: the rules judged by playing conversations); ``spec`` is the
registry's own validation (``validate_interaction_class`` in ``interactions_core._spec``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from .._spec import LIFECYCLE, validate_interaction_class
from ..errors import InteractionValidationError
from ..runtime.watchdog import LoopBlocked, LoopWatchdog
from ._rules import (
    CheckContext,
    Target,
    check_buildable,
    check_config,
    check_lifecycle,
    check_reuse,
    check_unknown_session,
    describe_exc,
)
from ._rules_play import check_episodes, check_isolation, check_messages, check_state
from .driver import CHECKS, ConformanceReport, Episode, record_spec, run_sync

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFAULT_EPISODES",
    "CheckOptions",
    "acheck_interaction",
    "check_interaction",
    "episodes_from",
    "resolve_target",
]


class CheckOptions(TypedDict, total=False):
    """The keyword options of :func:`check_interaction` and :func:`acheck_interaction`.

    Both forms take the same options, declared once here; each may be left out,
    and its default is given with it.
    """

    episodes: Iterable[Episode | Mapping[str, Any] | tuple[Any, ...]] | None
    """The conversations to play (see :class:`Episode`); default ``None``: a generic set
    that passes a ``ground_truth``."""
    registry: Any
    """Where a registered name is resolved; default ``None``: the installed plugins."""
    skip: Iterable[str]
    """Names of checks to leave out (see :data:`CHECKS`); default ``()``."""
    timeout: float | None
    """The bound on every lifecycle call, in seconds (``None``: no bound); default ``10.0``."""
    raise_on_error: bool
    """Raise :class:`~interactions_core.errors.ConformanceError` when a rule is broken
    (default ``True``), or return the report either way."""


#: The value of each option left out (the defaults :class:`CheckOptions` states).
_DEFAULTS: dict[str, Any] = {
    "episodes": None,
    "registry": None,
    "skip": (),
    "timeout": 10.0,
    "raise_on_error": True,
}


async def acheck_interaction(
    target: Any, config: Mapping[str, Any] | None = None, **options: Unpack[CheckOptions]
) -> ConformanceReport:
    """The ``async`` form of :func:`check_interaction` (for use inside a running event loop)."""
    return await _check(target, config, _with_defaults(options, "acheck_interaction"))


def check_interaction(
    target: Any, config: Mapping[str, Any] | None = None, **options: Unpack[CheckOptions]
) -> ConformanceReport:
    """Check an interaction against the runtime's contract; report every violation.

    ``target`` is an interaction class (built with ``config``), an instance (used
    as is), or a registered name (resolved with ``registry``, by default the
    installed plugins; the registration's defaults are applied under
    ``config``). ``episodes`` scripts the conversations to play (see
    :class:`Episode`); ``skip`` names checks to leave out (see :data:`CHECKS`);
    ``timeout`` bounds every lifecycle call in seconds (see :class:`CheckOptions`
    for every option and its default).

    Raises :class:`~interactions_core.errors.ConformanceError` whose message lists
    every violation, unless ``raise_on_error`` is false; returns the
    :class:`ConformanceReport` otherwise. Callable from synchronous code and from
    inside a running event loop (use :func:`acheck_interaction` there to stay on
    the test's loop).
    """
    return run_sync(_check(target, config, _with_defaults(options, "check_interaction")))


def _with_defaults(options: Mapping[str, Any], function: str) -> dict[str, Any]:
    """``options`` over :data:`_DEFAULTS`; an unknown keyword is refused as Python would."""
    for key in options:
        if key not in _DEFAULTS:
            raise TypeError(f"{function}() got an unexpected keyword argument {key!r}")
    return {**_DEFAULTS, **options}


async def _check(
    target: Any, config: Mapping[str, Any] | None, options: dict[str, Any]
) -> ConformanceReport:
    """Both forms' one implementation: check the arguments, resolve the target, run."""
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping of the interaction's options, not "
            f"{type(config).__name__}; pass scripted episodes by keyword: "
            "check_interaction(target, episodes=[Episode(replies, kwargs), ...])"
        )
    skip = set(options["skip"])
    unknown = skip - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check(s) in skip: {sorted(unknown)}; known: {', '.join(CHECKS)}")
    played = episodes_from(options["episodes"])
    report = ConformanceReport(repr(target))
    resolved = resolve_target(target, config, options["registry"], report)
    if "spec" in skip:
        report.violations = [v for v in report.violations if v.check != "spec"]
    if resolved is not None:
        ctx = CheckContext(resolved, config, played, report, options["timeout"])
        await _watched(_run(ctx, skip), options["timeout"])
    else:
        report.checks_run = [c for c in CHECKS if c not in skip]
    if options["raise_on_error"]:
        report.raise_for_violations()
    return report


#: The checks that play episodes, in the order they run: the check names each one
#: reports under (it runs unless all are skipped), and the function. ``spec`` runs
#: while the target is resolved, ``config`` first of all (nothing runs without an
#: instance), and ``blocking`` during every call.
_STEPS: tuple[tuple[tuple[str, ...], Callable[[CheckContext], Awaitable[None]]], ...] = (
    (("lifecycle",), check_lifecycle),
    (("results", "scores"), check_episodes),
    (("messages",), check_messages),
    (("unknown_session",), check_unknown_session),
    (("reuse",), check_reuse),
    (("isolation",), check_isolation),
    (("state",), check_state),
)


async def _watched(run: Awaitable[None], timeout: float | None) -> None:
    """``run`` under a :class:`LoopWatchdog`: ``timeout`` bounds a call that blocks the event
    loop too (``time.sleep``, a synchronous client), which ``asyncio.wait_for`` cannot."""
    import asyncio

    watchdog = LoopWatchdog(asyncio.get_running_loop(), limit=timeout).start()
    try:
        await run
    finally:
        watchdog.stop()


async def _run(ctx: CheckContext, skip: set[str]) -> None:
    """Run every check not skipped against the resolved target, filling ``ctx.report``."""
    wanted = [c for c in CHECKS if c not in skip]
    ctx.report.checks_run = wanted
    missing = [m for m in LIFECYCLE if not callable(getattr(ctx.target.cls, m, None))]
    if missing:
        ctx.report.notes.append(
            f"missing lifecycle method(s) {', '.join(missing)}: no episode was played"
        )
        return
    if "config" in wanted:
        if not check_config(ctx):
            ctx.report.notes.append("the class could not be built: no episode was played")
            return
    elif not check_buildable(ctx):
        return
    for names, step in _STEPS:
        if not any(n in wanted for n in names):
            continue
        try:
            await step(ctx)
        except (Exception, SystemExit, LoopBlocked) as exc:  # a bug the check did not expect
            ctx.add(names[0], f"the check could not finish: {describe_exc(exc)}")
    if skip:  # steps share helpers: drop what they found for checks that were skipped
        ctx.report.violations = [v for v in ctx.report.violations if v.check not in skip]


# -- what is checked ------------------------------------------------------------------

DEFAULT_EPISODES = (
    Episode(
        ["I think the answer is 3.\n#### 3", "The answer is 7.\n#### 7"], {"ground_truth": "7"}
    ),
    Episode(["#### 12", "#### 13"], {"ground_truth": "12"}),
    Episode(["no idea", "#### 0", "#### 5"], {"ground_truth": "5"}),
)


def episodes_from(episodes: Iterable[Any] | None) -> list[Episode]:
    if episodes is None:
        return list(DEFAULT_EPISODES)
    out = []
    for item in episodes:
        if isinstance(item, Episode):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(Episode(**item))
        elif isinstance(item, tuple):
            out.append(Episode(*item))
        else:
            raise TypeError(
                "episodes must be Episode(replies, kwargs) objects, mappings or tuples; "
                f"got {type(item).__name__}"
            )
    if not out:
        raise ValueError("episodes is empty: give at least one Episode(replies, kwargs)")
    return out


def resolve_target(
    target: Any, config: Mapping[str, Any] | None, registry: Any, report: ConformanceReport
) -> Target | None:
    """Turn the target into a :class:`Target`; record spec/config problems on the way."""
    options = dict(config or {})
    if isinstance(target, str):
        if registry is None:
            from ..registry import get_registry

            registry = get_registry()
        entry = registry.resolve(target)  # unknown/conflicting names raise: not a conformance issue
        report.label = f"interaction {entry.describe()}"
        try:
            cls = registry.load(entry)
        except InteractionValidationError as exc:
            record_spec(report, exc)
            report.notes.append("the class failed validation; no episode could be played")
            return None
        _validate(cls, report)  # in-memory registrations are not validated by the registry
        options = {**entry.defaults, **options}
        options.setdefault("name", entry.name)
        return Target(report.label, cls, _factory(cls, options), shared=False)
    if isinstance(target, type):
        report.label = f"interaction class {target.__module__}:{target.__qualname__}"
        _validate(target, report)
        return Target(report.label, target, _factory(target, options), shared=False)
    cls = type(target)
    report.label = f"interaction instance of {cls.__module__}:{cls.__qualname__}"
    if config:
        report.notes.append("config is ignored when an instance is given")
    _validate(cls, report)
    return Target(report.label, cls, lambda: target, shared=True)


def _factory(cls: type, options: dict[str, Any]) -> Callable[[], Any]:
    return lambda: cls(dict(options))


def _validate(cls: type, report: ConformanceReport) -> None:
    try:
        validate_interaction_class(cls, report.label)
    except InteractionValidationError as exc:
        record_spec(report, exc)
