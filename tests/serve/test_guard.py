"""The server's front door as a plain ASGI wrapper: refusals, their log, idle connections;
and the gate below it, which closes connections that never finish their request."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from interactions_core.serve.connections import FD_RESERVE, ConnectionGate, http_connection_cap
from interactions_core.serve.guard import (
    MAX_NUMBER_DIGITS,
    Guard,
    has_long_number,
    json_values,
    max_json_values,
)


async def _app(scope: Any, receive: Any, send: Any) -> None:
    message = await receive()
    await send({"type": "echo", "message": message})


def _scope(kind: str, **headers: str) -> dict[str, Any]:
    return {
        "type": kind,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


def _call(guard: Guard, scope: dict[str, Any], receive: Any = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def never() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {}

    asyncio.run(guard(scope, receive or never, send))
    return sent


def test_a_flood_of_refusals_logs_one_line(caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard(_app)
    caplog.set_level(logging.WARNING, "interactions_core.serve")
    for _ in range(1000):
        sent = _call(guard, _scope("http", Host="127.0.0.1:1", Origin="https://evil.example"))
        assert sent[0]["status"] == 403
    assert b"is not allowed" in sent[1]["body"]
    assert len(caplog.records) == 1


def test_a_server_bound_elsewhere_does_not_check_host() -> None:
    guard = Guard(_app, bind_host="0.0.0.0")
    assert guard.refusal(_scope("http", Host="example.org:8000")) is None
    assert Guard(_app).refusal(_scope("http", Host="example.org:8000")) is not None
    assert Guard(_app).refusal(_scope("http", Host="[::1]:8000")) is None


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1#",
        "127.0.0.1?x",
        "127.0.0.1/x",
        "user@127.0.0.1",
        "a b",
        "h:1:2",
        "[1:2:3]",  # brackets around what is no IPv6 address: urlsplit raised, a 500
        "[fffff::1]",
        "[1.2.3.4]",
    ],
)
def test_a_host_header_that_is_not_a_host_is_refused(bind: str, host: str) -> None:
    """Older Starlette rebuilds the request URL from ``Host``: ``#``, ``?`` or ``/`` in it
    changed the path a middleware saw (the Task API's token check was skipped)."""
    assert "is not a host name or address" in str(
        Guard(_app, bind_host=bind).refusal(_scope("http", Host=host))
    )


def test_hosts_of_every_form_pass_the_syntax_check() -> None:
    guard = Guard(_app, bind_host="0.0.0.0")
    for host in ("", "example.org", "example.org:8000", "10.0.0.7:80", "[::1]:8000", "[fe80::1]"):
        assert guard.refusal(_scope("http", Host=host)) is None, host


def test_off_loopback_the_own_origin_passes_only_as_an_address() -> None:
    """A name can be re-pointed at the server (DNS rebinding) after the page loaded."""
    guard = Guard(_app, bind_host="0.0.0.0")
    rebound = _scope("http", Host="evil.example:8000", Origin="http://evil.example:8000")
    assert "is not allowed" in str(guard.refusal(rebound))
    direct = _scope("http", Host="10.0.0.7:8000", Origin="http://10.0.0.7:8000")
    assert guard.refusal(direct) is None
    allowed = Guard(_app, bind_host="0.0.0.0", allowed_origins=["http://lab.example:8000"])
    named = _scope("http", Host="lab.example:8000", Origin="http://lab.example:8000")
    assert allowed.refusal(named) is None
    assert (
        Guard(_app).refusal(_scope("http", Host="localhost:1", Origin="http://localhost:1")) is None
    )


def test_two_origin_headers_are_judged_together() -> None:
    """Only the first was checked: the server's own origin, then a foreign one, passed."""
    scope = _scope("http", Host="127.0.0.1:8000")
    own, evil = (b"origin", b"http://127.0.0.1:8000"), (b"origin", b"https://evil.example")
    scope["headers"] += [own, evil]
    assert "is not allowed" in str(Guard(_app).refusal(scope))
    scope["headers"] = scope["headers"][:-1]
    assert Guard(_app).refusal(scope) is None


@pytest.mark.parametrize("origin", ["http://[::1", "http://[1:2:3]", "http://[1.2.3.4]:80"])
def test_a_malformed_origin_is_refused_not_a_server_error(origin: str) -> None:
    for bind in ("127.0.0.1", "0.0.0.0"):
        scope = _scope("http", Host="127.0.0.1:8000", Origin=origin)
        assert "is not allowed" in str(Guard(_app, bind_host=bind).refusal(scope))


def test_an_idle_websocket_is_reported_gone() -> None:
    guard = Guard(_app, idle_timeout=0.05)
    sent = _call(guard, _scope("websocket", Host="localhost"))
    assert sent == [{"type": "echo", "message": {"type": "websocket.disconnect", "code": 1001}}]
    assert guard.connections == 0


def test_connections_over_the_limit_are_refused_at_the_handshake() -> None:
    guard = Guard(_app, max_connections=1)
    guard.connections = 1
    sent = _call(guard, _scope("websocket", Host="127.0.0.1"))
    assert sent[0]["type"] == "websocket.close"
    assert "too many connections" in sent[0]["reason"]


class _Transport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted


def test_a_full_gate_closes_the_connection_that_waited_longest() -> None:
    gate = ConnectionGate(head_timeout=None, max_open=2)
    first, second, third, fourth = (_Transport() for _ in range(4))
    assert gate.opened(("127.0.0.1", 1), first)
    assert gate.opened(("127.0.0.1", 2), second)
    gate.head_arrived(("127.0.0.1", 2))  # busy with a request: never closed to make room
    assert gate.opened(("127.0.0.1", 3), third)
    assert (first.aborted, second.aborted) == (True, False)
    gate.head_arrived(("127.0.0.1", 3))
    # Every open connection is busy: the new one is the one closed.
    assert not gate.opened(("127.0.0.1", 4), fourth)
    assert (gate.closed_full, gate.refused) == (1, 1)
    gate.closed(("127.0.0.1", 2))
    assert set(gate.live) == {("127.0.0.1", 3)}
    # An upgraded connection leaves the gate: the guard counts WebSockets apart.
    gate.head_arrived(("127.0.0.1", 3), upgraded=True)
    assert gate.live == {} and gate.waiting == {}


def test_a_head_not_complete_in_time_closes_its_connection_and_a_response_rearms() -> None:
    async def scenario() -> tuple[_Transport, ConnectionGate]:
        gate = ConnectionGate(head_timeout=0.05, max_open=8)
        slow, served = _Transport(), _Transport()
        gate.opened(("127.0.0.1", 1), slow)
        gate.opened(("127.0.0.1", 2), served)
        gate.head_arrived(("127.0.0.1", 2))
        await asyncio.sleep(0.1)
        assert slow.aborted and not served.aborted  # a request in progress has no deadline
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        reply = gate.watch_response(("127.0.0.1", 2), send)
        await reply({"type": "http.response.start", "status": 200})
        await reply({"type": "http.response.body", "body": b"", "more_body": False})
        assert len(sent) == 2 and ("127.0.0.1", 2) in gate.waiting
        await asyncio.sleep(0.1)  # the next head never came
        return served, gate

    served, gate = asyncio.run(scenario())
    assert served.aborted and gate.closed_slow == 2 and gate.live == {}


def test_a_whole_request_is_due_within_the_deadline_and_a_sent_one_may_then_wait() -> None:
    """The deadline covers head and body; once the body is whole, a long step does not count."""

    async def scenario(parts: list[Any], length: str | None) -> tuple[_Transport, list[Any]]:
        gate = ConnectionGate(head_timeout=0.05, max_open=8, max_body=100)
        transport, peer = _Transport(), ("127.0.0.1", 5)
        gate.opened(peer, transport)
        headers = (
            {"Host": "127.0.0.1"}
            if length is None
            else {"Host": "127.0.0.1", "Content-Length": length}
        )
        scope = {**_scope("http", **headers), "client": peer}
        pending = iter(parts)
        out: list[Any] = []

        async def receive() -> Any:
            part = next(pending, None)
            if part is None:
                await asyncio.sleep(0.2)  # the client sends no more (or a long step runs)
                return {"type": "http.disconnect"}
            return part

        async def app(scope: Any, receive: Any, send: Any) -> None:
            for _ in range(len(parts) + 1):
                out.append(await receive())

        async def send(message: Any) -> None:
            out.append(message)

        await Guard(app, gate=gate)(scope, receive, send)
        return transport, out

    half = [{"type": "http.request", "body": b"{", "more_body": True}]
    transport, _ = asyncio.run(scenario(half, "10"))
    assert transport.aborted  # the body never finished: closed at the deadline
    whole = [{"type": "http.request", "body": b"{}", "more_body": False}]
    transport, out = asyncio.run(scenario(whole, "2"))
    assert not transport.aborted and out[0]["body"] == b"{}"
    # Chunked, past the limit: the application is told the client left.
    big = [{"type": "http.request", "body": b"x" * 80, "more_body": True}] * 2
    transport, out = asyncio.run(scenario(big, None))
    assert transport.aborted and out[1] == {"type": "http.disconnect"}
    # A declared length over the limit is refused before any of it is read.
    transport, out = asyncio.run(scenario(whole, "101"))
    assert out[0]["status"] == 413 and b"over this server's limit of 100" in out[1]["body"]


def test_the_http_connection_cap_leaves_room_for_websockets_and_the_rest() -> None:
    resource = pytest.importorskip("resource", reason="open-file limits exist on Unix only")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, hard))
        cap = http_connection_cap(100)
        raised = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert raised >= 300  # raised to the hard limit where it allows more
        assert cap == max(16, raised - 100 - FD_RESERVE)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_at_the_limit_the_oldest_connection_that_never_had_an_observation_makes_room() -> None:
    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        guard = Guard(_app, max_connections=1)
        first: list[Any] = []
        second: list[Any] = []
        third: list[Any] = []

        async def silent() -> Any:
            await asyncio.sleep(3600)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["name"] == "second":  # a reset that passed: an observation is sent
                await send({"type": "websocket.send", "text": '{"type":"observation","data":{}}'})
            scope["out"].append(await receive())

        guard.app = app

        async def send(message: Any) -> None:
            pass

        def connect(name: str, out: list[Any]) -> asyncio.Task[None]:
            scope = {**_scope("websocket", Host="localhost"), "name": name, "out": out}
            return asyncio.ensure_future(guard(scope, silent, send))

        one = connect("first", first)
        await asyncio.sleep(0.01)
        two = connect("second", second)  # closes the first, which never had an observation
        await asyncio.wait_for(one, 1)
        await asyncio.sleep(0.01)
        sent: list[Any] = []

        async def record(message: Any) -> None:
            sent.append(message)

        # The second has had one, so a third is refused at its handshake.
        await guard({**_scope("websocket", Host="localhost"), "name": "third"}, silent, record)
        third.extend(sent)
        two.cancel()
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert first == [{"type": "websocket.disconnect", "code": 1008}]
    assert second == []
    assert third[0]["type"] == "websocket.close" and "every one has played" in third[0]["reason"]


