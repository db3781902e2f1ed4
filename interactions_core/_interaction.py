"""What a plugin author subclasses and returns: the base classes and the turn's result.

Two ways to write an interaction:

* :class:`BaseInteraction` is verl's base class with consistent signatures. A
  class written the verl way (``__init__(self, config)``, the four async lifecycle
  methods keyed by ``instance_id``, its own per-instance dict) subclasses it and
  runs unchanged.
* :class:`SessionInteraction` owns the ``instance_id`` bookkeeping for you: you
  write ``new_session`` (build a small state object), ``respond`` and ``score``
  (which receive that state), and the base class stores, looks up and drops the
  state. State therefore lives per session and cannot leak between sessions or
  outlive ``finalize_interaction``; reusing a live ``instance_id`` is an error.

Either way a turn answers with an :class:`InteractionResult`, a typed result that
still unpacks as verl's 4-tuple ``(should_terminate, content, score, extra)``, and
:func:`last_assistant_text` is the one way to read "what the model just said"
from the conversation, whatever shape its content has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import isfinite
from numbers import Real
from typing import Any, ClassVar, NamedTuple

from .errors import SessionError

__all__ = [
    "NO_EXTRA",
    "BaseInteraction",
    "InteractionResult",
    "SessionInteraction",
    "as_score",
    "derive_name",
    "last_assistant_text",
]


# -- the result of one turn ---------------------------------------------------------------
#
# verl's interactions return an untyped 4-tuple ``(should_terminate, content, score,
# extra)``. ``InteractionResult`` is a named tuple of exactly those four fields, so it
# is immutable, self-describing, and still unpacks the way verl's rollout code
# expects. ``extra`` is always a ``dict``, so a result pickles (Ray), deep-copies and
# JSON-encodes like verl's own. A result built without one shares a single empty,
# read-only ``extra``: the whole result is then a constant, and a reply that never
# changes ("Correct!") can be built once and returned on every turn, where verl's
# tuple with its mutable ``{}`` has to be rebuilt each time. Building a result is
# the costliest part of a turn the framework asks for (a tuple subclass, several
# times verl's tuple literal), so this is what lets a fixed reply cost nothing.


class _NoExtra(dict):  # type: ignore[type-arg]
    """The ``extra`` of every result built without one: empty, shared and read-only.

    A ``dict`` (``isinstance`` checks, JSON and ``dict(...)`` treat it as ``{}``)
    that refuses every change, since one change would show in every such result;
    it pickles and copies to the one shared object.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "this result was built without an extra, so its extra is the shared, "
            "read-only empty one; build the result with extra={...}, or copy it "
            "first: dict(result.extra)"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _no_extra, ()

    def __copy__(self) -> _NoExtra:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _NoExtra:
        return self

    def __repr__(self) -> str:
        return "{}"


NO_EXTRA = _NoExtra()


def _no_extra() -> _NoExtra:
    """What a pickled :data:`NO_EXTRA` unpickles to: the same shared object."""
    return NO_EXTRA


class _Fields(NamedTuple):
    should_terminate: bool
    content: str
    score: float
    extra: dict[str, Any]


