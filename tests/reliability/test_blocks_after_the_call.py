"""Plugin code the runtime runs on what a call returned, or between calls.

The runtime checks a call's result after the plugin's coroutine returns (a ``str``
subclass's ``__bool__``, a ``tuple`` subclass's ``__iter__``, a score's ``__float__``),
and a policy's ``reply`` is plugin code outside every interaction call. A block there
was named and broken, but charged to no call, so the episodes awaiting beside it
timed out as if the time had been theirs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli_fault_pass import child_run, read_lines, write_plugin
from test_cli_fault_pass_late import _sixteen_under_timeout_1, write_rows

pytestmark = [
    pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR2"), reason="no SIGUSR2 here"),
    pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 counts the time"),
]

SLOW_RETURNS = '''
import asyncio
import time

from interactions_core import BaseInteraction, InteractionResult


class SlowTuple(tuple):
    def __iter__(self):
        time.sleep(5)
        return tuple.__iter__(self)


class SlowFloat(float):
    def __float__(self):
        time.sleep(5)
        return float.__float__(self)


class SlowId(str):
    def __bool__(self):
        time.sleep(5)
        return True

    def __len__(self):
        time.sleep(5)
        return str.__len__(self)

    def __hash__(self):
        time.sleep(5)
        return str.__hash__(self)


class Q8(BaseInteraction):
    """Every call awaits 0.05 s; the subclasses return a slow object for q8's session."""

    def __init__(self, config=None):
        super().__init__(config)
        self.q8 = set()

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        if messages[0]["content"] == "q8":
            self.q8.add(instance_id)
        return self.result(instance_id)

    def result(self, instance_id):
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        await asyncio.sleep(0.05)
        return 1.0


class SlowResult(Q8):
    def result(self, instance_id):
        if instance_id in self.q8:
            return SlowTuple((True, "ok", 1.0, {}))
        return InteractionResult(True, "ok", 1.0)


class SlowScore(Q8):
    async def calculate_score(self, instance_id, **kwargs):
        await asyncio.sleep(0.05)
        return SlowFloat(1.0) if instance_id in self.q8 else 1.0


STARTS = iter(range(10**6))


class SlowStart(Q8):
    """The ninth session's id is a str subclass whose every method blocks."""

    async def start_interaction(self, instance_id=None, **kwargs):
        await asyncio.sleep(0.05)
        return SlowId(instance_id) if next(STARTS) == 8 else instance_id
'''


@pytest.mark.parametrize(
    ("cls", "where"),
    [("SlowResult", "SlowTuple.__iter__"), ("SlowScore", "SlowFloat.__float__")],
)
def test_a_block_in_what_a_call_returned_is_that_calls_alone(
    tmp_path: Path, cls: str, where: str
) -> None:
    """The result's ``__iter__`` and the score's ``__float__`` ran after the call, so the
    block was no call's: q8's was broken, and the episodes awaiting beside it timed out."""
    done, out = _sixteen_under_timeout_1(tmp_path, "slow_returns", SLOW_RETURNS, cls)
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [r["index"] for r in errored] == [8], errored
    assert f"{where} blocked the event loop" in done.stderr


def test_a_session_id_of_a_str_subclass_is_kept_as_plain_text(tmp_path: Path) -> None:
    """``bool()`` on the id ran its ``__bool__`` after the call; the id is now copied as a
    plain ``str`` (no method of the plugin's runs), so no episode blocks or fails."""
    done, out = _sixteen_under_timeout_1(tmp_path, "slow_returns", SLOW_RETURNS, "SlowStart")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 0), done.stderr
    assert "blocked the event loop" not in done.stderr
    assert len(read_lines(out)) == 16


SLOW_POLICY = '''
import time

from interactions_core.runtime.policies.base import Policy


class SlowPolicy(Policy):
    """Replies at once, but blocks the event loop 5 s before its reply to q8."""

    def reply(self, state, messages):
        if messages[-1]["role"] != "user":
            return None
        if messages[0]["content"] == "q8":
            time.sleep(5)
        return "a"
