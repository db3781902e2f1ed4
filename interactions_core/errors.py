"""Exception types, and how the framework issues its warnings.

Every error the framework raises derives from :class:`InteractionsError`, so a
caller can catch the whole family in one place, and the CLI can turn any of them
into a one-paragraph message instead of a traceback. Several also derive from the
built-in type verl's callers already catch (``ValueError``, ``KeyError``), so code
written against verl keeps working.

The framework's warnings go through :func:`warn`; the CLI shows those of the
framework's categories as one ``interactions: warning: ...`` line.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType


def warn(message: str, category: type[Warning], stacklevel: int = 1) -> None:
    """Issue a framework warning (``stacklevel`` as for :func:`warnings.warn`, from the caller)."""
    import warnings

    warnings.warn(message, category, stacklevel=stacklevel + 1)


#: The most characters of an error's message kept (in a record, and the ``--json``
#: summary, which shows records' errors; in a served client's error): a record's line
#: must stay one its readers take, and a 50 MB message was sent whole to the client.
MAX_MESSAGE = 10_000


def cut_text(text: str, most: int) -> str:
    """``text`` with at most ``most`` characters, noting what was left out."""
    if len(text) <= most:
        return text
    return f"{text[:most]} [... {len(text) - most:,} more characters]"


#: Where :func:`keep_text` leaves an exception's message and its class's name (in its
#: ``__dict__``).
_TEXT, _KIND = "__interactions_text__", "__interactions_kind__"


#: An exception's own attribute dictionary: ``BaseException``'s descriptor, which a
#: ``__dict__`` property of the plugin's class cannot replace (nor see what is kept).
_OWN_DICT = BaseException.__dict__["__dict__"]


def note_on(exc: BaseException, key: str, value: object) -> None:
    """Keep ``value`` under ``key`` in ``exc``'s own attribute dictionary (no
    ``__setattr__`` of a plugin's class runs); nothing when it has none."""
    try:
        dict.__setitem__(_OWN_DICT.__get__(exc, BaseException), key, value)
    except Exception:
        pass


def noted_on(exc: BaseException, key: str) -> object:
    """What :func:`note_on` kept under ``key`` on ``exc``, or ``None``; no code of the
    exception's class runs (its ``__getattribute__``, a ``__dict__`` property)."""
    try:
        return dict.get(_OWN_DICT.__get__(exc, BaseException), key)
    except Exception:
        return None


def _kept(exc: BaseException, key: str) -> str | None:
    kept = noted_on(exc, key)
    return kept if type(kept) is str else None


#: A class's own name: ``type``'s descriptor, which no metaclass property can replace.
_CLASS_NAME = type.__dict__["__name__"]


#: The most characters of a class's name any message or record shows.
MAX_CLASS_NAME = 200


def class_name(cls: type) -> str:
    """The name ``cls`` was defined with (or last given), running none of its metaclass's
    code: a ``__name__`` property there is a plugin's, and may return anything.

    The name itself may be a ``str`` subclass (``type`` keeps whatever ``str`` it was
    given) or megabytes long: it is made plain and cut to :data:`MAX_CLASS_NAME`.
    """
    name = _plain(_CLASS_NAME.__get__(cls, type))
    return name if len(name) <= MAX_CLASS_NAME else cut_text(name, MAX_CLASS_NAME)


def _plain(text: str) -> str:
    """``text`` as an exact ``str``: a ``__str__`` may return a subclass, whose own methods
    (``__format__``, ``__len__``, ...) would run wherever the message is used later, outside
    the call that raised. Copied by ``str``'s own method, which runs none of them."""
    return text if type(text) is str else str.__str__(text)


def stops_the_program(exc: BaseException) -> bool:
    """Whether ``exc`` is the program's own stop: the user's Ctrl-C (:class:`Interrupted`)
    or the watchdog's break of a block (``LoopBlocked``), which must go on up even from
    a plugin's ``__str__``; a ``KeyboardInterrupt`` or ``SystemExit`` a plugin raises
    there is its fault, told as such."""
    import sys

    kind = type(exc)
    if issubclass(kind, Interrupted):
        return True
    watchdog = sys.modules.get("interactions_core.runtime.watchdog")
    return watchdog is not None and issubclass(kind, watchdog.LoopBlocked)


