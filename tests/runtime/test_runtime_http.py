"""The openai policy's HTTP client against raw servers on 127.0.0.1 that answer byte by byte.

Each server here speaks HTTP the way some real server does — chunked bodies,
bodies ending at connection close, keep-alive connections closed while idle,
interim ``100 Continue`` responses, no answer at all — and the tests check
that the policy gets the reply (or a clear, retried error) every time.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from interactions_core.runtime import PolicyError
from interactions_core.runtime.policies.http import ConnectionPool, ProtocolError
from interactions_core.runtime.policies.openai import OpenAIPolicy

Handler = Callable[[socket.socket, int], None]


def body(text: str, usage: bool = True) -> bytes:
    data: dict[str, object] = {"choices": [{"message": {"role": "assistant", "content": text}}]}
    if usage:
        data["usage"] = {"prompt_tokens": 5, "completion_tokens": 2}
    return json.dumps(data).encode()


def read_request(conn: socket.socket) -> bytes:
    """One whole request (head and Content-Length body); b"" when the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        rest += conn.recv(65536)
    return head + b"\r\n\r\n" + rest


class RawServer:
    """Accepts connections; ``handler(conn, number)`` serves each (number counts from 0)."""

    def __init__(self, handler: Handler) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.connections = 0
        self.handler = handler
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            number = self.connections
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            try:
                self.handler(conn, number)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


async def ask(url: str, times: int = 1, **options: object) -> list[str]:
    policy = OpenAIPolicy(model="m", base_url=url, backoff=0.01, **options)  # type: ignore[arg-type]
    try:
        state = policy.start({})
        return [await policy.reply(state, [{"role": "user", "content": "q"}]) for _ in range(times)]
    finally:
        await policy.aclose()


async def test_chunked_body_with_trailers(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, _: int) -> None:
        while read_request(conn):
            data = body("chunked reply")
            half = len(data) // 2
            chunks = b"%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: yes\r\n\r\n" % (
                half,
                data[:half],
                len(data) - half,
                data[half:],
            )
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                b"Content-Type: application/json\r\n\r\n" + chunks
            )

    server = serve(handler)
    assert await ask(server.url, times=3) == ["chunked reply"] * 3
    assert server.connections == 1  # kept alive across the three requests


async def test_body_ending_at_connection_close(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, number: int) -> None:
        if read_request(conn):
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + body(f"close {number}"))

    server = serve(handler)
    assert await ask(server.url, times=2) == ["close 0", "close 1"]
    assert server.connections == 2  # HTTP/1.0 without keep-alive: a connection each


async def test_idle_connection_closed_by_the_server_is_replaced(
    serve: Callable[[Handler], RawServer],
) -> None:
    """A keep-alive connection the server drops after one response (an idle timeout)."""

    def handler(conn: socket.socket, number: int) -> None:
        if read_request(conn):
            data = body(f"conn {number}")
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        conn.shutdown(socket.SHUT_RDWR)

    server = serve(handler)
    # retries=0: a stale connection is not a failed attempt, the request simply goes again.
    assert await ask(server.url, times=3, retries=0) == ["conn 0", "conn 1", "conn 2"]


async def test_interim_100_continue_is_skipped(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, _: int) -> None:
        while read_request(conn):
            data = body("after continue")
            conn.sendall(
                b"HTTP/1.1 100 Continue\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)
            )

    assert await ask(serve(handler).url) == ["after continue"]


async def test_a_silent_server_times_out_and_is_retried(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, _: int) -> None:
        read_request(conn)
        conn.recv(1)  # never answers; returns when the client gives up

    server = serve(handler)
    with pytest.raises(
        PolicyError, match=r"failed 2 times; last error: TimeoutError.*within 0.2 s"
    ):
        await ask(server.url, timeout=0.2, retries=1)
    assert server.connections == 2  # a timed-out connection is never reused


async def test_garbage_is_a_protocol_error_then_reported(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, _: int) -> None:
        if read_request(conn):
            conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")

    with pytest.raises(PolicyError, match=r"ProtocolError: not an HTTP/1\.x response: 'SSH-2\.0"):
        await ask(serve(handler).url, retries=0)