'''

AWAITS = """
import asyncio

from interactions_core import BaseInteraction, InteractionResult


class Awaits(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.5)
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
"""


@pytest.fixture
def installed(make_dist, site_dir: Path, tmp_path: Path) -> Any:
    """``installed(entry_points, modules)``: install a distribution of them, and return
    ``run(policy, *options)``, which plays the 16 rows by ``policy`` against an interaction
    awaiting 0.5 s in a child process: the finished process and its records."""
    import os
    import subprocess

    config = tmp_path / "c.yaml"
    config.write_text(
        "default: p\ninteraction:\n  - name: p\n    class_name: acme_awaits.Awaits\n",
        encoding="utf-8",
    )
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 16)

    def run(policy: str, *options: str) -> tuple[Any, list[dict[str, Any]]]:
        out.unlink(missing_ok=True)
        done = subprocess.run(
            [
                *(sys.executable, "-m", "interactions_core", "run", str(config)),
                *("--data", str(data), "--policy", policy, "--concurrency", "16", "--json"),
                *("--output", str(out), *options),
            ],
            env={**os.environ, "PYTHONPATH": str(site_dir)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done, read_lines(out)

    def install(entry_points: dict[str, dict[str, str]], modules: dict[str, str]) -> Any:
        make_dist("acme-odd", "1.0", entry_points, {**modules, "acme_awaits": AWAITS})
        return run

    return install


def test_a_policy_blocking_the_loop_fails_its_own_episode_only(installed: Any) -> None:
    """A policy's reply is no interaction call: its 1 s block (broken under --timeout 1)
    was charged to no one, and the 8 calls awaiting 0.5 s beside it timed out."""
    run = installed(
        {"interactions_core.policies": {"slow": "acme_slow_policy:SlowPolicy"}},
        {"acme_slow_policy": SLOW_POLICY},
    )
    done, records = run("slow", "--timeout", "1")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in records if r["errors"]]
    assert [r["index"] for r in errored] == [8], errored
    assert "SlowPolicy.reply blocked the event loop" in done.stderr


ODD_EXTRAS = '''
import asyncio
import time

from interactions_core import BaseInteraction, InteractionResult


class Raises:
    """A value whose text is a stop of some kind."""

    error = GeneratorExit

    def __str__(self):
        raise self.error


class Cancels(Raises):
    error = asyncio.CancelledError


class Exits(Raises):
    error = SystemExit(3)


class Slow:
    def __str__(self):
        time.sleep(0.005)
        return "s"


class OddExtra(BaseInteraction):
    """Every call awaits 0.05 s; q8's turn returns ``make()`` in its extra."""

    make = staticmethod(lambda: Raises())

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        extra = {"v": self.make()} if messages[0]["content"] == "q8" else {"v": 1}
        return InteractionResult(True, "ok", 1.0, extra)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0


class CancelsExtra(OddExtra):
    make = staticmethod(lambda: Cancels())


class ExitsExtra(OddExtra):
    make = staticmethod(lambda: Exits())


class SlowExtra(OddExtra):
    """2,000 values made text one at a time, 5 ms each: 10 s in small pieces."""

    make = staticmethod(lambda: [Slow() for _ in range(2000)])


class SlowMessage(Exception):
    def __str__(self):
        time.sleep(5)
        return "slow"


class SlowError(OddExtra):
    """q8's call raises an exception whose message takes 5 s to tell."""

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        if messages[0]["content"] == "q8":
            raise SlowMessage()
        return InteractionResult(True, "ok", 1.0)
'''


@pytest.mark.parametrize("cls", ["OddExtra", "CancelsExtra", "ExitsExtra"])
def test_a_value_in_an_extra_that_raises_a_stop_costs_its_episode_only(
    tmp_path: Path, cls: str
) -> None:
    """The records writer made the value text and let its GeneratorExit, CancelledError or
    SystemExit through: the run ended there as if the data were exhausted (or "ended by
    SystemExit"), the episode counted but its record never written, and every --resume
    stopped at the same row."""
    done, out = _sixteen_under_timeout_1(tmp_path, "odd_extras", ODD_EXTRAS, cls)
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    records = read_lines(out)
    assert sorted(r["index"] for r in records) == list(range(16))
    errored = [r for r in records if r["errors"]]
    assert [(r["index"], r["errors"][0]["where"]) for r in errored] == [(8, "extras")], errored
    assert "cannot be written as JSON" in errored[0]["errors"][0]["message"]
    assert "extras" not in errored[0] and records[0]["extras"] == [{"v": 1}]


def test_plugin_code_the_runtime_runs_piece_by_piece_is_one_block(tmp_path: Path) -> None:
    """2,000 values of q8's extra, made text by the records writer one 5 ms ``__str__`` at a
    time: each a new frame, the 10 s were never named nor broken, an episode beside it
    timed out, and Ctrl-C waited for the end."""
    done, out = _sixteen_under_timeout_1(tmp_path, "odd_extras", ODD_EXTRAS, "SlowExtra")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [(r["index"], r["errors"][0]["type"]) for r in errored] == [(8, "LoopBlocked")]
    assert "odd_extras.Slow.__str__ blocked the event loop" in done.stderr


def test_an_error_slow_to_tell_its_message_fails_its_episode_only(tmp_path: Path) -> None:
    """The runtime reads an error's message after the call failed: its 5 s ``__str__`` was
    broken, but charged to no call, and the episodes beside it timed out."""
    done, out = _sixteen_under_timeout_1(tmp_path, "odd_extras", ODD_EXTRAS, "SlowError")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in read_lines(out) if r["errors"]]
    assert [r["index"] for r in errored] == [8], errored


ODD_MESSAGES = '''
import time