def exception_kind(exc: BaseException) -> str:
    """The name of ``exc``'s class (``type``'s, never the exception's own ``__class__``);
    the one :func:`keep_text` read earlier, when it did."""
    kept = _kept(exc, _KIND)
    if kept is not None:
        return kept
    return class_name(type(exc))


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or a note when a plugin's exception cannot tell its own message (its
    ``__str__`` raises): messages then still name the exception, not the ``__str__``'s.
    The message :func:`keep_text` read earlier, when it did."""
    kept = _kept(exc, _TEXT)
    if kept is not None:
        return kept
    try:
        return _plain(str(exc))
    except BaseException as inner:  # any class: a plugin's __str__ may raise a stop too
        if stops_the_program(inner):
            raise
        return f"<no message: its __str__ raised {class_name(type(inner))}>"


#: ``BaseException``'s own ``args`` and ``__traceback__``: a property of a plugin's class
#: cannot stand in for them.
_ARGS = BaseException.__dict__["args"]
_TRACEBACK = BaseException.__dict__["__traceback__"]


def stop_text(exc: BaseException) -> str:
    """``SystemExit(3)``: an exception's class and arguments, cut to a line, told without
    running any of the plugin's code (an argument of another type than a plain value is
    shown by its class's name), for a stop raised outside every call."""
    shown = []
    args = _ARGS.__get__(exc, BaseException)
    for arg in args if type(args) is tuple else ():
        kind = type(arg)
        shown.append(repr(arg) if kind in _SHOWN else f"<{class_name(kind)}>")
    text = ", ".join(shown)
    return f"{class_name(type(exc))}({text if len(text) <= 60 else text[:57] + '...'})"


_SHOWN = frozenset({int, float, bool, str, type(None)})


def traceback_of(exc: BaseException) -> TracebackType | None:
    """``exc.__traceback__`` through ``BaseException``'s own descriptor: no property of a
    plugin's class (nor its ``__class__``, nor its ``__getattribute__``) runs."""
    return _TRACEBACK.__get__(exc, BaseException)


def formatted_traceback(exc: BaseException) -> str:
    """The traceback Python would print for ``exc``, or a note when telling it raises:
    ``traceback`` reads the exception's ``__class__``, causes and attributes, all of
    which a plugin's class may override with code that raises anything."""
    import traceback

    try:
        return "".join(traceback.format_exception(exc)).rstrip()
    except BaseException as inner:  # any class: a plugin's property may raise a stop too
        if stops_the_program(inner):
            raise
        told = class_name(type(inner))
    # Its own frames and the runtime's reading of it, without its causes: none of them
    # run the exception's code.
    frames = "".join(traceback.format_tb(traceback_of(exc)))
    last = f"{exception_kind(exc)}: {exception_text(exc)}"
    note = f"(its causes are not shown: telling them raised {told})"
    return f"Traceback (most recent call last):\n{frames}{last}\n{note}"


def raised_at(exc: BaseException) -> str:
    """``raised at file:line``: where ``exc`` was raised (its traceback's innermost entry,
    read through ``BaseException``'s own descriptor)."""
    tb = traceback_of(exc)
    if tb is None:
        return "where is unknown"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"raised at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


#: Where :func:`keep_text` marks a ``TimeoutError`` the plugin raised itself.
_ITS_OWN = "__interactions_its_own__"


def keep_text(exc: BaseException) -> None:
    """Read ``exc``'s message now, for :func:`exception_text` to give later.

    A plugin's ``__str__`` (and its class's ``__name__``, which a metaclass may
    compute) is plugin code: the runtime reads them while the call that raised is
    still timed as that call (a slow one is then that call's block).
    """
    text, kind = exception_text(exc), exception_kind(exc)
    try:
        kept = _OWN_DICT.__get__(exc, BaseException)
        dict.__setitem__(kept, _TEXT, text)
        dict.__setitem__(kept, _KIND, kind)
        if issubclass(type(exc), _timeouts()):  # raised inside the call: its own
            dict.__setitem__(kept, _ITS_OWN, text)
    except Exception:
        pass


def _timeouts() -> tuple[type[BaseException], ...]:
    """``TimeoutError``, and asyncio's (another class before Python 3.11), if imported."""
    import sys

    aio = sys.modules.get("asyncio")
    return (TimeoutError,) if aio is None else (TimeoutError, aio.TimeoutError)


