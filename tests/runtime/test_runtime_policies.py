"""Policies: replay, human, openai (against a real HTTP server on 127.0.0.1), the registry."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from runtime_fakes import Recorder, sample

from interactions_core._spec import hookimpl
from interactions_core.errors import ConfigError, ConflictError, UnknownPolicyError
from interactions_core.registry import Registry
from interactions_core.runtime import (
    EpisodeLoop,
    Policy,
    PolicyError,
    ReplayPolicy,
    create_policy,
    get_policy_class,
    list_policies,
)
from interactions_core.runtime.policies.base import HumanPolicy
from interactions_core.runtime.policies.openai import OpenAIPolicy

# -- replay ---------------------------------------------------------------------------


def test_replay_plays_in_order_then_runs_out() -> None:
    policy = ReplayPolicy()
    state = policy.start({"responses": ["a", "b"]})
    assert [policy.reply(state, []) for _ in range(3)] == ["a", "b", None]


def test_replay_dotted_field_and_errors() -> None:
    policy = ReplayPolicy(field="extra_info.answers")
    assert list(policy.start({"extra_info": {"answers": ["x"]}})) == ["x"]
    with pytest.raises(PolicyError, match=r"no 'extra_info\.answers' field"):
        policy.start({"extra_info": {}})
    with pytest.raises(PolicyError, match="must be a list of strings, not str"):
        ReplayPolicy().start({"responses": "abc"})
    with pytest.raises(PolicyError, match="must be a list of strings, not dict"):
        ReplayPolicy().start({"responses": {"a": 1}})


def test_create_policy_checks_options() -> None:
    assert create_policy(ReplayPolicy, {"field": "r"}).field == "r"
    with pytest.raises(ConfigError, match="unknown option 'feild'; did you mean 'field'"):
        create_policy(ReplayPolicy, {"feild": "r"}, name="replay")
    with pytest.raises(ConfigError, match="option 'model' is required"):
        create_policy(OpenAIPolicy, {})
    with pytest.raises(ConfigError, match="concurrency must be a positive integer"):
        create_policy(OpenAIPolicy, {"model": "m", "concurrency": 0})


# -- human ---------------------------------------------------------------------------


async def test_human_reads_replies_and_shows_the_conversation() -> None:
    typed = io.StringIO("first line\\\nsecond line\n/end\n")
    shown = io.StringIO()
    policy = HumanPolicy(input=typed, output=shown)
    loop = EpisodeLoop(policy, {"rec": Recorder()})
    record = await loop.run(sample(kwargs={"name": "rec", "answer": "never"}))
    assert record.end_reason == "exhausted" and record.turns == 1
    assert record.messages[1]["content"] == "first line\nsecond line"
    out = shown.getvalue()
    assert "[user] question" in out and "[user] wrong #1" in out and "assistant> " in out
    assert policy.max_concurrency == 1 and policy.interactive


async def test_human_end_of_input_ends_the_episode() -> None:
    policy = HumanPolicy(input=io.StringIO(""), output=io.StringIO())
    record = await EpisodeLoop(policy, None).run(sample())
    assert (record.end_reason, record.turns) == ("exhausted", 0)


# -- openai, against a real server ------------------------------------------------------


class FakeServer:
    """A chat-completions server on 127.0.0.1 answering from a script."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str], bytes]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with owner.lock:
                    owner.requests.append(
                        {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                    )
                    if owner.script:
                        status, headers, data = owner.script.pop(0)
                    else:
                        text = f"echo {len(body['messages'])}"
                        status, headers, data = 200, {}, completion(text)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(text: str | None) -> bytes:
    return json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    ).encode()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    yield srv
    srv.close()


def openai(server: FakeServer, **options: Any) -> OpenAIPolicy:
    options.setdefault("backoff", 0.01)
    return OpenAIPolicy(model="tiny", base_url=server.url, **options)