from interactions_core import hookimpl
from interactions_core.runtime.policies.base import Policy


class Raises:
    def __str__(self):
        raise GeneratorExit

    __repr__ = __str__


class Slow:
    def __str__(self):
        time.sleep(0.005)
        return "s"


def odd(kind):
    return Raises() if kind == "raises" else [Slow() for _ in range(2000)]


class Adds(Policy):
    """Replies "a"; before its reply to q8 it adds a note whose content is an odd object."""

    kind = "raises"

    def reply(self, state, messages):
        if messages[-1]["role"] != "user":
            return None
        if messages[0]["content"] == "q8":
            messages.append({"role": "note", "content": odd(self.kind)})
        return "a"


class AddsSlow(Adds):
    kind = "slow"


class Sly(str):
    """Text whose every method of its own stops the run."""

    def __len__(self):
        raise GeneratorExit

    __str__ = __repr__ = __eq__ = __hash__ = __getitem__ = __len__


class AddsText(Policy):
    """Before its reply to q8 it adds a note of ``str`` subclasses; to q10, a huge number."""

    def reply(self, state, messages):
        if messages[-1]["role"] != "user":
            return None
        if messages[0]["content"] == "q8":
            messages.append({"role": Sly("note"), "content": Sly("text")})
        if messages[0]["content"] == "q10":
            messages.append({"role": "note", "content": 10**5000})
        return "a"


@hookimpl
def on_session_end(record, error):
    if record.messages[0]["content"] == "q9":  # after the episode: an odd extra
        record.extras = [{"v": Raises()}]
'''


@pytest.fixture
def odd_messages(installed: Any) -> Any:
    """``run(policy, *options)`` with the policies ``adds`` and ``adds-slow`` and the hook."""
    return installed(
        {
            "interactions_core.policies": {
                "adds": "acme_odd_messages:Adds",
                "adds-slow": "acme_odd_messages:AddsSlow",
                "adds-text": "acme_odd_messages:AddsText",
            },
            "interactions_core.plugins": {"odd": "acme_odd_messages"},
        },
        {"acme_odd_messages": ODD_MESSAGES},
    )


def test_an_odd_object_a_policy_or_hook_leaves_in_a_record_costs_its_episode(
    odd_messages: Any,
) -> None:
    """A message whose text raises GeneratorExit, added by the policy, and an extra set by
    an on_session_end hook after the episode's checks, reached the records writer: the run
    ended there ("ended by GeneratorExit ... after 9 episode(s)", 8 records), and every
    --resume stopped at the same row."""
    done, records = odd_messages("adds")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 2), done.stderr
    assert sorted(r["index"] for r in records) == list(range(16))
    errored = {r["index"]: r["errors"][0]["where"] for r in records if r["errors"]}
    assert errored == {8: "messages", 9: "extras"}, errored


def test_values_a_policy_adds_made_text_piece_by_piece_are_its_episodes_block(
    odd_messages: Any,
) -> None:
    """2,000 values of 5 ms each in a note the policy added were made text by the records
    writer, outside every episode: 10 s never named nor broken, and the 7 episodes still
    awaiting beside it timed out."""
    done, records = odd_messages("adds-slow", "--timeout", "1")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 2), done.stderr
    errored = {r["index"]: r["errors"][0]["type"] for r in records if r["errors"]}
    assert errored == {8: "LoopBlocked", 9: "GeneratorExit"}, errored
    assert "acme_odd_messages.Slow.__str__ blocked the event loop" in done.stderr


def test_text_a_policy_adds_of_a_str_subclass_or_a_huge_number_is_kept_plain(
    odd_messages: Any, tmp_path: Path
) -> None:
    """A ``str`` subclass (role and content) and a 5,000-digit number in a note the policy
    added passed the plain-data check as they were: the --report page's views ran the
    subclass's methods (its GeneratorExit ended the run after 1 episode of 16, and each
    --resume gained one) and could not print the number."""
    page = tmp_path / "r.html"
    done, records = odd_messages("adds-text", "--report", str(page))
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr  # q9: the hook
    assert sorted(r["index"] for r in records) == list(range(16))
    notes = {r["index"]: m for r in records for m in r["messages"] if m["role"] == "note"}
    assert notes[8] == {"role": "note", "content": "text"}
    assert notes[10]["content"].startswith("<integer of")
    assert page.stat().st_size > 0


SHARED_PARTS = '''
import asyncio

