"""The openai policy's wire format: the request body and what a response's bytes mean."""

from __future__ import annotations

import json

import pytest

from interactions_core.errors import PolicyError
from interactions_core.runtime.policies.openai import (
    encode_request,
    parse_reply,
    snippet,
    status_error,
)

URL = "http://h/v1/chat/completions"


def body(message: object, **extra: object) -> bytes:
    return json.dumps({"choices": [{"message": message}], **extra}).encode()


def test_the_request_body_is_utf8_json_with_params_last() -> None:
    data = encode_request("m", [{"role": "user", "content": "é"}], {"temperature": 0})
    assert json.loads(data) == {
        "model": "m",
        "messages": [{"role": "user", "content": "é"}],
        "temperature": 0,
    }
    assert "é".encode() in data  # not \u00e9: the body is sent as UTF-8


def test_reply_text_in_each_shape_the_servers_send() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 1}
    assert parse_reply(URL, 200, body({"content": "hi"}, usage=usage)) == ("hi", usage)
    assert parse_reply(URL, 200, body({"content": None})) == ("", None)
    parts = [{"type": "text", "text": "a"}, {"type": "image"}, "b"]
    assert parse_reply(URL, 200, body({"content": parts})) == ("ab", None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"<html>", f"openai: {URL} answered HTTP 200 with a body that is not JSON: '<html>'"),
        (
            json.dumps({"error": "model not loaded"}).encode(),
            f"openai: malformed chat-completions response from {URL} (error: 'model not loaded')",
        ),
        (body({"content": 5}), f"openai: choices[0].message.content from {URL} is a int"),
        (  # read as an empty reply before: the episode scored 0, with no error
            body("#### 25"),
            f"openai: malformed chat-completions response from {URL}: choices[0].message is a str",
        ),
    ],
)
def test_malformed_responses_say_what_came(data: bytes, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_reply(URL, 200, data)
    assert str(info.value).startswith(message)


def test_a_failed_status_hints_at_what_to_check() -> None:
    assert str(status_error(URL, "MY_KEY", 401, b"no")).endswith("check the API key in $MY_KEY")
    assert "no API key was sent (set $OPENAI_API_KEY" in str(status_error(URL, None, 403, b""))
    assert "check base_url" in str(status_error(URL, None, 404, b"not found"))
    assert str(status_error(URL, None, 400, b"bad")) == f"openai: HTTP 400 from {URL}: 'bad'"


def test_snippets_are_cut_at_the_limit() -> None:
    assert snippet(b"  short \n") == "short"
    cut = snippet(b"x" * 500)
    assert len(cut) == 200 and cut.endswith("...")


def test_a_servers_error_field_is_cut_and_escaped_in_the_message() -> None:
    """20 MB of `error` went whole into stderr and every record (40 MB each), escape
    sequences and all."""
    data = json.dumps({"error": "E\x1b[31m" + "x" * 20_000_000}).encode()
    with pytest.raises(PolicyError) as info:
        parse_reply(URL, 200, data)
    message = str(info.value)
    assert len(message) < 1000 and "\x1b" not in message and "\\x1b" in message


def test_a_retry_after_that_is_no_finite_wait_is_ignored() -> None:
    """`Retry-After: nan` turned every backoff into no wait at all."""
    from interactions_core.runtime.policies.http import Response, read_retry_after

    for text, expected in (("2", 2.0), ("nan", None), ("inf", None), ("-3", None), ("x", None)):
        response = Response(429, f"HTTP/1.1 429 Too Many\r\nRetry-After: {text}".encode())
        assert read_retry_after(response) == expected, text