class InteractionResult(_Fields):
    """What an interaction answers after an assistant turn.

    A named tuple of four fields:

    * ``should_terminate`` -- true when the episode is over from the interaction's side;
    * ``content`` -- feedback text, appended to the conversation as a ``user`` message;
    * ``score`` -- the score of this turn, always a float;
    * ``extra`` -- free-form metrics or data for the trainer: the ``dict`` given (any
      other mapping is copied into one), or by default :data:`NO_EXTRA`, the shared,
      read-only empty one.

    A result is an immutable value: one whose four fields never change can be built
    once (at import) and returned on every turn.
    """

    __slots__ = ()

    def __new__(
        cls,
        should_terminate: bool,
        content: str,
        score: float,
        extra: Mapping[str, Any] | None = None,
        _new: Any = tuple.__new__,
    ) -> InteractionResult:
        # One expression: this runs on every turn of every episode.
        return _new(  # type: ignore[no-any-return]
            cls,
            (
                should_terminate,
                content,
                score,
                NO_EXTRA
                if extra is None or extra is NO_EXTRA  # (a copy or an unpickled result)
                else extra
                if type(extra) is dict
                else dict(extra),
            ),
        )

    @classmethod
    def coerce(cls, value: Any) -> InteractionResult:
        """Return ``value`` as an :class:`InteractionResult`, checking its shape.

        Accepts verl-style 4-tuples and lists. Raises ``TypeError`` naming the bad
        field, so the runtime can report a plugin that returns the wrong types.
        """
        if type(value) is cls:
            return value
        if type(value) is tuple and len(value) == 4:
            # verl's own shape with exact types, the common case: checked in one line.
            terminate, content, score, extra = value
            if (
                type(terminate) is bool
                and type(content) is str
                and type(score) is float
                and type(extra) is dict
                and isfinite(score)
            ):
                return tuple.__new__(cls, value)  # type: ignore[no-any-return]
        return cls._checked(value)

    @classmethod
    def _checked(cls, value: Any) -> InteractionResult:
        """Every field checked, each problem named: any 4-sequence, any real number."""
        if not isinstance(value, (tuple, list)) or len(value) != 4:
            raise TypeError(
                "generate_response must return (should_terminate, content, score, extra); "
                f"got {type(value).__name__} {_short(value)}"
            )
        terminate, content, score, extra = value
        if not isinstance(terminate, bool):  # numpy's bool is named "bool" too: say whose
            kind = type(terminate)
            where = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
            raise TypeError(
                f"should_terminate must be a bool, got {where}{kind.__qualname__}; pass bool(value)"
            )
        if not isinstance(content, str):
            raise TypeError(f"content must be a str, got {type(content).__name__}")
        if type(content) is not str:  # numpy.str_ and the like: plain text from here on
            content = str.__str__(content)
        score = as_score(score, "score")
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"extra must be a mapping, got {type(extra).__name__}")
        return cls(terminate, content, score, extra)


def as_score(value: Any, what: str = "the score") -> float:
    """``value`` as a finite float, or ``TypeError``/``ValueError`` saying what is wrong.

    A NaN or infinite score would silently poison every mean computed from it, so
    it is an error where it is returned, not a surprise in a summary.
    """
    if type(value) is not float:
        # Any real number: numpy's float32 and int64 are registered as ``numbers.Real``
        # without subclassing ``float`` or ``int`` (only float64 does).
        if isinstance(value, bool) or not isinstance(value, (int, float, Real)):
            raise TypeError(f"{what} must be a float, got {type(value).__name__}")
        value = float(value)
    if not isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the base classes (see the module docstring) ----------------------------------------


def derive_name(class_name: str) -> str:
    """Derive an interaction name from a class name, the way verl does.

    ``"my_pkg.mod.Gsm8kInteraction"`` and ``"Gsm8kInteraction"`` both give
    ``"gsm8k"``; a class whose name does not end in ``Interaction`` is lowercased.
    """
    simple = class_name.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    if simple.endswith("Interaction") and len(simple) > len("Interaction"):
        simple = simple[: -len("Interaction")]
    return simple.lower()


#: Marks "no state" when popping a session (``None`` is a valid state).
_ABSENT: Any = object()


def _new_instance_id() -> str:
    import uuid  # deferred: only sessions started without an id need it

    return str(uuid.uuid4())