from interactions_core import BaseInteraction, InteractionResult


class SharedParts(BaseInteraction):
    """q8's extra is 41 lists, each holding the next twice: 2**40 values written out."""

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        if messages[0]["content"] != "q8":
            return InteractionResult(True, "ok", 1.0, {"v": [1]})
        shared = [0]
        for _ in range(40):
            shared = [shared, shared]
        return InteractionResult(True, "ok", 1.0, {"v": shared})

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0


class SharedText(SharedParts):
    """q8's extra holds one 1 MB string 300 times: 300 MB as JSON writes it."""

    value, times = "a" * 1_000_000, 300

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        if messages[0]["content"] != "q8":
            return InteractionResult(True, "ok", 1.0, {"v": [1]})
        return InteractionResult(True, "ok", 1.0, {"v": [self.value] * self.times})


class SharedShortText(SharedText):
    """One string just under 4 KiB, 100,000 times: 400 MB from an 800 KB list."""

    value, times = "a" * 4095, 100_000


class SharedNumber(SharedText):
    """One 3,900-digit number, 50,000 times: 195 MB of digits."""

    value, times = 10**3900, 50_000


class SharedKey(SharedText):
    """One 1 MB key, in 300 small mappings: 300 MB of keys."""

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        if messages[0]["content"] != "q8":
            return InteractionResult(True, "ok", 1.0, {"v": [1]})
        key = "k" * 1_000_000
        return InteractionResult(True, "ok", 1.0, {"v": [{key: 0} for _ in range(300)]})


class ManyNumbers(SharedText):
    """One float 10,000,000 times: 260 MB written out from an 80 MB list."""

    value, times = -1.7976931348623157e308, 10_000_000


class LongToWrite(SharedText):
    """One float 2,000,000 times: a 52 MB line, seconds of the writer's own work."""

    value, times = -1.7976931348623157e308, 2_000_000


class ShortRepeated(SharedText):
    """A 31-character string 5,000,000 times: 170 MB written from a 40 MB list."""

    value, times = "s" * 31, 5_000_000
'''


def _play_shared(tmp_path: Path, cls: str, *options: str) -> tuple[Any, list[Any]]:
    """The 16 rows played by ``cls`` of :data:`SHARED_PARTS` with ``--output`` and
    ``options`` in a child process: the finished process and its records."""
    import subprocess

    config = write_plugin(tmp_path, "shared_parts", SHARED_PARTS, cls)
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 16)
    command, env = child_run(tmp_path, config, data)
    done = subprocess.run(
        [*command, "--output", str(out), "--json", *options],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, read_lines(out)


def test_an_extra_sharing_its_parts_many_times_over_is_refused(tmp_path: Path) -> None:
    """41 small lists sharing one another (2**40 values as JSON writes them) were copied
    again at every reference: memory grew past 780 MB at full CPU, silently, and neither
    --timeout nor the first Ctrl-C stopped it. The extra is refused, that episode's error;
    the --trace turn line refuses it the same way."""
    trace = tmp_path / "t.jsonl"
    done, records = _play_shared(tmp_path, "SharedParts", "--trace", str(trace))
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in records if r["errors"]]
    assert [r["index"] for r in errored] == [8], errored
    messages = " ".join(e["message"] for e in errored[0]["errors"])
    assert "values" in messages and "cannot be written as JSON" in messages, messages
    assert trace.stat().st_size < 1 << 20


@pytest.mark.parametrize(
    "cls",
    ["SharedText", "SharedShortText", "SharedNumber", "SharedKey", "ShortRepeated", "ManyNumbers"],
)
def test_an_extra_repeating_one_long_text_is_refused(tmp_path: Path, cls: str) -> None:
    """One 1 MB string 300 times in q8's extra (a 2 KB list): the writer built the 300 MB
    line in memory before cutting it (912 MB of memory; 1.8 GB at 600 times), and said
    nothing of the extras it then dropped; a string just under 4 KiB or a 3,900-digit
    number, repeated, passed the check as plain data and did the same on the loop, timing
    out the episodes beside it (1.2 GB), and so did a long key shared by many mappings
    (1.8 GB) and a short string repeated millions of times (14 times the plugin's own
    memory). It is refused, that episode's error."""
    done, records = _play_shared(tmp_path, cls, "--timeout", "5")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 1), done.stderr
    errored = [r for r in records if r["errors"]]
    assert [r["index"] for r in errored] == [8], errored
    assert "MiB of text" in errored[0]["errors"][0]["message"]
    assert (tmp_path / "o.jsonl").stat().st_size < 1 << 20


def test_the_writers_own_work_on_a_long_record_times_out_no_one(tmp_path: Path) -> None:
    """Writing out q8's 52 MB record held the loop for seconds, with no plugin code on the
    stack: charged to no call, so the episodes awaiting beside it timed out under
    --timeout 1. It is charged to the record's own delivery now, never named nor broken."""
    done, records = _play_shared(tmp_path, "LongToWrite", "--timeout", "1")
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, 0), done.stderr
    assert len(records) == 16
    assert "blocked the event loop" not in done.stderr


HUGE_ERROR = '''
from interactions_core import BaseInteraction, InteractionResult


