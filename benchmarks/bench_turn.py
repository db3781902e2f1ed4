"""Per-session overhead: one GSM8K session, the documented API against hand-written verl style.

A session is ``start_interaction`` (with a ground truth), a wrong turn, a right
turn and ``finalize_interaction``. The same sessions are driven, inside one
event loop, through the bundled ``interactions_gsm8k.Gsm8kInteraction`` and
through the minimal verl-style class of ``_verl_style.py``; batches alternate
and the ratio of the medians is reported. Goal: at most 1.3x.

The goal is on the bundled class, which must be written the way
``docs/writing-plugins.md`` teaches: ``new_session`` / ``respond`` / ``score`` on
``SessionInteraction``, each turn answered with an ``InteractionResult``. The
benchmark refuses to run if it overrides a lifecycle method, and the row fails if
its turns do not return an ``InteractionResult``, so the figure is what any plugin
author gets, not a private fast path.

Through the public runtime: the same sessions driven by ``EpisodeLoop`` against
calling the instance directly. Goal: at most 1.10x.

Times are the CPU time of the measuring thread (``time.thread_time``): on a
shared machine, time spent descheduled by other processes is not counted, on
either side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from _common import Row, Timed, alternate_calls
from _verl_style import VerlStyleGsm8k

GOAL = 1.3
RUNTIME_GOAL = 1.10
SESSIONS = 2000
REPRODUCE = "python benchmarks/run.py --only turn"
SESSION = "Per session: documented-style `Gsm8kInteraction` / minimal verl-style class"
PER_TURN = (
    "Per session: the same plugin building a new `InteractionResult` every turn "
    "/ minimal verl-style class"
)
EPISODE = "Per episode: runtime `EpisodeLoop` (replay) / direct calls on the instance"
#: The rows this module reports, in order (the docs' table is checked against them).
ROWS = (SESSION, PER_TURN, EPISODE)

WRONG = [
    {"role": "user", "content": "Natalia sold clips to 48 of her friends... How many in all?"},
    {"role": "assistant", "content": "She sold 48 + 48 = 96 clips.\n#### 96"},
]
RIGHT = [
    *WRONG,
    {"role": "user", "content": "Your response is incorrect! Try again."},
    {"role": "assistant", "content": "In May she sold 48 / 2 = 24, so 48 + 24 = 72.\n#### 72"},
]


def session_ids(n: int, tag: str) -> list[str]:
    return [f"{tag}-{i:08d}" for i in range(n)]


async def _direct(interaction: object, ids: list[str]) -> float:
    start_ = interaction.start_interaction  # type: ignore[attr-defined]
    respond = interaction.generate_response  # type: ignore[attr-defined]
    finalize = interaction.finalize_interaction  # type: ignore[attr-defined]
    t0 = time.thread_time()
    for iid in ids:
        await start_(iid, ground_truth="72")
        wrong = await respond(iid, WRONG)
        right = await respond(iid, RIGHT)
        await finalize(iid)
    elapsed = time.thread_time() - t0
    assert wrong[0] is False and right[0] is True and right[2] == 1.0
    return elapsed


def direct_timer(interaction: object, n: int, tag: str) -> Callable[[], float]:
    ids = session_ids(n, tag)

    def measure() -> float:
        return asyncio.run(_direct(interaction, ids))

    return measure


def runtime_rows(repeats: int, n: int) -> list[Row]:
    """Episodes through the public runtime vs the same episodes written by hand."""
    from _episodes import SAMPLE, direct_episode

    from interactions_core.runtime import EpisodeLoop, ReplayPolicy

    title = EPISODE
    from interactions_gsm8k import Gsm8kInteraction

    loop = EpisodeLoop(ReplayPolicy(), {"gsm8k": Gsm8kInteraction({"name": "gsm8k"})})
    direct = Gsm8kInteraction({"name": "gsm8k"})
    ids = session_ids(n, "direct")

    async def through_runtime() -> float:
        t0 = time.thread_time()
        for i in range(n):
            record = await loop.run(SAMPLE, i)
        elapsed = time.thread_time() - t0
        assert record.final_score == 1.0 and record.turns == 2, record.to_dict()
        return elapsed

    async def by_hand() -> float:
        t0 = time.thread_time()
        for iid in ids:
            final = await direct_episode(direct, SAMPLE, iid)
        elapsed = time.thread_time() - t0
        assert final == 1.0
        return elapsed

    timed = alternate_calls(
        lambda: asyncio.run(through_runtime()), lambda: asyncio.run(by_hand()), repeats=repeats
    )
    return [
        Row.at_most(
            title,
            RUNTIME_GOAL,
            timed.ratio,
            f"{timed.a / n * 1e6:.2f} us / {timed.b / n * 1e6:.2f} us per episode "
            f"(2 turns, final score, finalize; medians of {timed.runs} batches of {n:,})",
            REPRODUCE,
        )
    ]


def documented_style(cls: type) -> type:
    """``cls`` itself, after checking it uses only the documented session API."""
    from interactions_core import SessionInteraction

    lifecycle = (
        "start_interaction",
        "generate_response",
        "calculate_score",
        "finalize_interaction",
    )
    overridden = [m for m in lifecycle if getattr(cls, m) is not getattr(SessionInteraction, m)]
    if not issubclass(cls, SessionInteraction) or overridden:
        raise RuntimeError(f"{cls.__qualname__} bypasses SessionInteraction: {overridden}")
    return cls


def turn_result(cls: type) -> object:
    """What one turn of a session of ``cls`` returns (the right answer)."""
    interaction = cls({"name": "gsm8k"})

    async def one_turn() -> object:
        await interaction.start_interaction("probe", ground_truth="72")
        try:
            return await interaction.generate_response("probe", RIGHT)
        finally:
            await interaction.finalize_interaction("probe")

    return asyncio.run(one_turn())


def built_every_turn() -> type:
    """The bundled plugin, its replies built anew on every turn (as varying feedback is)."""
    from interactions_gsm8k import Gsm8kInteraction
    from interactions_gsm8k.interaction import CORRECT_MESSAGE, INCORRECT_MESSAGE

    from interactions_core import InteractionResult, last_assistant_text

    class NewResultEveryTurn(Gsm8kInteraction):
        def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            answer = self.extract(last_assistant_text(messages))
            correct = state.ground_truth is not None and answer == state.ground_truth
            state.last_score = 1.0 if correct else 0.0
            if correct:
                return InteractionResult(True, CORRECT_MESSAGE, 1.0)
            return InteractionResult(False, INCORRECT_MESSAGE, 0.0)

    return NewResultEveryTurn


def session_detail(timed: Timed, n: int) -> str:
    return (
        f"{timed.a / n * 1e6:.2f} us / {timed.b / n * 1e6:.2f} us per session "
        f"(start, wrong turn, right turn, finalize; CPU time, medians of {timed.runs} "
        f"batches of {n:,})"
    )


def run(repeats: int) -> list[Row]:
    from interactions_gsm8k import Gsm8kInteraction

    from interactions_core import InteractionResult

    documented_style(Gsm8kInteraction)
    n = SESSIONS
    # The same session ids on both sides: their hashes decide how the dicts probe.
    verl = direct_timer(VerlStyleGsm8k({"name": "gsm8k"}), n, "session")
    ours = direct_timer(Gsm8kInteraction({"name": "gsm8k"}), n, "session")
    timed = alternate_calls(ours, verl, repeats=repeats * 2)
    row = Row.at_most(SESSION, GOAL, timed.ratio, session_detail(timed, n), REPRODUCE)
    returned = turn_result(Gsm8kInteraction)
    if not isinstance(returned, InteractionResult):
        # Not the documented way: the figure would flatter what plugin authors get.
        row.passed = False
        row.detail += f"; FAIL: a turn returns {type(returned).__name__}, not InteractionResult"
    # The gsm8k replies never change, so they are constants; feedback that varies
    # is built on every turn. That costs more, and is shown beside the goal.
    every_turn = built_every_turn()
    rebuilt = direct_timer(every_turn({"name": "gsm8k"}), n, "session")
    timed_rebuilt = alternate_calls(rebuilt, verl, repeats=repeats * 2)
    detail = session_detail(timed_rebuilt, n) + "; reported beside the goal, not held to it"
    per_turn = Row.report(PER_TURN, timed_rebuilt.ratio, detail, REPRODUCE)
    return [row, per_turn, *runtime_rows(repeats, n)]