async def test_openai_plays_an_episode(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sekrit")
    policy = openai(server, api_key_env="MY_KEY", temperature=0.2, max_tokens=64)
    loop = EpisodeLoop(policy, {"rec": Recorder()}, max_assistant_turns=2)
    try:
        record = await loop.run(sample(kwargs={"name": "rec", "answer": "-"}))
    finally:
        await policy.aclose()
    assert record.errors == [] and record.turns == 2
    assert [m["content"] for m in record.messages if m["role"] == "assistant"] == [
        "echo 1",
        "echo 3",
    ]
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sekrit"
    assert first["body"]["model"] == "tiny" and first["body"]["temperature"] == 0.2
    assert first["body"]["max_tokens"] == 64 and len(server.requests[1]["body"]["messages"]) == 3


async def test_openai_retries_429_and_5xx(server: FakeServer) -> None:
    server.script = [
        (429, {"Retry-After": "0"}, b'{"error": "slow down"}'),
        (503, {}, b"overloaded"),
        (200, {}, completion("finally")),
    ]
    policy = openai(server)
    try:
        assert await policy.reply(None, [{"role": "user", "content": "q"}]) == "finally"
    finally:
        await policy.aclose()
    assert len(server.requests) == 3


async def test_openai_gives_up_after_the_retries(server: FakeServer) -> None:
    server.script = [(500, {}, b"broken")] * 3
    policy = openai(server, retries=2)
    try:
        with pytest.raises(PolicyError, match=r"failed 3 times; last error: HTTP 500: 'broken'"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (400, b'{"error": "bad model"}', r"HTTP 400 from .*bad model"),
        (401, b"nope", r"HTTP 401 .*no API key was sent"),
        (404, b"missing", r"check base_url"),
        (200, b"<html>", r"not JSON: '<html>'"),
        (200, b'{"object": "list"}', r"malformed chat-completions response"),
    ],
)
async def test_openai_clear_errors_without_retry(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, status: int, body: bytes, message: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.script = [(status, {}, body)]
    policy = openai(server)
    try:
        with pytest.raises(PolicyError, match=message):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
    assert len(server.requests) == 1


async def test_openai_connection_refused_is_retried_then_reported() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy = OpenAIPolicy(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff=0.01
    )
    try:
        with pytest.raises(PolicyError, match="failed 2 times; last error: ConnectionRefusedError"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()


async def test_openai_null_content_and_concurrency(server: FakeServer) -> None:
    server.script = [(200, {}, completion(None))]
    policy = openai(server, concurrency=2)
    try:
        assert await policy.reply(None, []) == ""
        import asyncio

        replies = await asyncio.gather(*(policy.reply(None, [{"role": "user"}]) for _ in range(6)))
        assert replies == ["echo 1"] * 6
    finally:
        await policy.aclose()


def test_openai_option_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ValueError, match=r"\$NOPE_KEY, which is not set"):
        OpenAIPolicy(model="m", api_key_env="NOPE_KEY")
    with pytest.raises(ValueError, match="http"):
        OpenAIPolicy(model="m", base_url="ftp://x")
    policy = OpenAIPolicy(model="m", base_url="http://h:1/v1/chat/completions/")
    assert policy.url == "http://h:1/v1/chat/completions"


# -- the registry --------------------------------------------------------------------


def test_builtin_policies() -> None:
    registry = Registry.from_classes({})
    names = {p.name: p.kind for p in list_policies(registry)}
    assert names == {"replay": "builtin", "openai": "builtin", "human": "builtin"}
    assert get_policy_class("replay", registry) is ReplayPolicy
    assert get_policy_class("interactions-core:openai", registry) is OpenAIPolicy
    with pytest.raises(UnknownPolicyError, match="did you mean 'replay'"):
        get_policy_class("replya", registry)


class EchoPolicy(Policy):
    def reply(self, state: Any, messages: list[dict[str, Any]]) -> str:
        return "echo"


def test_hook_registered_policies() -> None:
    class Plugin:
        @hookimpl
        def register_policies(self, register: Any) -> None:
            register("echo", EchoPolicy)

    registry = Registry.from_classes({})
    registry.plugin_host.register_object(Plugin(), name="acme-policies:plug")
    (echo,) = [p for p in list_policies(registry) if p.name == "echo"]
    assert (echo.kind, echo.distribution) == ("hook", "acme-policies")
    assert get_policy_class("echo", registry) is EchoPolicy


def test_entry_point_policies_and_conflicts(make_dist: Any, forget_modules: None) -> None:
    code = """
        class Echo:
            def reply(self, state, messages):
                return "ep"
    """
    make_dist(
        "acme-echo",
        entry_points={
            "interactions_core.policies": {"echo": "acme_echo:Echo", "replay": "acme_echo:Echo"}
        },
        modules={"acme_echo": code},
    )
    registry = Registry.from_environment()
    cls = get_policy_class("echo", registry)
    assert cls.__name__ == "Echo" and create_policy(cls).reply(None, []) == "ep"
    with pytest.raises(
        ConflictError,
        match=r"'acme-echo:replay' or 'interactions-core:replay'.*INTERACTIONS_DISABLE=acme-echo",
    ):
        get_policy_class("replay", registry)
    assert get_policy_class("interactions-core:replay", registry) is ReplayPolicy
    assert get_policy_class("acme-echo:replay", registry).__name__ == "Echo"


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "RuntimeError"])
def test_a_policy_whose_import_fails_unsayably_is_named(
    make_dist: Any, forget_modules: None, raised: str
) -> None:
    # A module raising an exception whose __str__ raised KeyboardInterrupt stopped the run
    # as "interrupted" (exit 130); with RuntimeError it read "unexpected RuntimeError ...
    # please report it", a bug of the core's.
    from interactions_core.errors import PluginLoadError

    code = f"""
        class Unsayable(Exception):
            def __str__(self):
                raise {raised}("from __str__")

        raise Unsayable()
    """
    make_dist(
        "acme-badpol",
        entry_points={"interactions_core.policies": {"badpol": "acme_badpol:Policy"}},
        modules={"acme_badpol": code},
    )
    registry = Registry.from_environment()
    with pytest.raises(PluginLoadError) as failed:
        get_policy_class("badpol", registry)
    text = str(failed.value)
    assert "failed to import" in text and "Unsayable" in text, text
    assert f"<no message: its __str__ raised {raised}>" in text, text


