"""The openai client's retry delays, the connection cap, and its accounting."""

from __future__ import annotations

import resource

from interactions_core.runtime.policies.http import Retries, connection_cap
from interactions_core.runtime.policies.openai import EpisodeUsage


def test_retry_delays_double_with_jitter_up_to_the_maximum() -> None:
    retries = Retries(4, 0.5, 3.0)
    for attempt, base in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (9, 3.0)]:
        delays = [retries.delay(attempt, None) for _ in range(50)]
        assert all(base / 2 <= d <= base for d in delays)
        assert len(set(delays)) > 1  # jittered, so retries from many episodes spread out


def test_a_servers_retry_after_is_honoured_up_to_the_maximum() -> None:
    retries = Retries(4, 0.5, 3.0)
    assert retries.delay(0, 2.0) == 2.0
    assert retries.delay(0, 60.0) == 3.0


def test_the_connection_cap_leaves_a_margin_under_the_open_file_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = None if soft == resource.RLIM_INFINITY else max(8, soft - 64)
    assert connection_cap() == expected


def test_usage_totals_stay_none_until_the_server_reports_them() -> None:
    usage = EpisodeUsage({"temperature": 0})
    assert usage.as_dict() is None  # no turn yet: nothing to report
    usage.count(None, 0.25)
    usage.count({"prompt_tokens": 10, "completion_tokens": "7"}, 0.5)
    usage.count({"prompt_tokens": 12, "completion_tokens": 3}, 0.125)
    assert usage.as_dict() == {
        "prompt_tokens": 22,
        "completion_tokens": 3,  # the string count was not a count
        "latency_s": 0.875,
        "turns": [
            {"prompt_tokens": None, "completion_tokens": None, "latency_s": 0.25},
            {"prompt_tokens": 10, "completion_tokens": None, "latency_s": 0.5},
            {"prompt_tokens": 12, "completion_tokens": 3, "latency_s": 0.125},
        ],
    }


def test_a_records_usage_and_the_summary_take_the_same_counts() -> None:
    # A server's -5 completion tokens a turn: the record said -15 after three turns while
    # the summary said 0; a 4,300-digit count was kept in the record and left out of the
    # summary. Counts the summary would not take are not kept in the record either.
    from interactions_core.runtime.stats import UsageStats

    usage = EpisodeUsage({})
    for bad in (-5, 10**4300, 1.5, True):
        usage.count({"prompt_tokens": 4, "completion_tokens": bad}, 0.1)
    record = usage.as_dict()
    assert record is not None
    assert record["prompt_tokens"] == 16 and record["completion_tokens"] is None
    assert all(turn["completion_tokens"] is None for turn in record["turns"])
    summary = UsageStats()
    summary.add(record)
    assert (summary.prompt_tokens, summary.completion_tokens) == (16, 0)