class BaseInteraction:
    """verl's interaction base class, with one signature per lifecycle method.

    Subclasses override :meth:`generate_response` (required) and may override the
    other three. ``config`` is the entry's ``config:`` mapping with ``name`` added
    by the loader; when the class declares :attr:`config_schema` (an attrs class)
    the mapping is validated against it and the parsed object is kept as
    :attr:`settings`.
    """

    #: Optional attrs class describing ``config:``; used for validation and ``show``.
    config_schema: ClassVar[type | None] = None

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = dict(config or {})
        self.config: dict[str, Any] = config
        self.name: str = str(config.get("name") or derive_name(type(self).__name__))
        self.settings: Any = None
        if self.config_schema is not None:
            from ._config import build_settings

            options = {k: v for k, v in config.items() if k != "name"}
            self.settings = build_settings(self.config_schema, options, owner=self.name)

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        """Open a session and return its id (a fresh UUID when none is given)."""
        return instance_id if instance_id is not None else _new_instance_id()

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Judge the latest assistant turn; return feedback, score and whether to stop."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate_response")

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        """Score the session so far (0.0 unless overridden)."""
        return 0.0

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Release everything held for the session."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"


class SessionInteraction(BaseInteraction):
    """An interaction whose per-session state is managed by the framework.

    Override :meth:`new_session` to build the state from the sample's
    ``interaction_kwargs``, :meth:`respond` to judge a turn, and optionally
    :meth:`score` and :meth:`end_session`. Keep the state small (a ``__slots__``
    class or a tuple): one lives per open session.

    :meth:`respond` and :meth:`score` may be plain ``def`` or ``async def``:
    write ``async def`` when they await something (a judge model, a sandbox),
    plain ``def`` when they only compute, which spares a coroutine per call.

    The four lifecycle methods below are all the framework adds: per turn, one
    dict lookup and the call of your method (the work verl's own structure does
    too, whose ``generate_response`` awaits ``calculate_score``); per session,
    one more Python call, :meth:`new_session`. ``benchmarks/bench_turn.py``
    compares a plugin written this way with a hand-written verl class keeping
    its own dict. The bundled plugins have no faster private path, and neither
    should yours: do not override these or reach into the session store.
    """

    #: Whether the class overrides :meth:`end_session` (else finalizing skips the call).
    _ends_sessions: bool = False
    #: Whether :meth:`respond` / :meth:`score` / :meth:`new_session` / :meth:`end_session`
    #: are coroutine functions (awaited) or plain.
    _awaits_respond: bool = False
    _awaits_score: bool = False
    _awaits_new: bool = False
    _awaits_end: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        import inspect  # deferred: classes are defined when a plugin is imported, not at start-up

        super().__init_subclass__(**kwargs)
        cls._ends_sessions = cls.end_session is not SessionInteraction.end_session
        cls._awaits_respond = inspect.iscoroutinefunction(cls.respond)
        cls._awaits_score = inspect.iscoroutinefunction(cls.score)
        # An async new_session had handed respond a coroutine as its state, and an async
        # end_session (closing a sandbox, say) had never run: both are awaited.
        cls._awaits_new = inspect.iscoroutinefunction(cls.new_session)
        cls._awaits_end = inspect.iscoroutinefunction(cls.end_session)

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._sessions: dict[str, Any] = {}
        # The class's flags copied onto the instance: an instance attribute is
        # read faster than a class attribute, and these are read on every call.
        self._ends_sessions = self._ends_sessions
        self._awaits_respond = self._awaits_respond
        self._awaits_score = self._awaits_score
        self._awaits_new = self._awaits_new
        self._awaits_end = self._awaits_end

    # -- what subclasses write -------------------------------------------------

    def new_session(self, **kwargs: Any) -> Any:
        """Build the state of a new session from the sample's interaction kwargs.

        Plain ``def`` or ``async def`` (awaited before the session opens)."""
        return kwargs

    def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """Judge the latest assistant turn of the session whose state is given.

        Return an :class:`InteractionResult`, or the same four fields as a
        plain tuple ``(should_terminate, content, score, extra)``, as verl does.
        Plain ``def`` or ``async def``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement respond")

    def score(self, state: Any, **kwargs: Any) -> Any:
        """Score the session whose state is given (0.0 unless overridden).

        Plain ``def`` or ``async def``.
        """
        return 0.0

    def end_session(self, state: Any) -> None:
        """Release resources held by a session's state (nothing by default).

        Plain ``def`` or ``async def`` (awaited when the session is finalized)."""

    # -- the verl lifecycle, implemented once ------------------------------------

    @property
    def open_sessions(self) -> int:
        """Number of sessions started and not yet finalized."""
        return len(self._sessions)

    def session_state(self, instance_id: str) -> Any:
        """The state of an open session; :class:`SessionError` when there is none."""
        try:
            return self._sessions[instance_id]
        except KeyError:
            raise self._no_session(instance_id) from None

    def _no_session(self, instance_id: str) -> SessionError:
        return SessionError(
            f"interaction {self.name!r} has no open session {instance_id!r}: "
            "call start_interaction first (a finalized session cannot be reused)"
        )

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        sessions = self._sessions
        if instance_id is None:
            instance_id = _new_instance_id()
        elif instance_id in sessions:
            raise SessionError(
                f"interaction {self.name!r} already has a live session {instance_id!r}; "
                "finalize it first or use a fresh instance_id"
            )
        state = self.new_session(**kwargs)
        if self._awaits_new:
            state = await state
            if instance_id in sessions:  # another start of this id while it awaited
                raise SessionError(
                    f"interaction {self.name!r} already has a live session {instance_id!r}; "
                    "finalize it first or use a fresh instance_id"
                )
        sessions[instance_id] = state
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        # The lookup is inlined (not session_state) and an empty kwargs is not
        # forwarded with ``**``: this runs once per turn of every episode.
        try:
            state = self._sessions[instance_id]
        except KeyError:
            raise self._no_session(instance_id) from None
        if kwargs:
            result = self.respond(state, messages, **kwargs)
        else:
            result = self.respond(state, messages)
        if self._awaits_respond:
            return await result  # type: ignore[no-any-return]
        return result  # type: ignore[return-value]

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        try:
            state = self._sessions[instance_id]
        except KeyError:
            raise self._no_session(instance_id) from None
        value = self.score(state, **kwargs) if kwargs else self.score(state)
        if self._awaits_score:
            return await value  # type: ignore[no-any-return]
        return value  # type: ignore[return-value]

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Drop the session's state; finalizing twice is harmless."""
        if self._ends_sessions:
            state = self._sessions.pop(instance_id, _ABSENT)
            if state is not _ABSENT:
                end: Any = self.end_session  # returns a coroutine when it is async
                ended = end(state)
                if self._awaits_end:
                    await ended
            return
        try:
            del self._sessions[instance_id]
        except KeyError:
            return  # never started, or already finalized


# -- what the model just said ----------------------------------------------------------


def last_assistant_text(messages: Sequence[Any]) -> str:
    """The text of the last ``assistant`` message in ``messages`` (``""`` if there is none).

    Trainers write a message's ``content`` in more than one shape, and an
    interaction should judge them all alike:

    * a string is the text itself;
    * ``None`` (an assistant turn that only called tools) is ``""``;
    * a list of parts (OpenAI's ``[{"type": "text", "text": ...}, {"type":
      "image_url", ...}]``) gives its text parts joined, in order; a part that is
      a plain string counts as text, a part without ``type`` is read as text, and
      images, audio and every other kind of part are ignored.
    """
    # An index walk with an exact-class test first: this runs on every turn of
    # every episode, and a plain dict is what every trainer sends.
    i = len(messages)
    while i:
        i -= 1
        message = messages[i]
        if (type(message) is dict or isinstance(message, Mapping)) and message.get(
            "role"
        ) == "assistant":
            content = message.get("content")
            return content if type(content) is str else _content_text(content)
    return ""


def _content_text(content: Any) -> str:
    """The text of one message's ``content``, whatever its shape (see above)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type", "text") == "text":
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)
