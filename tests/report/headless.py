"""A real headless Chromium driven over the DevTools protocol, for the report tests.

Chromium comes from the system packages (``apt-get install chromium``); it is
started here with a fresh profile, no network features, and a DevTools port
chosen by Chromium itself (read back from ``DevToolsActivePort``). The
protocol is JSON over a WebSocket; ``websockets`` (a small, well-kept pure
Python package) carries it, which is all the driving these tests need.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1280,1600",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One Chromium process and a DevTools session on its first page."""

    def __init__(self, executable: str, profile: Path) -> None:
        from websockets.sync.client import connect

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        )
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a DevTools method; events that arrive meanwhile are kept in ``events``."""
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 60) -> dict[str, Any]:
        for seen in self.events:
            if seen.get("method") == event:
                self.events.remove(seen)
                return seen
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv(timeout=deadline - time.monotonic()))
            if message.get("method") == event:
                return message  # type: ignore[no-any-return]
            self.events.append(message)
        raise TimeoutError(event)

    def open(self, path: Path) -> None:
        self.events.clear()
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error calls and error log entries so far."""
        self.evaluate("0")  # drain events sent before this point
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                described = details.get("exception", {}).get("description")
                out.append(described or details.get("text", "uncaught exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(json.dumps(params.get("args", []))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(params["entry"].get("text", ""))
        return out

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(
            self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        )
        path.write_bytes(data)
        return data

    def close(self) -> None:
        stack = getattr(self, "_stack", None)
        if stack is not None:
            stack.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def require_chromium() -> str:
    """The Chromium executable; without one, skip (or fail where CI requires it)."""
    import pytest

    path = find_chromium()
    if path is None:
        message = "chromium not found (apt-get install chromium); the report browser tests need it"
        if os.environ.get("INTERACTIONS_REQUIRE_BROWSER"):
            pytest.fail(message + "; CI requires it")
        pytest.skip(message)
    return path