class RawServer:
    """A server on 127.0.0.1 that answers every request with ``head`` and then ``body()``'s
    parts, one every ``pause`` seconds, as long as the client takes them."""

    def __init__(self, head: bytes, body: Any, pause: float = 0.0) -> None:
        import socket

        self.head, self.body, self.pause = head, body, pause
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import time

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.requests += 1
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(self.head)
                    for part in self.body():
                        conn.sendall(part)
                        time.sleep(self.pause)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def _endless(part: bytes) -> Any:
    def parts() -> Any:
        while True:
            yield part

    return parts


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n",  # ends at close
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
    ],
    ids=["until-close", "chunked", "content-length"],
)
async def test_a_response_without_end_is_refused_at_the_body_bound(
    head: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server sending 1 MiB blocks without end took 12 GB (until the 15 s timeout)."""
    from interactions_core.runtime.policies import http

    monkeypatch.setattr(http, "MAX_BODY", 4 << 20)
    server = RawServer(head, _endless(b" " * (1 << 20)))
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=2, backoff=0.01, timeout=30)
    try:
        with pytest.raises(PolicyError, match=r"response body is over 4 MiB") as refused:
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()
    assert server.requests == 1  # not retried: the same would come back
    # a size the server announced is told as announced, not as "bytes so far"
    told = "bytes so far" if head.endswith(b"json\r\n\r\n") else "bytes announced"
    assert told in str(refused.value), str(refused.value)


async def test_a_body_the_timeout_cuts_is_a_timeout_and_retried() -> None:
    """A body ending at close, cut by the timeout, was read as complete: 'not JSON', once."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    server = RawServer(head, _endless(b" "), pause=0.05)
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=0.5)
    try:
        with pytest.raises(PolicyError, match=r"2 times; last error: TimeoutError: no complete"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()
    assert server.requests == 2


async def test_a_body_in_tiny_chunks_is_refused_without_holding_each_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1-byte chunks (6 bytes on the wire each) were kept as one ``bytes`` per chunk: 10
    million took 1.4 GB and a minute for 10 MB of body. Past 1,024 chunks they must
    average 64 bytes."""
    from interactions_core.runtime.policies import http

    monkeypatch.setattr(http, "MAX_BODY", 4 << 20)
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = RawServer(head, _endless(b"1\r\nx\r\n" * 10_000))
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=30)
    try:
        with pytest.raises(PolicyError, match=r"came in 1,025 chunks of 1 bytes on average"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()


async def test_a_reply_of_too_many_json_values_is_refused_before_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """11 million ``[]`` in a 33 MB body (under the body bound) took 874 MB to parse, per
    request in flight. Values are counted by commas and brackets before parsing."""
    from interactions_core.runtime.policies import openai

    monkeypatch.setattr(openai, "MAX_REPLY_VALUES", 10_000)
    body = b'{"choices": [' + b"[]," * 20_000 + b"[]]}"
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = RawServer(head, lambda: iter([body]))
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=30)
    try:
        with pytest.raises(PolicyError, match=r"JSON of about 40,00\d values, over the 10,000"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()


async def test_a_reply_nested_too_deeply_is_told_as_the_servers() -> None:
    """JSON nested 100,000 levels raised a bare RecursionError that named no server."""
    body = b"[" * 100_000 + b"]" * 100_000
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = RawServer(head, lambda: iter([body]))
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=30)
    try:
        with pytest.raises(PolicyError, match=r"answered HTTP 200 with JSON nested too deeply"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()


async def test_a_content_length_of_thousands_of_digits_is_a_bad_header() -> None:
    """5,000 digits passed ``isdigit()`` and ``int()`` refused them: a bare ValueError
    about ``sys.set_int_max_str_digits`` that named no server."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: " + b"0" * 5000 + b"126\r\n\r\n"
    server = RawServer(head, lambda: iter([b"{}"]))
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=30)
    try:
        with pytest.raises(PolicyError, match=r"bad Content-Length header '0000"):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()


