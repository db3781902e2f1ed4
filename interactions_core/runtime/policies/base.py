"""The policy contract.

A policy is a class. The runtime creates one instance per run (``cls(**options)``;
options are keyword-only constructor parameters, so an unknown option is an
error naming the accepted ones) and, per episode:

1. ``state = policy.start(sample)`` — per-episode state from the sample (the row
   as read from the dataset). Raise :class:`~interactions_core.errors.PolicyError`
   when the sample cannot be played (the episode is recorded as an error). Under
   ``--repeat K`` a ``start`` that accepts a ``repeat`` keyword is called as
   ``start(sample, repeat=r)`` for the repeats ``r >= 1`` (a seed per repeat, the
   ``r``-th recorded attempt); other policies see the sample only.
2. ``text = policy.reply(state, messages)``, once per assistant turn, with the
   full conversation so far. Return the reply text, or ``None`` when the policy
   has nothing more to say (the episode ends as ``exhausted``). ``reply`` may be
   an ``async def`` (a model server) or a plain ``def`` (replay: no coroutine per
   turn); the runtime checks which once per run.
3. ``policy.usage(state)`` — optional: the episode's accounting (token counts,
   request latency) as a JSON-ready mapping, kept in the record's ``usage``.
4. ``policy.finish(state)`` — always called once the episode is over.

``await policy.aclose()`` runs once at the end of the run (close connections).
``max_concurrency`` caps how many episodes run at once with this policy
(``human`` sets 1); ``interactive = True`` tells the CLI the policy uses the
terminal.

Policies are named things of the one catalog (:class:`~interactions_core.registry.Registry`):
the core's own (``replay``, ``openai``, ``human``), entry points in the group
``interactions_core.policies`` and the ``register_policies`` hook of hook plugins,
under the same allow/deny lists and conflict rule as interactions.
:func:`get_policy_class` and :func:`list_policies` ask it.

The two policies that need nothing outside this process are defined here too,
under the contract: ``replay``, the simplest, the one a policy author reads
first; and ``human``: you type the assistant's replies, to debug an interaction
by hand. It shows the conversation so far (the prompt at the first turn, then
each feedback message); a line you type is the reply, a line ending in a
backslash continues on the next one, and an empty line, ``/end`` or end of input
(Ctrl-D) ends the episode as ``exhausted``. Episodes run one at a time.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TextIO

from ...errors import ConfigError, PolicyError
from ...registry import PolicyInfo, Registry, get_registry

__all__ = [
    "HumanPolicy",
    "Policy",
    "ReplayPolicy",
    "create_policy",
    "get_policy_class",
    "list_policies",
    "policy_options",
]


class Policy:
    """Base class of policies (subclassing it is optional: the methods are the contract)."""

    #: The name the policy is registered under (informational).
    name: ClassVar[str] = ""
    #: At most this many episodes at once (``None``: no limit of its own).
    max_concurrency: ClassVar[int | None] = None
    #: True when the policy talks to the terminal (the CLI then shows no progress bar).
    interactive: ClassVar[bool] = False

    def start(self, sample: Mapping[str, Any]) -> Any:
        """Per-episode state for ``sample`` (``None`` by default)."""
        return None

    def reply(self, state: Any, messages: list[dict[str, Any]]) -> Any:
        """The next assistant reply (``str``), or ``None`` when there is nothing more to say.

        May be overridden as ``def`` or ``async def``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement reply")

    def usage(self, state: Any) -> Mapping[str, Any] | None:
        """The episode's accounting for the record's ``usage`` (``None``: nothing to report)."""
        return None

    def finish(self, state: Any) -> None:
        """Release the episode's state (nothing by default)."""

    async def aclose(self) -> None:
        """Release run-wide resources (nothing by default)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def policy_options(cls: type) -> dict[str, inspect.Parameter]:
    """The options ``cls`` accepts: its keyword constructor parameters."""
    from ..._classes import keyword_options

    return keyword_options(cls)


def create_policy(cls: type, options: Mapping[str, Any] | None = None, *, name: str = "") -> Any:
    """Instantiate policy class ``cls`` with ``options``; teaching errors for bad options."""
    from ..._classes import check_options

    options = dict(options or {})
    label = name or getattr(cls, "name", "") or cls.__name__
    problems = check_options(f"policy {label!r}", cls, options)
    if problems:
        raise ConfigError(problems)
    try:
        policy = cls(**options)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        from ...errors import exception_text

        raise ConfigError([f"policy {label!r}: {exception_text(exc)}"]) from exc
    if not callable(getattr(policy, "reply", None)):
        raise ConfigError([f"policy {label!r} ({cls.__qualname__}) has no reply() method"])
    return policy


def list_policies(registry: Registry | None = None) -> list[PolicyInfo]:
    """Every usable policy, sorted by name (ones the allow/deny lists exclude left out)."""
    catalog = registry if registry is not None else get_registry()
    return [p for p in catalog.policies() if p.status != "disabled"]


def get_policy_class(name: str, registry: Registry | None = None) -> Any:
    """The policy class called ``name`` (or ``distribution:name``)."""
    return (registry if registry is not None else get_registry()).policy(name)


# -- replay: recorded replies ------------------------------------------------------------
#
# ``replay``: play recorded assistant replies from the sample, one per turn.
#
# Each sample carries its replies in a field (``responses`` unless ``field`` says
# otherwise): a list of strings, played in order. When they run out before the
# interaction ends the episode, the episode ends as ``exhausted``. Scoring
# recorded trajectories offline, and testing an interaction without a model, are
# what it is for.
#
# Several recorded attempts per sample (to read pass@k offline with ``--repeat K``)
# are a list of lists: ``[["attempt 0, turn 1", ...], ["attempt 1, turn 1", ...]]``.
# Repeat ``r`` of the sample plays attempt ``r``; a repeat without its attempt is
# an error of that episode (never a silent replay of another attempt), and so is
# ``--repeat`` above 1 on a sample that holds one plain list.


class ReplayPolicy(Policy):
    """Replies recorded in the sample's ``field`` (a list of strings), in order.

    Options: ``field`` (default ``"responses"``) — a top-level key of the row, or
    a dotted path into nested mappings (``extra_info.responses``). The field may
    instead hold a list of attempts (lists of strings); repeat ``r`` plays attempt ``r``.
    """

    name = "replay"

    def __init__(self, *, field: str = "responses") -> None:
        if not isinstance(field, str) or not field.strip():
            raise ValueError(f"field must be a non-empty string, not {field!r}")
        self.field = field
        self._path = tuple(field.split("."))
        #: The top-level key holding the replies (``None`` for a dotted path).
        self._key = field if len(self._path) == 1 else None

    def start(self, sample: Mapping[str, Any], repeat: int = 0) -> Iterator[str]:
        # Items are not checked here: the episode loop rejects a reply that is not a str
        # when it is played (so a sample whose replies run out early costs nothing more).
        key = self._key
        if key is not None:
            value = sample.get(key)
            flat = type(value) is list and not (value and type(value[0]) is list)
            if flat and not repeat:
                return iter(value)  # type: ignore[arg-type]
        value = sample
        for key in self._path:
            if not isinstance(value, Mapping) or key not in value:
                raise PolicyError(
                    f"replay: the sample has no {self.field!r} field (a list of recorded "
                    "assistant replies); set the field with --policy-option field=NAME"
                )
            value = value[key]
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise PolicyError(
                f"replay: field {self.field!r} must be a list of strings, "
                f"not {type(value).__name__}"
            )
        if value and isinstance(value[0], (list, tuple)):
            return iter(self._attempt(value, repeat))
        if repeat:
            raise PolicyError(
                f"replay: field {self.field!r} holds one recorded attempt (a list of replies), "
                f"so repeat {repeat} has nothing to play; for --repeat K give a list of K "
                "attempts, each a list of replies"
            )
        return iter(value)

    def _attempt(self, attempts: list[Any] | tuple[Any, ...], repeat: int) -> Any:
        """Attempt ``repeat`` of a list of attempts (each a list of replies)."""
        if repeat >= len(attempts):
            raise PolicyError(
                f"replay: field {self.field!r} holds {len(attempts)} recorded attempt"
                f"{'s' if len(attempts) != 1 else ''}, so repeat {repeat} (0-based) has none; "
                f"run with --repeat {len(attempts)} or fewer"
            )
        attempt = attempts[repeat]
        if isinstance(attempt, str) or not isinstance(attempt, (list, tuple)):
            raise PolicyError(
                f"replay: attempt {repeat} of field {self.field!r} must be a list of replies, "
                f"not {type(attempt).__name__} (a list of attempts holds lists only)"
            )
        return attempt

    def reply(self, state: Iterator[str], messages: list[dict[str, Any]]) -> str | None:
        return next(state, None)

    def __repr__(self) -> str:
        return f"<ReplayPolicy field={self.field!r}>"


class HumanPolicy(Policy):
    """Reads replies from a terminal (or any text stream, for tests)."""

    name = "human"
    max_concurrency = 1
    interactive = True

    def __init__(
        self,
        *,
        prompt: str = "assistant> ",
        input: TextIO | None = None,
        output: TextIO | None = None,
    ) -> None:
        self.prompt = prompt
        self.input = input
        self.output = output

    def start(self, sample: Mapping[str, Any]) -> list[int]:
        return [0]  # how many messages have been shown so far

    def _read(self, messages: list[dict[str, Any]], shown: list[int]) -> str | None:
        out = self.output or sys.stderr
        inp = self.input or sys.stdin
        for message in messages[shown[0] :]:
            content = message.get("content")
            text = content if isinstance(content, str) else repr(content)
            out.write(f"[{message.get('role', '?')}] {text}\n")
        shown[0] = len(messages) + 1  # the reply typed now is not shown again
        lines: list[str] = []
        out.write(self.prompt)
        out.flush()
        while True:
            line = inp.readline()
            if not line:  # end of input
                if lines:
                    break
                out.write("\n")
                return None
            line = line.rstrip("\r\n")
            if line.endswith("\\"):
                lines.append(line[:-1])
                out.write("... ")
                out.flush()
                continue
            lines.append(line)
            break
        text = "\n".join(lines)
        if not text.strip() or text.strip() == "/end":
            return None
        return text

    async def reply(self, state: list[int], messages: list[dict[str, Any]]) -> str | None:
        # A daemon thread rather than the loop's executor: a read blocked on the
        # terminal must not keep the process alive after Ctrl-C.
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def settle(value: str | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def work() -> None:
            value: str | None = None
            error: BaseException | None = None
            try:
                value = self._read(messages, state)
            except BaseException as exc:
                error = exc
            try:
                loop.call_soon_threadsafe(settle, value, error)
            except RuntimeError:  # the loop is gone (the run was interrupted)
                pass

        threading.Thread(target=work, name="human-policy", daemon=True).start()
        return await future