class HugeError(BaseInteraction):
    """q1's call raises an error whose message is 65 MiB."""

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q1":
            raise ValueError("x" * (65 << 20))
        return InteractionResult(True, "ok", 1.0)

    async def calculate_score(self, instance_id, **kwargs):
        return 1.0
'''


def test_an_error_message_of_megabytes_leaves_a_record_its_readers_take(tmp_path: Path) -> None:
    """A 65 MiB error message was kept whole in the record (a 68 MB line, over the readers'
    64 MiB bound): --resume and --retry-errors refused the run's own records file, and
    `interactions report` counted 2 episodes of 3; the --json summary was 68 MB."""
    import subprocess

    config = write_plugin(tmp_path, "huge_error", HUGE_ERROR, "HugeError")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    write_rows(data, 3)
    command, env = child_run(tmp_path, config, data)
    done = subprocess.run(
        [*command, "--output", str(out), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert len(done.stdout) < 1 << 20 and json.loads(done.stdout)["errors"] == 1
    message = next(r for r in read_lines(out) if r["errors"])["errors"][0]["message"]
    assert len(message) < 20_000 and "more characters]" in message
    for again in ("--resume", "--retry-errors"):
        rerun = subprocess.run(
            [*command, "--output", str(out), again],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "not a record" not in rerun.stderr, rerun.stderr


def test_a_record_with_an_id_or_errors_of_megabytes_is_cut_to_fit_its_line() -> None:
    """shorten_record cut only the conversation: an id of megabytes (the sample's, or the
    session id a plugin's start_interaction chose: 72 MB lines the run's own --resume
    refused), or a great many long errors, left a line over the bound every reader of
    records refuses."""
    from interactions_core.runtime.record import shorten_record

    limit = 1 << 20
    record = {
        "index": 0,
        "sample_id": "a" * (2 * limit),
        "instance_id": "\x01" * limit,  # a plugin's choice: 6 bytes a character written
        "messages": [{"role": "user", "content": "q"}],
        "errors": [{"where": "x", "message": "m" * 100_000} for _ in range(100)],
        "usage": {"note": "u" * (2 * limit)},
        "turns": 1,
    }
    short = shorten_record(record, limit)
    assert len(json.dumps(short)) <= limit
    assert short["index"] == 0 and short["turns"] == 1 and len(short["errors"]) == 21


def test_ids_of_astral_characters_with_a_lone_surrogate_are_cut_to_fit_the_line() -> None:
    # A lone surrogate makes the whole line ASCII JSON, where a character outside the BMP
    # takes 12 bytes: two ids cut to limit // 16 characters made a line of 1.5 times the
    # limit (100.7 MB), which the run's own --resume and `report` refused.
    from interactions_core.runtime.record import shorten_record
    from interactions_core.runtime.records import encode_line

    limit = 1 << 20
    astral = "\udc80" + "\U0001f600" * (limit // 4)
    record = {
        "index": 3,
        "sample_id": astral,
        "instance_id": astral,
        "messages": [{"role": "user", "content": astral}],
        "errors": [{"where": "x", "message": astral}],
        "scores": [0.5, 1.0],
        "turns": 2,
        "end_reason": "terminated",
        "final_score": 1.0,
    }
    short = shorten_record(record, limit)
    line = encode_line(json.dumps(short, ensure_ascii=False), short)
    assert len(line) <= limit, len(line)
    assert json.loads(line)["sample_id"].startswith("\udc80\U0001f600")
    kept = {k: short[k] for k in ("index", "turns", "scores", "end_reason", "final_score")}
    assert kept == {"index": 3, "turns": 2, "scores": [0.5, 1.0], "end_reason": "terminated",
                    "final_score": 1.0}  # fmt: skip
    assert len(short["errors"]) == 1


def test_an_id_of_another_kind_is_cut_to_fit_the_line_too() -> None:
    # A dataset's id may be a list or an object: only text ids were cut, and a list id of
    # astral characters made a 72 MB line the run's own --resume refused.
    from interactions_core.runtime.record import shorten_record
    from interactions_core.runtime.records import encode_line

    limit = 1 << 20
    astral = "\udc80" + "\U0001f600" * (limit // 4)
    for sample_id in ([astral], {"id": astral}):
        record = {"index": 1, "sample_id": sample_id, "turns": 1, "scores": [1.0]}
        short = shorten_record(record, limit)
        line = encode_line(json.dumps(short, ensure_ascii=False), short)
        assert len(line) <= limit, len(line)
        assert short["turns"] == 1 and short["scores"] == [1.0]
    small = shorten_record({"index": 1, "sample_id": [1, "a"], "turns": 0}, limit)
    assert small["sample_id"] == [1, "a"]  # a short id of any kind stays as it is


HOSTILE_TEXT = '''
import asyncio