@pytest.mark.parametrize(
    ("head", "told"),
    [
        (b"HTTP/1.1 2000000000000000000000 OK\r\nContent-Length: 2\r\n\r\n", "not an HTTP/1.x"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n",
            "two different Content-Length headers",
        ),
    ],
    ids=["long-status", "two-lengths"],
)
async def test_a_malformed_status_or_framing_is_a_protocol_error(head: bytes, told: str) -> None:
    # A status of 22 digits was read as 200 (its first three), and of two different
    # Content-Length headers the first was used.
    server = RawServer(head, lambda: iter([b"{}"]))
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=30)
    try:
        with pytest.raises(PolicyError, match=told):
            await policy.reply(None, [])
    finally:
        await policy.aclose()
        server.close()


class ExtraAnswerServer:
    """A keep-alive server that follows each response with one nobody asked for."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _response(text: str) -> bytes:
        body = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        return head.encode() + b"\r\n\r\n" + body

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: Any) -> None:
        with conn:
            data = b""
            try:
                while True:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        data += chunk
                    head, _, data = data.partition(b"\r\n\r\n")
                    size = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    while len(data) < size:
                        data += conn.recv(65536)
                    body, data = data[:size], data[size:]
                    question = json.loads(body)["messages"][-1]["content"]
                    conn.sendall(self._response(f"reply to {question}") + self._response("STALE"))
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


async def test_a_response_nobody_asked_for_never_answers_the_next_request() -> None:
    """A server (or proxy) sending a second, unrequested response after each one: the kept-
    alive connection was reused, and each reply went to the next request, silently."""
    server = ExtraAnswerServer()
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=1, backoff=0.01, timeout=10)
    try:
        for i in range(4):
            reply = await policy.reply(None, [{"role": "user", "content": f"q{i}"}])
            assert reply == f"reply to q{i}", (i, reply)
    finally:
        await policy.aclose()
        server.close()