def its_own_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``TimeoutError`` the plugin raised itself (its own client's
    deadline, say), which :func:`keep_text` saw leave the call: not the runtime's
    ``--timeout``, which ends a call from outside it."""
    return _kept(exc, _ITS_OWN) is not None


class InteractionsError(Exception):
    """Base class of every error raised by interactions-core."""


class ConfigError(InteractionsError, ValueError):
    """A config (file or mapping) is invalid.

    Carries *every* problem found, not only the first, so a user fixes a config in
    one round trip. Subclasses ``ValueError`` because verl raises ``ValueError``
    for a duplicate interaction name and callers may rely on that.
    """

    def __init__(self, problems: Sequence[str], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''}{where}:"
        super().__init__("\n".join([head, *(f"  - {p}" for p in self.problems)]))


class UnknownNameError(InteractionsError, KeyError):
    """A name matches nothing of its kind that is installed or registered.

    Interactions, policies and dataset builders are all named things; an unknown
    one raises the subclass for its kind, whose message carries a did-you-mean
    and what exists. Catch this class for any of them.
    """

    #: What kind of named thing was looked up, as messages say it.
    kind = "name"

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownInteractionError(UnknownNameError):
    """A name does not match any installed or registered interaction."""

    kind = "interaction"


class UnknownPolicyError(UnknownNameError):
    """No installed policy has the requested name."""

    kind = "policy"


class UnknownBuilderError(UnknownNameError):
    """No installed dataset builder has the requested name."""

    kind = "dataset builder"


class ConflictError(InteractionsError, LookupError):
    """Two distributions register the same interaction name."""


class DisabledError(InteractionsError, LookupError):
    """An interaction was excluded by ``INTERACTIONS_PLUGINS``/``INTERACTIONS_DISABLE``."""


class PluginLoadError(InteractionsError, ImportError):
    """A plugin could not be imported or did not provide what it declared.

    The original exception is chained as ``__cause__`` so the real failure is
    never hidden behind the framework's message.
    """


class InteractionValidationError(InteractionsError, TypeError):
    """An implementation does not match the interaction hook spec."""


class SessionError(InteractionsError, RuntimeError):
    """A session id was misused: reused while live, or used after finalize."""


class TrustError(InteractionsError, PermissionError):
    """Loading was refused by the trust policy (for example dotted class paths)."""


class ConformanceError(InteractionsError, AssertionError):
    """An interaction failed :func:`interactions_core.testing.check_interaction`.

    ``violations`` holds every problem found (not only the first); the message is
    the readable report. Subclasses ``AssertionError`` so test runners show it as
    a failed assertion.
    """

    def __init__(self, message: str, violations: Sequence[object] = ()) -> None:
        self.violations = list(violations)
        super().__init__(message)


# -- errors a served episode reports to its client ---------------------------------
#
# Each one is a mistake the client can fix (or wait out), so its message says what
# was wrong and what to send instead. They reach an OpenEnv client as the text of a
# WebSocket error message, and an HTTP client as the ``detail`` of a 4xx response;
# the server keeps serving either way.


class ServeError(InteractionsError):
    """A request to the server could not be carried out; the message says why.

    The message is always sendable: a lone surrogate (a client's ``"\\ud800"`` a
    plugin echoed in its error) is written as its escape, since JSON in UTF-8 cannot
    carry it and the answer was lost (HTTP 500, a closed connection).
    """

    #: The HTTP status the server answers with for this error.
    status = 400

    def __init__(self, *args: object) -> None:
        super().__init__(*(sendable(a) if type(a) is str else a for a in args))


def printable(text: str) -> str:
    """``text`` with control characters escaped, line breaks included: what plugins or
    metadata wrote never drives the terminal (colours, a cleared screen, a rewritten
    line) nor adds lines of its own to what the program prints."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: Integers of more bits are described, not written out: Python refuses to write one
#: of over 4,300 digits as text, and a builder's default of ``10**5000`` made every
#: listing of builders fail.
MOST_INT_BITS = 4_000


def shown(value: object, most: int = 200) -> str:
    """``repr(value)`` for a line of a listing or of the terminal: cut to ``most``
    characters and :func:`printable`. A plugin's value whose ``repr`` cannot be made
    (it raises, or the integer is too long for text) is named by its type instead,
    so one odd default never fails a whole command."""
    kind = type(value)
    if issubclass(kind, int) and int.bit_length(value) > MOST_INT_BITS:  # type: ignore[arg-type]
        return f"an int of {int.bit_length(value):,} bits"  # type: ignore[arg-type]
    if kind in (list, tuple, dict, set, frozenset) and len(value) > most:  # type: ignore[arg-type]
        return f"a {kind.__name__} of {len(value):,} items"  # type: ignore[arg-type]
    try:
        text = _plain(repr(value))
    except BaseException as exc:  # any class: a plugin's __repr__ may raise a stop too
        if stops_the_program(exc):
            raise
        return f"<{class_name(kind)}: its repr raised {class_name(type(exc))}>"
    return printable(cut_text(text, most))


def printable_lines(text: str) -> str:
    """``text`` for the terminal with its own line breaks kept: each line as
    :func:`printable` makes it. For messages the program lays out over several
    lines (a config's problems, the summary) that quote a plugin's text."""
    return "\n".join(map(printable, text.split("\n")))