from interactions_core import BaseInteraction, InteractionResult


class Name(str):
    """Text that stops whoever formats or compares it later."""

    __hash__ = str.__hash__

    def __str__(self):
        return self

    def __format__(self, spec):
        raise GeneratorExit("from __format__")

    def __eq__(self, other):
        raise GeneratorExit("from __eq__")


class Meta(type):
    @property
    def __name__(cls):
        return Name("Odd")


class OddStop(BaseException, metaclass=Meta):
    pass


class Stopper:
    def __str__(self):
        raise OddStop()


class Liar(str):
    """Text that says it is 10 characters long, and takes over what it is added to."""

    def __len__(self):
        return 10

    def __radd__(self, other):
        return self


class BigStop(BaseException):
    def __str__(self):
        return Liar("B" * 200_000)


class BigStopper:
    def __str__(self):
        raise BigStop()


class Key:
    def __str__(self):
        return Name("usage")


class Score:
    """A score whose ``__class__`` says float (as ``MagicMock(spec=float)``'s does)."""

    __class__ = property(lambda self: float)

    def __float__(self):
        return 0.5


class Inner(Exception):
    """An exception whose class cannot even be asked for."""

    @property
    def __class__(self):
        raise KeyboardInterrupt("from Inner.__class__")


class Outer(BaseException):
    def __str__(self):
        raise Inner()


class Unprintable:
    def __str__(self):
        raise Outer()


class StrKI(Exception):
    """An error whose message is a KeyboardInterrupt of its own."""

    def __str__(self):
        raise KeyboardInterrupt("from __str__")


class StrGE(Exception):
    def __str__(self):
        raise GeneratorExit("from __str__")


class Hostile(BaseInteraction):
    """Every call awaits 0.05 s; q8's turn returns ``make()``'s extra and score."""

    score = 1.0

    @staticmethod
    def make():
        return {"v": 1}

    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(0.05)
        if messages[0]["content"] == "q8":
            return InteractionResult(True, "ok", self.score, self.make())
        return InteractionResult(True, "ok", 1.0, {"v": 1})

    async def calculate_score(self, instance_id, **kwargs):
        return self.score


class StopperExtra(Hostile):
    make = staticmethod(lambda: {"v": Stopper()})


class BigMessageExtra(Hostile):
    make = staticmethod(lambda: {"v": BigStopper()})


class FinalizeStrKI(Hostile):
    """q8's finalize raises an error whose ``__str__`` raises ``KeyboardInterrupt``."""

    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q8":
            self.marked = instance_id
        return await super().generate_response(instance_id, messages, **kwargs)

    async def finalize_interaction(self, instance_id, **kwargs):
        if getattr(self, "marked", None) == instance_id:
            raise StrKI()


class RespondStrGE(Hostile):
    async def generate_response(self, instance_id, messages, **kwargs):
        if messages[0]["content"] == "q8":
            raise StrGE()
        return await super().generate_response(instance_id, messages, **kwargs)


class UnprintableExtra(Hostile):
    make = staticmethod(lambda: {"v": Unprintable()})