async def test_usage_missing_from_the_response_is_none(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, _: int) -> None:
        while read_request(conn):
            data = body("no usage", usage=False)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))

    policy = OpenAIPolicy(model="m", base_url=serve(handler).url)
    try:
        state = policy.start({})
        assert await policy.reply(state, []) == "no usage"
        usage = policy.usage(state)
    finally:
        await policy.aclose()
    assert usage is not None
    assert usage["prompt_tokens"] is None and usage["completion_tokens"] is None
    assert usage["turns"][0]["latency_s"] > 0


async def test_a_policy_serves_two_event_loops(serve: Callable[[Handler], RawServer]) -> None:
    """Connections belong to a loop: a second ``asyncio.run`` gets fresh ones."""

    def handler(conn: socket.socket, _: int) -> None:
        while read_request(conn):
            data = body("ok")
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))

    server = serve(handler)
    policy = OpenAIPolicy(model="m", base_url=server.url, concurrency=1)

    async def once() -> str:
        return await policy.reply(None, [])

    assert await asyncio.get_running_loop().run_in_executor(None, asyncio.run, once()) == "ok"
    assert await once() == "ok"
    await policy.aclose()
    assert server.connections == 2


async def test_closed_pool_refuses_requests() -> None:
    pool = ConnectionPool("http", "127.0.0.1", 9, "/", {}, timeout=1.0)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        await pool.post(b"{}")
    assert issubclass(ProtocolError, OSError)


async def test_large_replies_whole(serve: Callable[[Handler], RawServer]) -> None:
    """Replies far above the stream buffer's limit, sized and chunked, arrive whole."""
    text = "x" * 3_000_000

    def handler(conn: socket.socket, _: int) -> None:
        first = True
        while read_request(conn):
            data = body(text)
            if first:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
            else:
                step = 70_000
                pieces = [data[i : i + step] for i in range(0, len(data), step)]
                chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
            first = False

    assert await ask(serve(handler).url, times=2) == [text, text]


def tls_server_context(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1 (made by ``openssl``) and a server context."""
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_https_with_certificate_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS to a server whose certificate the client trusts through SSL_CERT_FILE."""
    cert, context = tls_server_context(tmp_path)

    def handler(conn: socket.socket, _: int) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            while read_request(tls):
                data = body("over tls")
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))

    server = RawServer(handler)
    try:
        url = server.url.replace("http://", "https://")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert await ask(url, times=2) == ["over tls", "over tls"]
        assert server.connections == 1
        monkeypatch.delenv("SSL_CERT_FILE")  # an untrusted certificate is refused, clearly
        with pytest.raises(PolicyError, match="SSLCertVerificationError"):
            await ask(url, retries=0)
    finally:
        server.close()


