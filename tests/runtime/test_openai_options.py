"""The openai policy's options, checked before any request."""

from __future__ import annotations

from typing import Any

import pytest

from interactions_core.runtime.policies.openai import (
    Endpoint,
    check_limits,
    credentials,
    request_params,
)

VALID: dict[str, Any] = {
    "model": "m",
    "concurrency": None,
    "retries": 4,
    "seed": None,
    "timeout": 120.0,
    "backoff": 0.5,
    "extra_body": None,
}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("model", "", "model must be the served model's name"),
        ("concurrency", 0, "concurrency must be a positive integer, not 0"),
        ("concurrency", True, "concurrency must be a positive integer, not True"),
        ("retries", -1, "retries must be a non-negative integer, not -1"),
        ("seed", 1.5, "seed must be an integer, not 1.5"),
        ("timeout", 0, "timeout must be a positive number of seconds, not 0"),
        ("backoff", "1", "backoff must be a positive number of seconds, not '1'"),
        # NaN: a timeout that never expires (a server that never answers hung the run)
        ("timeout", float("nan"), "timeout must be a positive number of seconds, not nan"),
        ("timeout", float("inf"), "timeout must be a positive number of seconds, not inf"),
        ("max_backoff", -5, "max_backoff must be a positive number of seconds, not -5"),
        ("max_backoff", float("nan"), "max_backoff must be a positive number of seconds"),
        ("extra_body", [1], "extra_body must be a mapping (JSON object)"),
    ],
)
def test_each_bad_option_is_named(option: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        check_limits(**{**VALID, option: value})
    assert str(info.value).startswith(message)


def test_valid_options_pass() -> None:
    check_limits(**{**VALID, "concurrency": 8, "seed": 0, "extra_body": {"top_k": 5}})


def test_the_endpoint_gets_chat_completions_once_and_a_host_without_credentials() -> None:
    endpoint = Endpoint("https://user:secret@api.example:8443/v1/")
    assert endpoint.url == "https://user:secret@api.example:8443/v1/chat/completions"
    assert (endpoint.scheme, endpoint.host, endpoint.port) == ("https", "api.example", 8443)
    assert endpoint.path == "/v1/chat/completions"
    assert endpoint.netloc == "api.example:8443"  # the Host header never carries the password
    assert Endpoint("http://h/v1/chat/completions").path == "/v1/chat/completions"
    assert Endpoint("http://h").port is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://h/v1", "base_url must be an http(s) URL, not 'ftp://h/v1'"),
        ("http:///v1", "base_url must be an http(s) URL"),
        ("http://h:99999/v1", "base_url has an invalid port: 'http://h:99999/v1'"),
    ],
)
def test_a_bad_base_url_is_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match="base_url") as info:
        Endpoint(url)
    assert str(info.value).startswith(message)


def test_the_key_comes_from_the_named_variable_or_openai_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    headers, key_env = credentials(None)
    assert "Authorization" not in headers and key_env is None
    monkeypatch.setenv("OPENAI_API_KEY", "k1")
    headers, key_env = credentials(None)
    assert headers["Authorization"] == "Bearer k1" and key_env == "OPENAI_API_KEY"
    monkeypatch.setenv("MY_KEY", "k2")
    headers, key_env = credentials("MY_KEY")
    assert headers["Authorization"] == "Bearer k2" and key_env == "MY_KEY"
    assert headers["Content-Type"] == "application/json"
    with pytest.raises(ValueError, match=r"api_key_env names \$NOT_SET_ANYWHERE"):
        credentials("NOT_SET_ANYWHERE")


def test_request_params_send_what_is_set_and_extra_body_last() -> None:
    params = request_params(0.7, None, 64, ["\n"], None, {"top_k": 5, "temperature": 0.1})
    assert params == {"temperature": 0.1, "max_tokens": 64, "stop": ["\n"], "top_k": 5}
    assert request_params(None, None, None, None, 0, {}) == {"seed": 0}


def test_the_retry_delay_stays_finite_however_many_retries() -> None:
    """retries=1100 with a tiny backoff: 2**attempt as a float overflowed at attempt 1024,
    and every episode failed with OverflowError instead of the server's own error."""
    from interactions_core.runtime.policies.http import Retries

    retries = Retries(1100, 1e-300, 1e-300)
    assert all(0 < retries.delay(attempt, None) <= 1e-300 for attempt in (0, 1023, 1024, 1099))
