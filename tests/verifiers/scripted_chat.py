"""An OpenAI-compatible chat server on 127.0.0.1 that plays a GSM8K student: wrong, then right.

    python tests/verifiers/scripted_chat.py ROWS.jsonl REQUESTS.jsonl

Prints its port on the first line of stdout, then serves until killed. It stands
in for the model ``vf-eval`` evaluates, so the test checks what verifiers does with
an interaction's feedback rather than what a real model would say.

The GSM8K question is the first message of the observation of ``interactions
serve`` that verifiers' OpenEnv taskset sends as JSON in the last user turn, or,
in a plain chat (the ``interactions-verifiers`` taskset), the first user turn
itself; the server looks its answer up in ``ROWS`` (GSM8K's own ``question`` /
``answer`` lines). With no assistant turn in the request yet it answers one more
than the truth; after that it answers the truth. Both answers end in
``#### <number>``, text that is not JSON, so verifiers sends it whole as the
action's one field. Every request is appended to ``REQUESTS`` as one JSON line, so
the test can see what the model was shown.

It answers ``stream: true`` requests (what verifiers' chat program sends) as
server-sent events, with a final usage chunk, and plain requests as one JSON body.
A request it cannot place (no user turn, an unknown question) gets a 400
whose message says why, which fails the rollout visibly instead of scoring it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def final_number(answer: str) -> str:
    """GSM8K's reference number: what follows ``####``, without thousands separators."""
    return answer.rsplit("####", 1)[-1].strip().replace(",", "")


def load_answers(rows: Path) -> dict[str, str]:
    """Question text -> reference number, for every row of a GSM8K JSONL file."""
    answers: dict[str, str] = {}
    for line in rows.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            answers[row["question"]] = final_number(row["answer"])
    return answers


def text_of(content: Any) -> str:
    """A chat message's text, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def reply_for(messages: list[dict[str, Any]], answers: dict[str, str]) -> str:
    """The scripted student's reply to one request (raises ValueError if it cannot place it)."""
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        raise ValueError("the request has no user turn")
    question = text_of(users[0].get("content"))
    try:
        observation = json.loads(text_of(users[-1].get("content")))["observation"]
    except (json.JSONDecodeError, KeyError, TypeError):
        pass  # plain chat: the first user turn is the question itself
    else:
        question = text_of(observation["messages"][0]["content"])
    if question not in answers:
        raise ValueError(f"not a GSM8K question of the rows: {question[:80]!r}")
    truth = answers[question]
    attempts = sum(1 for m in messages if m.get("role") == "assistant")
    if attempts == 0:
        wrong = int(float(truth)) + 1
        return f"I think it is {wrong}.\n#### {wrong}"
    return f"Let me redo it: the answer is {truth}.\n#### {truth}"


class Handler(BaseHTTPRequestHandler):
    """Chat completions; everything else is a 404."""

    answers: dict[str, str] = {}
    log_path: Path = Path("requests.jsonl")
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log file is the record."""

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_error(404, f"no route {self.path}")
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        with self.lock, self.log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(body) + "\n")
        try:
            reply = reply_for(body.get("messages", []), self.answers)
        except ValueError as exc:
            self._json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        usage = {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112}
        head = {"id": "scripted", "created": int(time.time()), "model": body.get("model", "x")}
        if body.get("stream"):
            self._stream(head, reply, usage)
        else:
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._json(200, {**head, "object": "chat.completion", "choices": [choice],
                             "usage": usage})  # fmt: skip

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, head: dict[str, Any], reply: str, usage: dict[str, int]) -> None:
        """The reply as server-sent events; the connection closes after ``[DONE]``."""
        chunk = {**head, "object": "chat.completion.chunk"}
        delta = {"role": "assistant", "content": reply}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**chunk, "choices": [], "usage": usage},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main() -> None:
    rows, log = Path(sys.argv[1]), Path(sys.argv[2])
    Handler.answers = load_answers(rows)
    Handler.log_path = log
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
