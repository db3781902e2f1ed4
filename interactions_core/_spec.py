"""The contract between the core and its plugins, written once.

Two kinds of contract live here:

* :class:`InteractionSpec` (and :class:`SessionSpec` for what a
  :class:`~interactions_core.SessionInteraction` subclass writes) is the
  interaction lifecycle. An interaction is a plain object that the trainer or the
  runtime calls directly, so this is not a pluggy hook: pluggy stays off the
  per-turn path. It is the contract the validator reads when a class is loaded:
  the method names, their leading parameters and which of them have defaults all
  come from the signatures below, and the error messages quote them. Changing a
  signature here changes what the validator accepts. A method written
  ``async def`` here must be a coroutine function; one written plain ``def`` may
  be either (the base class awaits it only when it is one).
* :class:`PluginSpec` holds the pluggy hooks that distributions registered under
  the ``interactions_core.plugins`` entry-point group may implement: registering
  many interactions (or policies, or dataset builders) at run time, and observing
  sessions. Observer hooks are looked up once per run; when no plugin implements
  them the runtime does not call them at all. :data:`hookimpl` marks a plugin's
  implementations.

:func:`validate_interaction_class` checks a class against the lifecycle when it is
loaded, with the rules written beside it below.
"""

from __future__ import annotations

import inspect
from typing import Any

import pluggy

from ._interaction import BaseInteraction, SessionInteraction
from ._names import close_matches
from .errors import InteractionValidationError

__all__ = [
    "LIFECYCLE",
    "PROJECT_NAME",
    "InteractionSpec",
    "PluginSpec",
    "SessionSpec",
    "expected_signature",
    "hookimpl",
    "hookspec",
    "validate_interaction_class",
]


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


# -- the pluggy hooks (see the module docstring) ---------------------------------------

PROJECT_NAME = "interactions_core"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a hook plugin's functions (``@hookimpl def register_interactions(register)``)."""


class PluginSpec:
    """Hooks a distribution in the ``interactions_core.plugins`` group may implement."""

    @hookspec
    def register_interactions(self, register: Any) -> None:
        """Contribute interactions at run time, e.g. a whole suite of tasks.

        Call ``register(name, cls, *, defaults=None, description=None)`` once per
        interaction. ``cls`` is validated against
        :class:`~interactions_core.InteractionSpec` like an
        entry-point class; ``defaults`` are config values applied before the
        user's ``config:``. Names registered here are cached in the index, so a
        warm ``interactions list`` does not run this hook again.
        """

    @hookspec
    def register_policies(self, register: Any) -> None:
        """Contribute policies (the model side) by name: ``register(name, cls)``."""

    @hookspec
    def register_dataset_builders(self, register: Any) -> None:
        """Contribute dataset builders by name: ``register(name, builder)``."""

    @hookspec
    def on_session_start(
        self, interaction_name: str, instance_id: str, kwargs: dict[str, Any]
    ) -> None:
        """Observe a session that has just started."""

    @hookspec
    def on_turn(
        self,
        interaction_name: str,
        instance_id: str,
        turn: int,
        messages: list[dict[str, Any]],
        result: Any,
    ) -> None:
        """Observe a finished turn: ``result`` is the interaction's answer to turn ``turn``."""

    @hookspec
    def on_session_end(
        self, interaction_name: str, instance_id: str, record: Any, error: BaseException | None
    ) -> None:
        """Observe a finalized session, with its episode record and error if any."""


# -- checking a class against the spec ---------------------------------------------------
#
# Run once when a class is loaded, so a plugin with a misspelled, missing, non-async
# or wrongly parameterised lifecycle method fails at start-up with a message that
# names the plugin, the method and the signature it must have, instead of an
# ``AttributeError`` an hour into a training run. Every problem is reported, not
# only the first.
#
# Rules, per method of :class:`~interactions_core.InteractionSpec` (and of
# :class:`SessionSpec` for ``respond`` and ``score``), read
# from the spec's signatures:
#
# * it exists, and is an ``async def`` (a coroutine function) where the spec's
#   method is one (``respond`` and ``score``, plain ``def`` in the spec, may be
#   either);
# * its leading positional parameters are the spec's, in order and by name (verl
#   passes them positionally, the runtime may pass them by keyword);
# * it accepts ``**kwargs`` (samples pass arbitrary ``interaction_kwargs``);
# * any extra parameter has a default;
# * a parameter with a default in the spec has one (``start_interaction``'s
#   ``instance_id``: ``None`` means "make one").
#
# A subclass of :class:`~interactions_core.BaseInteraction` must override
# ``generate_response`` (or, for a :class:`~interactions_core.SessionInteraction`,
# ``respond``); public methods whose names are close to a lifecycle method but not
# equal to one are reported as likely misspellings.


_SESSION_HOOKS = ("new_session", "respond", "score", "end_session")


def _spec_functions(*specs: type) -> dict[str, Any]:
    """The methods the specs declare, in definition order."""
    return {
        name: func
        for spec in specs
        for name, func in vars(spec).items()
        if inspect.isfunction(func) and not name.startswith("_")
    }


