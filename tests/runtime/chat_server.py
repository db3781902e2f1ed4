"""A chat-completions server on 127.0.0.1 for the served-model tests (imported by them).

It plays a model that gets a prompt wrong the first time it sees it and right
every time after: the answer to ``question`` is ``answers[question]`` (the
ground truth the test gave it), and the reply is ``#### -1`` on the first
request for a question. Every reply reports ``usage``; the server keeps what it
sent and the requests it received, so a test can compare them with the records.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # hundreds of clients connect at once (the default is 5)


class LearningServer:
    """First wrong, then right; fixed per-request usage; optional latency."""

    def __init__(self, answers: dict[str, str], latency: float = 0.0) -> None:
        self.answers = answers
        self.latency = latency
        self.seen: dict[str, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.sent_prompt_tokens = 0
        self.sent_completion_tokens = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner._enter()
                try:
                    if owner.latency:
                        time.sleep(owner.latency)
                    data = owner._answer(body)
                finally:
                    owner._leave()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    def _enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def _answer(self, body: dict[str, Any]) -> bytes:
        question = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        with self.lock:
            count = self.seen[question] = self.seen.get(question, 0) + 1
            prompt_tokens = 10 * len(body["messages"]) + len(self.requests) % 7
            completion_tokens = 3 + count
            self.sent_prompt_tokens += prompt_tokens
            self.sent_completion_tokens += completion_tokens
            self.requests.append(body)
        answer = "-1" if count == 1 else self.answers.get(question, "-1")
        return json.dumps(
            {
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"So: #### {answer}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        ).encode()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
