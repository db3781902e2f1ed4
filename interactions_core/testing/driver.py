"""A session driver: play scripted conversations against an interaction.

The driver does what a trainer's rollout loop does, without a model: it opens a
session, appends each scripted assistant reply to the conversation and plays the
runtime's one episode step (:mod:`interactions_core.runtime.step`): the
interaction judges the turn, and its feedback is appended as a ``user`` message
unless the episode ends there (the interaction terminates, or a turn limit given
to the driver is reached). It stops at the end or when the script runs out. The
session is finalized on every way out, including an exception in the
interaction::

    driver = SessionDriver(MyInteraction({}))
    transcript = await driver.play(["#### 41", "#### 42"], ground_truth="42")
    assert transcript.final_score == 1.0

    async with driver.session(ground_truth="42") as session:
        result = await session.reply("#### 42")
        assert result.should_terminate

Every turn result is passed through :meth:`InteractionResult.coerce
<interactions_core.InteractionResult.coerce>`, so a verl-style 4-tuple is
accepted and a wrongly typed one fails with a message naming the bad field.

A scripted conversation is an :class:`Episode` (replies, interaction kwargs,
prompt); the conformance checker plays the same scripts, and reports what it
finds in a :class:`ConformanceReport` (every broken rule, grouped by check,
readable at a glance). The report lives here, beside the scripts, because the
driver too refuses an interaction that breaks the hook spec with the checker's
``[spec]`` report.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, TypeVar

from .._interaction import InteractionResult
from ..errors import ConformanceError, InteractionCallError, InteractionValidationError
from ..runtime.session import Session
from ..runtime.step import EXHAUSTED, conclude_turn

__all__ = [
    "CHECKS",
    "DEFAULT_PROMPT",
    "ConformanceReport",
    "Episode",
    "ScriptedSession",
    "SessionDriver",
    "Transcript",
    "Violation",
    "plugin_error",
    "run_sync",
]

T = TypeVar("T")

#: The first user message of a scripted conversation when none is given.
DEFAULT_PROMPT = "Please solve the task and give your final answer."


class Episode(NamedTuple):
    """One scripted episode: interaction kwargs and the assistant replies to play."""

    replies: Sequence[Any]
    kwargs: Mapping[str, Any] = {}
    prompt: str = DEFAULT_PROMPT


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code and return its result.

    Works with or without a running event loop in the calling thread (inside an
    ``async`` test the coroutine runs on a private loop in a helper thread).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # outside the except block, so errors carry no misleading context
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="interactions-run-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class Transcript:
    """What happened in one scripted episode.

    ``end_reason`` is why it ended, as a run's record says it (``terminated``,
    ``max_assistant_turns``, ``max_user_turns``; ``exhausted`` when the script
    of :meth:`SessionDriver.play` ran out), or ``None`` while it goes on.
    """

    __slots__ = (
        "end_reason",
        "final_score",
        "instance_id",
        "kwargs",
        "messages",
        "results",
        "user_turns",
    )

    def __init__(self, instance_id: str, kwargs: Mapping[str, Any]) -> None:
        self.instance_id = instance_id
        self.kwargs = dict(kwargs)
        self.messages: list[dict[str, Any]] = []
        self.results: list[InteractionResult] = []
        self.final_score: float | None = None
        self.user_turns = 0
        self.end_reason: str | None = None

    @property
    def terminated(self) -> bool:
        """Whether the interaction ended the episode (rather than the script running out)."""
        return bool(self.results) and self.results[-1].should_terminate

    @property
    def turns(self) -> int:
        return len(self.results)

    @property
    def scores(self) -> list[float]:
        """The score of every turn, in order."""
        return [r.score for r in self.results]

    def __repr__(self) -> str:
        return (
            f"<Transcript {self.instance_id!r} turns={self.turns} "
            f"terminated={self.terminated} final_score={self.final_score!r}>"
        )


class ScriptedSession:
    """One open session of a :class:`SessionDriver`; created by :meth:`SessionDriver.session`.

    It plays through :class:`~interactions_core.runtime.session.Session`, the
    lifecycle's one implementation, so a test sees the rules a run applies. A
    failing call raises the plugin's own exception (``pytest.raises(ValueError)``
    works), not the run's ``InteractionCallError`` wrapper.
    """

    def __init__(
        self, session: Session, transcript: Transcript, limits: tuple[int | None, int | None]
    ) -> None:
        self._session = session
        self.transcript = transcript
        self._limits = limits

    @property
    def interaction(self) -> Any:
        return self._session.interaction

    @property
    def instance_id(self) -> str:
        return self.transcript.instance_id

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (the list passed to ``generate_response``)."""
        return self.transcript.messages

    @property
    def terminated(self) -> bool:
        return self.transcript.terminated

    async def reply(self, text: Any, **kwargs: Any) -> InteractionResult:
        """Add an assistant turn with content ``text`` and return the interaction's answer.

        ``generate_response`` gets the session's interaction kwargs, as in a run,
        updated with ``kwargs``. The rest is the runtime's episode step: the
        feedback is appended to :attr:`messages` as a ``user`` turn unless the
        episode ends here, and the transcript's ``end_reason`` says why it did.
        """
        transcript = self.transcript
        self.messages.append({"role": "assistant", "content": text})
        result = await _plain(self._session.respond(self.messages, **kwargs))
        transcript.results.append(result)
        end = conclude_turn(
            result, self.messages, len(transcript.results), transcript.user_turns, *self._limits
        )
        transcript.end_reason = end
        if end is None:
            transcript.user_turns += 1
        return result

    async def score(self, **kwargs: Any) -> float:
        """``calculate_score`` for this session; also recorded as the transcript's final score."""
        value: float = await _plain(self._session.score(**kwargs))
        self.transcript.final_score = value
        return value