def _spec_methods(*specs: type) -> dict[str, list[inspect.Parameter]]:
    """Each spec method's positional parameters after ``self``, in definition order."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {
        name: [p for p in list(inspect.signature(func).parameters.values())[1:] if p.kind in kinds]
        for name, func in _spec_functions(*specs).items()
    }


#: The spec's methods -> their positional parameters (names and defaults matter).
_SPEC = _spec_methods(InteractionSpec, SessionSpec)
LIFECYCLE = tuple(_spec_methods(InteractionSpec))
_SPEC_PARAMS: dict[str, tuple[str, ...]] = {m: tuple(p.name for p in ps) for m, ps in _SPEC.items()}
#: The methods the spec writes ``async def``: these must be coroutine functions.
_MUST_AWAIT = frozenset(
    name
    for name, func in _spec_functions(InteractionSpec, SessionSpec).items()
    if inspect.iscoroutinefunction(func)
)


def expected_signature(method: str) -> str:
    """The signature ``method`` must have, as users should write it (from the spec)."""
    params = [p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in _SPEC[method]]
    written = f"def {method}(self, {', '.join([*params, '**kwargs'])})"
    return f"async {written}" if method in _MUST_AWAIT else f"{written} (plain or async)"


def source_location(func: Any) -> str | None:
    """``file:line`` where a function (or method) is defined, or ``None`` when unknown.

    A spec violation names it, so the author is sent to the line to fix.
    """
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    return None if code is None else f"{code.co_filename}:{code.co_firstlineno}"


def _signature_problems(method: str, func: Any) -> list[str]:
    problems = []
    if method in _MUST_AWAIT and not inspect.iscoroutinefunction(func):
        problems.append("is not async (write 'async def')")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return [*problems, "has no inspectable signature"]
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls") and not inspect.ismethod(func):
        params = params[1:]
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    wanted = _SPEC_PARAMS[method]
    names = tuple(p.name for p in positional[: len(wanted)])
    if names != wanted:
        problems.append(
            f"takes positional parameters ({', '.join(p.name for p in positional)}); "
            f"the first must be ({', '.join(wanted)})"
        )
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        problems.append("does not accept **kwargs")
    for p in positional[len(wanted) :]:
        if p.default is inspect.Parameter.empty:
            problems.append(f"has extra parameter {p.name!r} without a default")
    for p in params:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty:
            problems.append(f"has required keyword-only parameter {p.name!r}")
    for spec_param, param in zip(_SPEC[method], positional, strict=False):
        if spec_param.default is not spec_param.empty and param.default is param.empty:
            problems.append(
                f"must give {param.name} a default, as the spec does "
                f"({spec_param.name}={spec_param.default!r})"
            )
    return problems


def _misspellings(cls: type) -> list[str]:
    known = set(LIFECYCLE) | set(_SESSION_HOOKS)
    found = []
    for klass in cls.__mro__:
        if klass in (BaseInteraction, SessionInteraction, object):
            continue
        for attr, value in vars(klass).items():
            if attr.startswith("_") or attr in known or not callable(value):
                continue
            close = close_matches(attr, known, n=1, cutoff=0.8)
            if close:
                found.append(f"method {attr!r} looks like a misspelling of {close[0]!r}")
    return found


def _overrides(cls: type, base: type, method: str) -> bool:
    return getattr(cls, method, None) is not getattr(base, method)


def _is_attrs(schema: type) -> bool:
    import attrs

    return bool(attrs.has(schema))


def validate_interaction_class(cls: Any, label: str) -> None:
    """Raise :class:`InteractionValidationError` listing every way ``cls`` breaks the spec.

    ``label`` says where the class came from (name, distribution, target), so the
    message points at the plugin to fix.
    """
    if not isinstance(cls, type):
        raise InteractionValidationError(
            f"{label}: expected an interaction class, got {type(cls).__name__} {cls!r}"
        )
    problems: list[str] = []
    methods: list[str] = list(LIFECYCLE)
    if issubclass(cls, SessionInteraction):
        if _overrides(cls, SessionInteraction, "respond"):
            methods += ["respond", "score"]
        elif not _overrides(cls, SessionInteraction, "generate_response"):
            problems.append(f"respond is not implemented; expected {expected_signature('respond')}")
    elif issubclass(cls, BaseInteraction) and not _overrides(
        cls, BaseInteraction, "generate_response"
    ):
        problems.append(
            "generate_response is not implemented; "
            f"expected {expected_signature('generate_response')}"
        )
    for method in methods:
        func = getattr(cls, method, None)
        if func is None:
            problems.append(f"{method} is missing; expected {expected_signature(method)}")
            continue
        found = _signature_problems(method, func)
        where = source_location(func) if found else None
        for problem in found:
            problems.append(
                f"{method} {problem}; expected {expected_signature(method)}"
                + (f" (at {where})" if where else "")
            )
    problems.extend(_misspellings(cls))
    schema = inspect.getattr_static(cls, "config_schema", None)
    if schema is not None and not (isinstance(schema, type) and _is_attrs(schema)):
        # every config naming it is refused (`check`); `show` failed on it as a core bug
        problems.append(
            f"config_schema {schema!r:.100} is not an attrs class (@attrs.define); "
            "declare the options with attrs, or leave config_schema out"
        )
    init = getattr(cls, "__init__", None)
    if init is not None and init is not object.__init__:
        try:
            inspect.signature(cls).bind({})
        except TypeError:
            problems.append("__init__ must accept the config mapping: __init__(self, config)")
        except ValueError:
            pass
    if problems:
        body = "\n".join(f"  - {p}" for p in problems)
        raise InteractionValidationError(
            f"{label} does not implement the interaction spec:\n{body}"
        )