class KeyExtra(Hostile):
    make = staticmethod(lambda: {Key(): []})


class LyingScore(Hostile):
    score = Score()
'''


@pytest.mark.parametrize(
    ("cls", "errors"),
    [
        ("StopperExtra", 1),
        ("BigMessageExtra", 1),
        ("UnprintableExtra", 1),
        ("FinalizeStrKI", 1),  # the run ended after 3 episodes "by KeyboardInterrupt"
        ("RespondStrGE", 1),
        ("KeyExtra", 0),
        ("LyingScore", 0),
    ],
)
def test_text_and_scores_that_lie_about_themselves_are_kept_plain(
    tmp_path: Path, cls: str, errors: int
) -> None:
    """A ``__str__`` may return a ``str`` subclass, and a class's ``__name__`` or an
    object's ``__class__`` may say anything: such text was kept as the record's error, an
    extra's key, and such an object as the score, and their methods ran later in the
    summary (the run ended "by GeneratorExit" after 3 episodes, 2 records written, and
    every --resume stopped there), or a message said it was 10 characters long and was
    kept whole (a 73 MB line the run's own --resume refused). Text is copied as plain
    ``str`` and a class named by ``type``'s own descriptor; a score is a float by
    ``type()``."""
    done, out = _sixteen_under_timeout_1(tmp_path, "hostile_text", HOSTILE_TEXT, cls)
    assert done.returncode == (1 if errors else 0), done.stderr
    summary = json.loads(done.stdout)
    assert (summary["episodes"], summary["errors"]) == (16, errors), done.stderr
    records = read_lines(out)
    assert sorted(r["index"] for r in records) == list(range(16))
    q8 = records[[r["index"] for r in records].index(8)]
    if cls in ("FinalizeStrKI", "RespondStrGE"):
        where, kind = {
            "FinalizeStrKI": ("finalize_interaction", "StrKI"),
            "RespondStrGE": ("generate_response", "StrGE"),
        }[cls]
        assert [(e["where"], e["type"]) for e in q8["errors"]] == [(where, kind)], q8
        assert "its __str__ raised" in q8["errors"][0]["message"], q8["errors"]
    elif errors:
        assert [e["where"] for e in q8["errors"]] == ["extras"], q8["errors"]
        assert len(q8["errors"][0]["message"]) < 10_200, len(q8["errors"][0]["message"])
        assert q8["errors"][0]["type"] in ("OddStop", "BigStop", "Outer"), q8["errors"]
    elif cls == "KeyExtra":
        assert q8["extras"] == [{"usage": []}], q8
    else:
        assert (q8["scores"], q8["final_score"]) == ([0.5], 0.5), q8
    assert "Traceback" not in done.stderr


def test_an_errors_text_is_kept_though_its_dict_is_a_property() -> None:
    """The text read inside the call was kept in the exception's ``__dict__``; one whose
    ``__dict__`` is a property threw it away, so the message was asked again after the
    call, outside its bounds (a slow second ``__str__`` closed a served client's
    connection without a word)."""
    from interactions_core.errors import exception_text, keep_text

    class DictProp(Exception):
        calls = 0

        @property
        def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
            return {}

        def __str__(self) -> str:
            type(self).calls += 1
            return f"told {type(self).calls} time(s)"

    error = DictProp()
    keep_text(error)
    assert exception_text(error) == exception_text(error) == "told 1 time(s)"


def test_a_mapping_of_a_plugins_is_counted_as_its_items_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mapping's ``items()`` was copied whole before any value was counted: an endless
    one took 5.25 GB in the second before ``--timeout 1`` broke it, and without a
    timeout it ran until memory ran out (a ``MemoryError`` swallowed, exit 0)."""
    from collections.abc import Iterator, Mapping

    from interactions_core import _files

    monkeypatch.setattr(_files, "MAX_VALUES", 10_000)
    pulled = [0]

    class Long(Mapping[int, int]):
        def __getitem__(self, key: int) -> int:
            return 1

        def __len__(self) -> int:
            return 2_000_000

        def __iter__(self) -> Iterator[int]:
            return iter(range(2_000_000))

        def items(self) -> Any:
            for i in range(2_000_000):
                pulled[0] += 1
                yield i, 1

    with pytest.raises(ValueError, match="values"):
        _files.json_safe({"v": Long()}, text=True)
    assert pulled[0] <= 10_000, pulled[0]


SLOW_STATE = '''
import time

from interactions_core import InteractionResult, SessionInteraction


class SlowDel:
    def __del__(self):
        time.sleep(3)