async def _plain(call: Awaitable[T]) -> T:
    """``await call``, raising a failed plugin call as the plugin's own exception."""
    try:
        return await call
    except InteractionCallError as exc:
        raise plugin_error(exc) from None


def plugin_error(error: BaseException) -> BaseException:
    """The plugin's own exception behind a session's ``InteractionCallError``."""
    return error.__cause__ if error.__cause__ is not None else error


# -- the conformance report ----------------------------------------------------------

CHECKS = (
    "spec",
    "config",
    "lifecycle",
    "results",
    "scores",
    "messages",
    "unknown_session",
    "reuse",
    "isolation",
    "state",
    "blocking",
)
"""The names of the checks :func:`check_interaction` runs, in order; ``skip=`` takes them."""


class Violation(NamedTuple):
    """One broken rule: the check it belongs to and what is wrong."""

    check: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


class ConformanceReport:
    """The outcome of :func:`check_interaction`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.checks_run: list[str] = []
        self.violations: list[Violation] = []
        self.notes: list[str] = []
        self._counts: dict[Violation, int] = {}
        self._keys: dict[tuple[str, str], Violation] = {}

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, check: str, message: str, key: str | None = None) -> None:
        """Record a violation; a repeated one is counted, not listed twice.

        ``key`` identifies the rule when the message names a place (episode, turn)
        so the same fault seen in many places is listed once, at its first place.
        """
        ident = (check, key if key is not None else message)
        first = self._keys.get(ident)
        if first is not None:
            self._counts[first] += 1
            return
        violation = Violation(check, message)
        self._keys[ident] = violation
        self._counts[violation] = 1
        self.violations.append(violation)

    def format(self) -> str:
        """The readable report: one line per violation, then notes."""
        if self.ok:
            head = f"{self.label} passed {len(self.checks_run)} conformance checks"
            lines = [head + (f" ({', '.join(self.checks_run)})" if self.checks_run else "")]
        else:
            failed = sorted({v.check for v in self.violations}, key=_check_order)
            count = len(self.violations)
            lines = [
                f"{self.label} broke {count} conformance rule{'s' if count != 1 else ''} "
                f"(failed checks: {', '.join(failed)}):"
            ]
            for v in sorted(self.violations, key=lambda v: _check_order(v.check)):
                times = self._counts[v]
                more = (
                    f" (and {times - 1} more time{'s' if times > 2 else ''})" if times > 1 else ""
                )
                lines.append(f"  - {v}{more}")
        lines += [f"  note: {n}" for n in self.notes]
        if not self.ok:
            lines.append(
                "  See docs/writing-plugins.md (section 'The conformance checker') for each rule."
            )
        return "\n".join(lines)

    def raise_for_violations(self) -> ConformanceReport:
        """Raise :class:`ConformanceError` when there is any violation; else return ``self``."""
        if self.violations:
            raise ConformanceError(self.format(), self.violations)
        return self

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"<ConformanceReport {self.label} violations={len(self.violations)}>"


def _check_order(check: str) -> int:
    return CHECKS.index(check) if check in CHECKS else len(CHECKS)


def record_spec(report: ConformanceReport, exc: InteractionValidationError) -> None:
    lines = [ln.strip()[2:] for ln in str(exc).splitlines() if ln.strip().startswith("- ")]
    for line in lines or [str(exc)]:
        report.add("spec", line)


def _check_spec(interaction: Any) -> None:
    """Refuse an interaction that breaks the hook spec, with the checker's ``[spec]`` message.

    Without this, a synchronous ``generate_response`` would surface as a raw
    ``TypeError`` from ``await`` deep inside a test.
    """
    from .._spec import validate_interaction_class

    cls = interaction if isinstance(interaction, type) else type(interaction)
    try:
        validate_interaction_class(cls, f"interaction {cls.__qualname__}")
    except InteractionValidationError as exc:
        report = ConformanceReport(f"{cls.__module__}.{cls.__qualname__}")
        record_spec(report, exc)
        report.raise_for_violations()


class SessionDriver:
    """Plays scripted conversations against one interaction instance.

    ``timeout`` bounds every lifecycle call in seconds (``None``: no bound), so a
    hung interaction fails a test instead of hanging it. ``max_assistant_turns``
    and ``max_user_turns`` end an episode as ``interactions run`` does (``None``:
    no limit); the last turn a limit allows is still judged.
    """

    def __init__(
        self,
        interaction: Any,
        *,
        prompt: str = DEFAULT_PROMPT,
        timeout: float | None = 30.0,
        max_assistant_turns: int | None = None,
        max_user_turns: int | None = None,
    ) -> None:
        _check_spec(interaction)
        self.interaction = interaction
        self.prompt = prompt
        self.timeout = timeout
        self.max_assistant_turns = max_assistant_turns
        self.max_user_turns = max_user_turns

    @asynccontextmanager
    async def session(
        self, instance_id: str | None = None, *, prompt: str | None = None, **kwargs: Any
    ) -> AsyncIterator[ScriptedSession]:
        """Open a session with interaction kwargs ``kwargs``; finalize it on exit, always.

        A failing ``finalize_interaction`` fails the block (unless another error
        is already on its way out, which is then the one raised).
        """
        session = Session(self.interaction, instance_id=instance_id, timeout=self.timeout)
        iid = await _plain(session.start(**kwargs))
        transcript = Transcript(iid, kwargs)
        transcript.messages.append({"role": "user", "content": prompt or self.prompt})
        try:
            limits = (self.max_assistant_turns, self.max_user_turns)
            yield ScriptedSession(session, transcript, limits)
        except BaseException:
            await session.finalize()  # the error on its way out is the one raised
            raise
        problem = await session.finalize()
        if problem is not None:
            raise plugin_error(problem)

    async def play(
        self,
        replies: Iterable[Any],
        *,
        instance_id: str | None = None,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> Transcript:
        """Play one episode: each reply in turn until the episode ends.

        Returns the :class:`Transcript`, with ``final_score`` from ``calculate_score``.
        """
        async with self.session(instance_id, prompt=prompt, **kwargs) as session:
            for text in replies:
                await session.reply(text)
                if session.transcript.end_reason is not None:
                    break
            else:
                session.transcript.end_reason = EXHAUSTED
            await session.score()
        return session.transcript

    def play_sync(
        self,
        replies: Iterable[Any],
        *,
        instance_id: str | None = None,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> Transcript:
        """:meth:`play` for synchronous tests."""
        return run_sync(self.play(replies, instance_id=instance_id, prompt=prompt, **kwargs))