def test_a_proven_websocket_idles_out_but_a_long_step_is_not_idleness() -> None:
    """After its first observation a connection is watched by one timer, not one per message."""
    got: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "websocket.send", "text": '{"type":"observation","data":{}}'})
        got.append(await receive())
        await asyncio.sleep(0.2)  # a step four times the idle timeout: the client waits
        got.append(await receive())
        got.append(await receive())  # nothing more comes: idle

    async def scenario() -> float:
        parts = iter([{"type": "websocket.receive", "text": "a"}])

        async def receive() -> Any:
            part = next(parts, None)
            if part is None:
                await asyncio.sleep(0.02 if len(got) == 1 else 3600)
                return {"type": "websocket.receive", "text": "b"}
            return part

        async def send(message: Any) -> None:
            pass

        loop = asyncio.get_running_loop()
        started = loop.time()
        await Guard(app, idle_timeout=0.05)(_scope("websocket", Host="localhost"), receive, send)
        return loop.time() - started

    took = asyncio.run(scenario())
    assert [m.get("text") for m in got[:2]] == ["a", "b"]
    assert got[2] == {"type": "websocket.disconnect", "code": 1001}
    assert took < 5


# -- what parsing a message may cost ------------------------------------------


def test_json_values_counts_brackets_and_commas_outside_strings_only() -> None:
    text = json.dumps({"a": [1, 2, {"b": "[x, {y}], \\" + '"' + ", ["}]})
    assert json_values(text, 1000) >= 5  # under the limit: the whole text, cheaply
    assert json_values(text, 2) == 5  # over it: strings taken out ({, [, ",", {, ",")
    assert json_values(text.encode(), 2) == 5