class RaisingDel:
    def __del__(self):
        raise RuntimeError("del boom \\x1b[31mRED")


class Holder:
    def __init__(self, kind):
        self.resource = kind()


class SlowState(SessionInteraction):
    """Its session state holds a resource whose __del__ blocks (or raises)."""

    def new_session(self, **kwargs):
        return Holder(RaisingDel if kwargs.get("raising") else SlowDel)

    async def respond(self, state, messages, **kwargs):
        return InteractionResult(True, "ok", 1.0)

    async def score(self, state, **kwargs):
        return 1.0
'''


def test_a_state_slow_to_drop_fails_every_episode_alike_and_is_told_in_a_line(
    tmp_path: Path,
) -> None:
    """Three identical episodes whose state's __del__ blocks 3 s under --timeout 1: the
    first was recorded as timed out and the others as fine (the first block was charged up
    to the next heartbeat, forgiving the next episode's finalize the rest), and each
    break printed Python's "Exception ignored in" traceback of the runtime's LoopBlocked."""
    import subprocess

    config = write_plugin(tmp_path, "slow_state", SLOW_STATE, "SlowState")
    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    with data.open("w", encoding="utf-8") as file:
        for i in range(3):
            row = {"prompt": [{"role": "user", "content": f"q{i}"}], "responses": ["a"]}
            row["interaction_kwargs"] = {"name": "p"}
            file.write(json.dumps(row) + "\n")
    command, env = child_run(tmp_path, config, data)
    command += ["--timeout", "1", "--concurrency", "1", "--output", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    records = read_lines(out)
    assert [r["end_reason"] for r in records] == ["error"] * 3, records
    assert all(
        "finalize_interaction timed out after 1 s" in r["errors"][0]["message"] for r in records
    )
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert "slow_state.SlowDel.__del__ blocked the event loop 3 time(s)" in done.stderr


def test_an_exception_leaving_a_del_is_told_in_one_escaped_line(tmp_path: Path) -> None:
    """Python printed "Exception ignored in" with a traceback and the plugin's text raw
    (escape sequences and all), once per episode."""
    import subprocess

    config = write_plugin(tmp_path, "slow_state", SLOW_STATE, "SlowState")
    data = tmp_path / "d.jsonl"
    row = {"prompt": [{"role": "user", "content": "q"}], "responses": ["a"]}
    row["interaction_kwargs"] = {"name": "p", "raising": True}
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    command, env = child_run(tmp_path, config, data)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr, done.stderr
    (told,) = [line for line in done.stderr.splitlines() if "RaisingDel.__del__" in line]
    assert told.startswith(
        "interactions: warning: Exception ignored in <function RaisingDel.__del__"
    )
    assert "RuntimeError: del boom \\x1b[31mRED (at " in told and "slow_state.py:" in told


@pytest.mark.parametrize("sample_id", ["s", "s" * 400_000])  # errors cut; all but counters cut
def test_a_record_cut_to_fit_its_line_is_counted_by_error_kind_as_before(sample_id: str) -> None:
    """Errors a cut record left out became one note of no kind: a run with 100 observer
    errors per record counted them, and its resumed summary and report counted 20 and one
    "?: Error"."""
    from interactions_core.runtime.record import EpisodeRecord, shorten_record
    from interactions_core.runtime.summary import SummaryStats

    limit = 1 << 20
    errors = [{"where": "observer on_turn", "type": "RuntimeError", "message": "m" * 9_000}] * 90
    errors += [{"where": "finalize_interaction", "type": "OSError", "message": "x"}] * 10
    record = {
        "index": 0, "repeat": 0, "sample_id": sample_id, "interaction": "b",
        "end_reason": "error", "turns": 3, "user_turns": 2, "scores": [0.5] * 3,
        "final_score": None, "messages": [], "errors": errors,
    }  # fmt: skip

    def kinds(data: dict[str, Any]) -> dict[str, int]:
        episode = EpisodeRecord(0, data["sample_id"], 0)
        episode.interaction, episode.end_reason = data["interaction"], data["end_reason"]
        episode.turns, episode.scores, episode.errors = 3, [0.5] * 3, data["errors"]
        stats = SummaryStats()
        stats.add_record(episode)
        return stats.total.errors_by_kind

    short = shorten_record(record, limit)
    assert len(json.dumps(short)) <= limit and len(short["errors"]) < 100
    assert kinds(short) == kinds(record) == {
        "observer on_turn: RuntimeError": 90,
        "finalize_interaction: OSError": 10,
    }
