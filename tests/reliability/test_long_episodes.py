"""Episodes of thousands of turns whose calls never wait: the bundled gsm8k plugin
judging a replayed conversation. Each turn copies the whole conversation for the
interaction, so such an episode once held the event loop to its end: the first
stop signal, the other episodes and the progress line waited for it (8,000 turns:
34 s on a loaded machine).

Each test failed before the episode loop let others run while it plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import signal
from pathlib import Path
from typing import Any

from core_helpers import signal_when

from interactions_core import BaseInteraction, InteractionResult, load_interactions
from interactions_core.cli import main
from interactions_core.runtime import EpisodeLoop, ReplayPolicy


def _long_sample(turns: int) -> dict[str, Any]:
    """A gsm8k sample whose replayed answer is wrong on every one of ``turns`` turns."""
    return {
        "prompt": [{"role": "user", "content": "What is 2 + 2?"}],
        "responses": ["The answer is #### 5"] * turns,
        "interaction_kwargs": {"name": "gsm8k", "ground_truth": "4"},
    }


def _gsm8k_loop() -> EpisodeLoop:
    interactions = load_interactions({"interaction": [{"name": "gsm8k"}]})
    return EpisodeLoop(ReplayPolicy(), interactions)


async def test_a_long_episode_lets_the_event_loop_run_others() -> None:
    turns = 2000  # about 0.8 s of copying on a quiet machine
    task = asyncio.create_task(_gsm8k_loop().run(_long_sample(turns)))
    ticks = 0
    while not task.done():
        await asyncio.sleep(0)
        ticks += 1
    record = task.result()
    # the episode is whole: every turn judged, the conversation as the policy saw it
    assert record.end_reason == "exhausted" and record.turns == turns
    assert len(record.scores) == turns and len(record.messages) == 1 + 2 * turns
    # before: the episode ran to its end in one step of the loop (at most 2 ticks)
    assert ticks >= 4, ticks


def test_the_first_stop_signal_ends_a_long_episode_at_once(tmp_path: Path) -> None:
    turns = 6000  # several seconds of copying: the signal must not wait for them
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps(_long_sample(turns)) + "\n", encoding="utf-8")
    config = tmp_path / "gsm8k.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n", encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    output = tmp_path / "records.jsonl"
    command = ["run", str(config), "--data", str(data), "--no-progress"]
    command += ["--trace", str(trace), "--output", str(output)]

    def judging() -> bool:
        return trace.exists() and trace.read_bytes().count(b'"event": "turn"') >= 50

    code, out, err = signal_when(command, judging, signal.SIGINT)
    text = out.decode() + err.decode()
    assert code == 130, text
    assert "Traceback" not in text, text
    judged = [
        json.loads(line)["turn"]
        for line in trace.read_bytes().splitlines()
        if b'"event": "turn"' in line
    ]
    # before: the signal waited for the episode's end, so all 6,000 turns were judged
    assert 50 <= max(judged) < turns, max(judged)
    # the interrupted episode is not recorded as played: --resume plays it again
    assert output.read_bytes() == b"", output.read_bytes()[:300]


def test_the_text_summary_of_long_episodes_stays_a_few_lines(tmp_path: Path) -> None:
    # episodes of 1 to 300 turns: before, "score by turn" printed 300 entries and the
    # turn histogram 30
    data = tmp_path / "long.jsonl"
    lengths = [1 + 10 * i for i in range(30)] + [300]
    data.write_text("".join(json.dumps(_long_sample(n)) + "\n" for n in lengths), "utf-8")
    config = tmp_path / "gsm8k.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n", encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", str(config), "--data", str(data), "--no-progress"])
    assert code == 0
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) < 160, max(lines, key=len)
    by_turn = next(line for line in lines if line.startswith("score by turn"))
    assert "1: 0.000" in by_turn and "...  300: 0.000" in by_turn, by_turn
    histogram = next(line for line in lines if line.startswith("assistant turns"))
    assert "1: 1" in histogram and "...  300: 1" in histogram, histogram
    # --json keeps every turn
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["run", str(config), "--data", str(data), "--no-progress", "--json"])
    summary = json.loads(out.getvalue())
    assert len(summary["score_by_turn"]) == 300, sorted(summary)


class _Counting(BaseInteraction):
    """Never ends an episode; counts the turns it judged, by session."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.judged: dict[str, int] = {}

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        self.judged[instance_id] = self.judged.get(instance_id, 0) + 1
        return InteractionResult(False, "go on", 0.0)


async def test_a_stopping_run_stops_every_long_episode_at_its_next_turn_of_the_loop() -> None:
    # Each long episode yields every 50 ms; the cancellation of a stopping run reached a
    # task only after every long episode ahead of it in the loop's queue had held the loop
    # 50 ms again (400 episodes: a first Ctrl-C took 7.4 s). Now an episode that resumes
    # in a stopping run stops there: no turn is judged after the stop.
    counting = _Counting({"name": "count"})
    loop = EpisodeLoop(ReplayPolicy(), {"count": counting})
    stopping = [False]
    loop.stopping = lambda: stopping[0]
    sample = {**_long_sample(200_000), "interaction_kwargs": {"name": "count"}}
    tasks = [asyncio.create_task(loop.run(sample, i)) for i in range(4)]
    while len(counting.judged) < 4 or min(counting.judged.values()) < 50:
        await asyncio.sleep(0)
    stopping[0] = True  # what the stop signal's handler sets, at once; then, as the run's
    # cancellation does, the tasks are cancelled from a callback behind those ready to run
    asyncio.get_running_loop().call_soon(lambda: [task.cancel() for task in tasks])
    before = dict(counting.judged)
    ended = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(type(e) is asyncio.CancelledError for e in ended), ended
    assert counting.judged == before, (before, counting.judged)


class _Trimming(ReplayPolicy):
    """Replies for ever, keeping only the last message of the conversation: an episode of
    a hundred thousand turns in seconds."""

    def start(self, sample: Any, repeat: int = 0) -> Any:
        return None

    def reply(self, state: Any, messages: list[dict[str, Any]]) -> str:
        del messages[:-1]
        return "again"


async def test_an_episode_without_a_limit_ends_at_the_turns_a_record_holds() -> None:
    # An episode ran on past 100,000 turns, and its record was one that --resume and
    # `interactions report` refuse ("'turns' is 100001, not a whole number from 0 to 100,000").
    from interactions_core.runtime.record import MAX_TURNS, record_problem

    loop = EpisodeLoop(_Trimming(), {"count": _Counting({"name": "count"})})
    sample = {"prompt": [{"role": "user", "content": "q"}], "interaction_kwargs": {"name": "count"}}
    record = await loop.run(sample)
    assert record.turns == MAX_TURNS and record.end_reason == "max_assistant_turns"
    assert record_problem(record.to_dict()) is None


def test_a_turn_limit_over_the_turns_a_record_holds_is_refused(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(ValueError, match="at most 100,000"):
        EpisodeLoop(ReplayPolicy(), {}, max_assistant_turns=100_001)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        main(["run", "--max-assistant-turns", "100001"])
    assert "must be at most 100,000" in err.getvalue(), err.getvalue()