def test_json_values_never_counts_text_full_of_brackets_against_a_reset() -> None:
    limit = max_json_values(100_000)
    prompt = [{"role": "user", "content": "[{,}]" * 20_000}] * 4
    assert json_values(json.dumps({"prompt": prompt}), limit) <= 16


def test_json_values_stops_counting_strings_past_twice_the_limit() -> None:
    assert json_values('"a",' * 100, 10) > 10
    assert json_values("[]," * 100, 10) == 200


def test_an_unterminated_string_is_taken_out_to_its_end_in_one_piece() -> None:
    """A pattern that needed the closing quote failed anew from every quote of a run of
    \\" escapes, quadratic: 100 KB held the event loop 9 s before being refused. Taken as
    one string to the end, the brackets inside it are not counted."""
    text = "[" * 5 + '"' + '\\"[' * 100
    assert json_values(text, 2) == 5
    assert json_values(text.encode(), 2) == 5


def test_long_numbers_are_found_outside_strings_only() -> None:
    """Python converts an integer in time quadratic in its digits: 3,700 numbers of 4,299
    digits (16 MB) held the event loop 1.3 s before the reset was refused as too long."""
    assert has_long_number('{"k": [1' + "2" * 100 + "]}")
    assert has_long_number(b"[" + b"9" * 101 + b"]")
    assert not has_long_number('{"k": [1' + "2" * 39 + "]}")  # 40 digits: allowed
    assert has_long_number('{"k": [0.' + "5" * 40 + "]}")  # a point counts as one
    assert not has_long_number('{"k": [1.5e-300, 12345678901234567]}')
    assert not has_long_number('{"prompt": "the number 1' + "2" * 300 + '"}')  # in text
    assert not has_long_number('{"p": "\\"' + "7" * 300 + '"}')