def sendable(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\udXXX`` escape; else as is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class BadResetError(ServeError, ValueError):
    """A reset names an unknown interaction, or its prompt or arguments have the wrong shape."""


class BadActionError(ServeError, TypeError):
    """A step's action is not ``{"content": "<the assistant's message>"}``, or comes too early.

    A ``TypeError`` and never a ``ValueError``: pydantic lets it through its
    validators unchanged, so the client sees this message, not a generic
    "invalid message".
    """

    status = 422


class CapacityError(ServeError):
    """``--max-sessions`` sessions are already open."""

    status = 503


class AuthError(ServeError):
    """The server has a shared token and the reset did not bring it."""

    status = 401


class InteractionsWarning(UserWarning):
    """Base class of the framework's warnings (the CLI prints them as one line)."""


class IncompatibleCoreWarning(InteractionsWarning):
    """A plugin declares core versions that do not include the running core.

    A warning, not an error: a conservative upper bound often still works. Turn
    it into an error in CI with ``-W error::interactions_core.errors.IncompatibleCoreWarning``.
    """


class LegacyInteractionWarning(InteractionsWarning):
    """A verl-style class breaks the spec in ways verl tolerated; it is loaded anyway.

    Raised (as a warning) by the verl drop-in, whose loader accepts what verl's
    accepted, for example verl's own ``calculate_score(self)``.
    """


class SelectionWarning(InteractionsWarning):
    """A name in ``INTERACTIONS_PLUGINS``/``INTERACTIONS_DISABLE`` matches nothing installed."""


class Interrupted(KeyboardInterrupt):
    """The user stopped the program (Ctrl-C, a stop signal), as opposed to code raising.

    The CLI's signal handlers raise this instead of a bare ``KeyboardInterrupt``,
    so a ``KeyboardInterrupt`` (or ``SystemExit``) raised by plugin code, at
    import or in a call, is reported as that plugin's fault while a real Ctrl-C
    still stops the program.
    """


# -- the episode runtime -------------------------------------------------------


#: Where :func:`runtime_call_error` marks the errors it made (a plugin may raise its own).
_MADE_HERE = "__interactions_call_error__"


def runtime_call_error(
    interaction: str, instance_id: str, method: str, problem: str
) -> InteractionCallError:
    """An :class:`InteractionCallError` the runtime makes, marked as its own."""
    error = InteractionCallError(interaction, instance_id, method, problem)
    note_on(error, _MADE_HERE, True)
    return error


def made_by_runtime(exc: BaseException) -> bool:
    """Whether ``exc`` is an :class:`InteractionCallError` the runtime made: one a plugin
    raised (``Session`` is public API: a plugin delegating to another interaction
    raises them) is told as any plugin exception, its text cut and its attributes
    never trusted."""
    return type(exc) is InteractionCallError and noted_on(exc, _MADE_HERE) is True


def plugin_exception(exc: BaseException) -> BaseException:
    """The exception a plugin raised behind ``exc``: the chained cause of an
    :class:`InteractionCallError` the runtime made, else ``exc`` itself.

    Only the runtime's own wrapper is unwrapped: any other exception's
    ``__cause__`` is plugin code (a property that raises, an object whose
    ``__bool__`` raises) and is never read, so telling an error cannot fail.
    """
    if made_by_runtime(exc):
        cause = exc.__cause__
        if cause is not None:
            return cause
    return exc


class InteractionCallError(InteractionsError):
    """A call into an interaction failed, timed out or returned the wrong shape.

    The message names the interaction, the session (``instance_id``) and the
    lifecycle method; the original exception is chained as ``__cause__``.
    """

    def __init__(self, interaction: str, instance_id: str, method: str, problem: str) -> None:
        self.interaction = interaction
        self.instance_id = instance_id
        self.method = method
        self.problem = problem
        super().__init__(
            f"interaction {interaction!r}, session {instance_id!r}: {method} {problem}"
        )


class PolicyError(InteractionsError):
    """The policy (the model side) could not produce a reply for a sample."""


class SampleError(InteractionsError, ValueError):
    """A sample cannot be run: bad shape, unknown or missing interaction name."""


class DatasetError(InteractionsError, ValueError):
    """A dataset file cannot be read, or a bad row was met in strict mode."""


class RunInterrupted(Interrupted):
    """The run was stopped at once (a second Ctrl-C or SIGTERM).

    It derives from :class:`KeyboardInterrupt`, so it leaves the event loop
    immediately even from inside a plugin call that blocks the loop; the
    episode loop lets it through, where a ``KeyboardInterrupt`` raised by a
    plugin only ends that plugin's episode.
    """
