"""Start ``interactions serve`` as a real process on 127.0.0.1 and stop it by its pid."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


class Server:
    """A running server: its ``url``, its ``pid``, its log file and the plugins' event log."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path, events: Path) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.url = url
        self.log = log
        self.events = events

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def sessions(self) -> dict[str, int]:
        return self.get("/interactions")["sessions"]

    def wait_sessions(self, open_: int, timeout: float = 10.0) -> dict[str, int]:
        """Poll until ``open`` sessions remain (finalizing after a disconnect is asynchronous)."""
        deadline = time.monotonic() + timeout
        while True:
            counts = self.sessions()
            if counts["open"] == open_ or time.monotonic() > deadline:
                return counts
            time.sleep(0.05)

    def event_lines(self) -> list[str]:
        return self.events.read_text().splitlines() if self.events.exists() else []

    def output(self) -> str:
        return self.log.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` to the server's pid; return its exit code (kill it if it hangs)."""
        if self.proc.poll() is None:
            os.kill(self.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(10)
                raise AssertionError(f"server ignored signal {sig}:\n{self.output()}") from None
        return self.proc.returncode


def start_server(
    tmp: Path,
    config: str,
    *args: str,
    env: dict[str, str] | None = None,
    open_files: int | None = None,
) -> Server:
    """Write ``config`` (``{events}`` is replaced by the event log path) and serve it.

    ``open_files`` sets the server's open-file limit (soft and hard), as ``ulimit -n``.
    """
    events = tmp / "events.log"
    config_path = tmp / "config.yaml"
    config_path.write_text(config.replace("{events}", str(events)))
    log = tmp / "server.log"
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "interactions_core",
                "serve",
                str(config_path),
                "--port",
                "0",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            preexec_fn=None if open_files is None else _limit_files(open_files),
        )
    deadline = time.monotonic() + 60
    while True:
        text = log.read_text()
        match = LISTENING.search(text)
        if match or proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if not match:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        raise AssertionError(f"the server did not start:\n{text}")
    server = Server(proc, f"http://127.0.0.1:{match.group(1)}", log, events)
    while True:
        try:
            if server.get("/health")["status"] == "healthy":
                return server
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                server.stop(signal.SIGKILL)
                raise AssertionError(f"the server is not healthy:\n{server.output()}") from None
            time.sleep(0.05)


def _limit_files(count: int) -> Any:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return limit


def ws_connection(server: Server, compress: bool) -> tuple[Any, Any]:
    """A raw WebSocket to ``/ws`` (a socket and websockets' sans-I/O client), handshake done.

    ``compress`` offers permessage-deflate as OpenEnv's client does; the tests that
    send frames by hand (fragments, bombs, costly messages) need this low level.
    """
    import socket

    from websockets.client import ClientProtocol
    from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
    from websockets.uri import parse_uri

    port = int(server.url.rsplit(":", 1)[1])
    deflate = [ClientPerMessageDeflateFactory(client_max_window_bits=12)] if compress else []
    client = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/ws"), extensions=deflate)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.send_request(client.connect())
    sock.sendall(b"".join(client.data_to_send()))
    while client.state.name == "CONNECTING":
        client.receive_data(sock.recv(65536))
    client.events_received()
    return sock, client


def ws_next(
    sock: Any, client: Any, within: float, *, skip_text: bool = False, gone: Any = None
) -> Any:
    """The server's next text message (``str``) or close frame (``Close``) within ``within``
    seconds, ``gone`` when the connection dropped, else ``None``; ``skip_text``: the close only."""
    from websockets.frames import Close

    sock.settimeout(0.2)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            continue
        except OSError:
            return gone
        if not data:
            return gone
        client.receive_data(data)
        for event in client.events_received():
            if event.opcode.name == "CLOSE":
                return Close.parse(event.data)
            if event.opcode.name == "TEXT" and not skip_text:
                return event.data.decode()
    return None