def _outside_by_hand(text: str) -> int:
    """Brackets and commas outside strings, by a character-by-character JSON scan."""
    count, inside, escaped = 0, False, False
    for char in text:
        if inside:
            escaped, inside = (not escaped and char == "\\"), (escaped or char != '"')
        elif char == '"':
            inside = True
        elif char in "[{,":
            count += 1
    return count


def test_strings_are_taken_out_as_a_json_scanner_reads_them() -> None:
    """Escapes are deleted before strings are matched (a pattern that handled them kept
    state per escape: a 4 MB message of escapes peaked at +230 MB); what is counted must
    stay what a JSON scanner sees."""
    backslash, quote = "\\", '"'
    documents = [
        {
            "a" + backslash: [1, 2],
            "b": "x" + backslash + quote + "y,[{",
            "c": [backslash, quote, ",", "[{"],
        },
        [{"k": backslash * 2}, {"k": backslash + quote + ","}, "end," + backslash],
        {"unicode": "caf\u00e9 \n \t [", "n": [[], {}, [1, 2, 3]]},
    ]
    for document in documents:
        text = json.dumps(document)
        truth = _outside_by_hand(text)
        whole = text.count("[") + text.count("{") + text.count(",")
        assert whole > truth  # so json_values takes the strings out
        assert json_values(text, whole - 1) == truth, text
        assert json_values(text.encode(), whole - 1) == truth, text


def test_digit_runs_of_the_limit_are_allowed_however_many() -> None:
    runs = ("1" * MAX_NUMBER_DIGITS + ",") * 2_000
    assert not has_long_number("[" + runs + '"' + "9" * 101 + '"]')  # the long one is text
    assert has_long_number("[" + runs + "9" * 101 + "]")
    assert not has_long_number(b"[" + runs.encode() + b"0]")


def test_a_reset_passing_the_token_as_a_flood_evicts_its_connection_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its reset read first, then evicted by a tokenless connection in the same moment: the
    episode started (an observation sent) and the connection was cut 1 s later."""
    from interactions_core.serve import guard as guard_module

    monkeypatch.setattr(guard_module, "EVICT_GRACE", 0.05)

    async def scenario() -> tuple[bool, list[Any]]:
        gate = ConnectionGate(head_timeout=None, max_open=10)
        guard = Guard(_app, max_connections=1, gate=gate)
        holder, flood = _Transport(), _Transport()
        later: list[Any] = []
        read_reset = asyncio.Event()
        go_on = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["name"] == "flood":
                await asyncio.sleep(3600)
            await receive()  # the reset
            read_reset.set()
            await go_on.wait()  # the flood's connection arrives meanwhile
            guard_module.PASSED_TOKEN.get()()  # type: ignore[misc]  # the token check passed
            await send({"type": "websocket.send", "text": '{"type":"observation","data":{}}'})
            later.append(await receive())

        guard.app = app
        messages = [{"type": "websocket.receive", "text": "reset"}]

        async def receive() -> Any:
            if messages:
                return messages.pop()
            await asyncio.sleep(0.3)
            return {"type": "websocket.receive", "text": "step"}

        async def send(message: Any) -> None:
            pass

        def connect(name: str, port: int, transport: _Transport) -> asyncio.Task[None]:
            gate.opened(("127.0.0.1", port), transport)
            scope = {**_scope("websocket", Host="localhost"), "name": name}
            scope["client"] = ("127.0.0.1", port)
            return asyncio.ensure_future(guard(scope, receive, send))

        one = connect("holder", 1, holder)
        await read_reset.wait()
        two = connect("flood", 2, flood)  # evicts the holder: the oldest without observation
        await asyncio.sleep(0.01)
        go_on.set()
        await asyncio.wait_for(one, 2)
        two.cancel()
        return holder.aborted, later

    aborted, later = asyncio.run(scenario())
    assert not aborted
    assert later == [{"type": "websocket.receive", "text": "step"}]