async def test_a_connect_that_hangs_times_out() -> None:
    """A listener whose accept queue is full drops new connection attempts: connect hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the accept queue; nobody ever accepts
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        await asyncio.sleep(0.1)
        with pytest.raises(PolicyError, match=r"TimeoutError: no connection within 0\.3 s"):
            await ask(f"http://127.0.0.1:{port}/v1", timeout=0.3, retries=0)
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


# -- proxies -----------------------------------------------------------------


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class TinyProxy(RawServer):
    """An HTTP proxy: ``CONNECT`` tunnels, absolute-URI requests relayed; heads recorded."""

    def __init__(self, refuse: bool = False) -> None:
        self.heads: list[str] = []
        self.refuse = refuse
        super().__init__(self._relay)
        self.address = self.url.removesuffix("/v1")

    def _relay(self, conn: socket.socket, _: int) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        self.heads.append(head.decode("latin-1"))
        method, target, _version = head.split(b"\r\n", 1)[0].split(b" ")
        if self.refuse:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        if method == b"CONNECT":
            host, port = target.decode().rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            host_port, _, path = target.decode().removeprefix("http://").partition("/")
            host, port = host_port.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            first, _, others = head.partition(b"\r\n")
            origin_form = first.replace(target, b"/" + path.encode())
            upstream.sendall(origin_form + b"\r\n" + others + b"\r\n\r\n" + rest)
        with upstream:
            back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
            back.start()
            _pipe(conn, upstream)
            back.join()


def _answer(conn: socket.socket, _: int) -> None:
    while read_request(conn):
        data = body("via proxy")
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))


@pytest.fixture
def proxy() -> Iterator[TinyProxy]:
    server = TinyProxy()
    yield server
    server.close()


async def test_http_goes_through_http_proxy_in_absolute_form(
    serve: Callable[[Handler], RawServer], proxy: TinyProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = serve(_answer)
    monkeypatch.setenv("HTTP_PROXY", proxy.address.replace("http://", "http://me:s%40cret@"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert await ask(origin.url, times=2) == ["via proxy", "via proxy"]
    (head,) = proxy.heads  # one kept-alive connection through the proxy
    assert head.startswith(f"POST {origin.url}/chat/completions HTTP/1.1\r\n")
    assert "Proxy-Authorization: Basic bWU6c0BjcmV0" in head  # me:s@cret


async def test_no_proxy_connects_directly(
    serve: Callable[[Handler], RawServer], proxy: TinyProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = serve(_answer)
    monkeypatch.setenv("http_proxy", proxy.address)
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    assert await ask(origin.url) == ["via proxy"]
    assert proxy.heads == []


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_https_goes_through_a_connect_tunnel(
    tmp_path: Path, proxy: TinyProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, context = tls_server_context(tmp_path)

    def handler(conn: socket.socket, number: int) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            _answer(tls, number)  # type: ignore[arg-type]

    server = RawServer(handler)
    try:
        url = server.url.replace("http://", "https://")
        port = url.split(":")[2].split("/")[0]
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        monkeypatch.setenv("HTTPS_PROXY", proxy.address)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert await ask(url, times=2) == ["via proxy", "via proxy"]
        (head,) = proxy.heads
        assert head.startswith(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n")
    finally:
        server.close()


async def test_a_refused_tunnel_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    refusing = TinyProxy(refuse=True)
    try:
        monkeypatch.setenv("HTTPS_PROXY", refusing.address)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with pytest.raises(
            PolicyError, match=r"refused the tunnel to example\.invalid:443 \(HTTP 403\)"
        ):
            await ask("https://example.invalid/v1", retries=0)
    finally:
        refusing.close()


def test_a_proxy_the_client_cannot_use_fails_when_the_policy_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(ValueError, match=r"only http:// proxies are supported"):
        OpenAIPolicy(model="m", base_url="https://example.invalid/v1")


@pytest.mark.parametrize("size", [b"-5", b"0x5", b"+5"])
async def test_a_chunk_size_that_is_not_hex_digits_is_a_protocol_error(
    serve: Callable[[Handler], RawServer], size: bytes
) -> None:
    """int(..., 16) takes a sign and a 0x prefix: "-5" reached readexactly and failed as a
    bare ValueError naming neither the server nor the framing."""

    def handler(conn: socket.socket, _: int) -> None:
        while read_request(conn):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nhello\r\n"
            )

    server = serve(handler)
    with pytest.raises(PolicyError, match=r"ProtocolError: bad chunk size line"):
        await ask(server.url, retries=0)


async def test_content_parts_without_text_strings_are_a_malformed_response(
    serve: Callable[[Handler], RawServer],
) -> None:
    """A part whose text is a number failed as "sequence item 0: expected str instance"."""
    reply = {
        "choices": [{"message": {"role": "assistant", "content": [{"type": "text", "text": 5}]}}]
    }

    def handler(conn: socket.socket, _: int) -> None:
        while read_request(conn):
            data = json.dumps(reply).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))

    server = serve(handler)
    with pytest.raises(PolicyError, match=r"malformed chat-completions response from .*no text"):
        await ask(server.url, retries=0)
