"""pass@k, percentiles, prompt groups and usage counters; replay of several recorded attempts."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtime_fakes import Recorder

from interactions_core.cli import main
from interactions_core.runtime import PolicyError, ReplayPolicy, run_episodes
from interactions_core.runtime.stats import PromptGroups, UsageStats, pass_at_k, percentile


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """The fraction of k-subsets of n samples (c passing) holding at least one pass."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@given(
    st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n)))
)
def test_pass_at_k_is_the_subset_probability(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_exact_values_and_bad_input() -> None:
    assert pass_at_k(2, 1, 1) == 0.5 and pass_at_k(2, 1, 2) == 1.0
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(4, 1, 2) == 0.5  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(2, 3, 1)


@given(st.lists(st.floats(0, 1000, allow_nan=False), min_size=2, max_size=50))
def test_percentile_matches_the_inclusive_quantiles(values: list[float]) -> None:
    ordered = sorted(values)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    for q in (1, 50, 90, 99):
        assert percentile(ordered, q) == pytest.approx(cuts[q - 1], rel=1e-9, abs=1e-9)
    assert percentile(ordered, 0) == ordered[0] and percentile(ordered, 100) == ordered[-1]


def test_prompt_groups_by_interaction_and_uneven_groups() -> None:
    groups = PromptGroups(repeat=3)
    for index, scores in enumerate([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0]]):
        for s in scores:
            groups.add("a", index, s)
    groups.add("b", 7, 0.5)
    groups.add("b", 7, 1.0)
    groups.add("b", 7, 1.0)
    data = groups.as_dict()
    a = data["by_interaction"]["a"]
    # pass@1: mean of 1/3, 0, 1; pass@3 only over the prompts with 3 scored episodes.
    assert a["pass_at_k"]["1"] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert a["pass_at_k"]["3"] == pytest.approx((1 + 0) / 2)
    assert a["uniform_groups"] == 2 and a["prompts"] == 3
    b = data["by_interaction"]["b"]
    assert b["pass_at_k"] == {"1": pytest.approx(2 / 3), "2": 1.0, "3": 1.0}
    assert b["score_std_mean"] == pytest.approx(statistics.stdev([0.5, 1.0, 1.0]))
    assert data["prompts"] == 4 and data["pass_at_k"]["3"] == pytest.approx(2 / 3)
    lines = groups.format_lines()
    assert lines[0].startswith("pass@k            1: ") and any(" a  " in x for x in lines)


def test_prompt_groups_pass_score_and_single_repeat() -> None:
    groups = PromptGroups(repeat=1, pass_score=0.5)
    for i, s in enumerate([0.2, 0.5, 0.9, 0.0]):
        groups.add(None, i, s)
    data = groups.as_dict()
    assert data["pass_at_k"] == {"1": 0.5} and data["by_interaction"]["-"]["prompts"] == 4
    assert groups.format_lines() == []  # K = 1: the text summary stays as it was


def test_usage_stats_totals_means_and_percentiles() -> None:
    usage = UsageStats()
    assert usage.as_dict() is None and usage.format_lines() == []
    for i in range(1, 101):
        usage.add(
            {
                "prompt_tokens": 10,
                "completion_tokens": i,
                "turns": [{"latency_s": i / 1000}],
            }
        )
    usage.add({"prompt_tokens": None, "completion_tokens": None, "turns": []})
    data = usage.as_dict()
    assert data is not None
    assert (data["episodes"], data["requests"]) == (101, 100)
    assert data["prompt_tokens"] == 1000 and data["completion_tokens"] == 5050
    assert data["completion_tokens_per_episode"] == pytest.approx(5050 / 101)
    assert data["latency_s"]["p50"] == pytest.approx(0.0505)
    assert data["latency_s"]["p99"] == pytest.approx(0.09901)
    assert data["latency_s"]["max"] == 0.1
    text = "\n".join(usage.format_lines(in_flight_max=4))
    assert "prompt 1,000 (9.9/episode)" in text and "at most 4 in flight" in text


# -- replay with several recorded attempts ------------------------------------------------


def attempts_sample(attempts: Any) -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": "q"}],
        "interaction_kwargs": {"name": "rec", "answer": "yes"},
        "responses": attempts,
    }


async def test_repeat_r_replays_attempt_r() -> None:
    samples = [attempts_sample([["no", "yes"], ["yes"], ["no", "no"]])]
    summary = await run_episodes(
        samples,
        ReplayPolicy(),
        {"rec": Recorder()},
        repeat=3,
        keep_records=True,
        observe=False,
    )
    assert summary.records is not None
    by_repeat = {r.repeat: r for r in summary.records}
    assert [by_repeat[r].turns for r in range(3)] == [2, 1, 2]
    assert [by_repeat[r].end_reason for r in range(3)] == ["terminated", "terminated", "exhausted"]
    assert {r.index for r in summary.records} == {0}
    # Recorder's final score is 0.5 whatever happened: pass@k counts scores >= 1.0 only.
    assert summary.as_dict()["pass_at_k"] == {"1": 0.0, "2": 0.0, "3": 0.0}


async def test_missing_attempts_are_errors_that_say_what_to_do() -> None:
    summary = await run_episodes(
        [attempts_sample([["yes"]]), attempts_sample(["yes"])],
        ReplayPolicy(),
        {"rec": Recorder()},
        repeat=2,
        keep_records=True,
        observe=False,
    )
    assert summary.records is not None
    errors = {(r.index, r.repeat): r.errors[0]["message"] for r in summary.records if r.errors}
    assert set(errors) == {(0, 1), (1, 1)}
    assert "holds 1 recorded attempt, so repeat 1 (0-based) has none" in errors[(0, 1)]
    assert "run with --repeat 1 or fewer" in errors[(0, 1)]
    assert "holds one recorded attempt (a list of replies)" in errors[(1, 1)]
    assert list(ReplayPolicy().start({"responses": [["a"], "b"]}, repeat=0)) == ["a"]
    with pytest.raises(PolicyError, match="attempt 1 of field 'responses' must be a list"):
        ReplayPolicy().start({"responses": [["a"], "b"]}, repeat=1)


def test_repeat_flag_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": [{"role": "user", "content": "q"}]}) + "\n")
    with pytest.raises(SystemExit):
        main(["run", "--data", str(data), "--repeat", "0"])
    assert "--repeat: must be at least 1, not 0" in capsys.readouterr().err


def test_gsm8k_solutions_as_attempts_give_pass_at_4(
    gsm8k_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The four recorded solutions of each GSM8K test problem as four single-turn attempts.

    pass@4 is the share of problems with at least one right solution, the same
    887/1319 the multi-turn replay of docs/run.md terminates.
    """
    keys = ["6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"]
    data = tmp_path / "attempts.jsonl"
    right = []
    with (gsm8k_data / "example_model_solutions.jsonl").open() as src, data.open("w") as out:
        for line in src:
            row = json.loads(line)
            truth = row["ground_truth"].rsplit("A: ", 1)[1].strip().replace(",", "")
            out.write(
                json.dumps(
                    {
                        "prompt": [{"role": "user", "content": row["question"]}],
                        "interaction_kwargs": {"name": "gsm8k", "ground_truth": truth},
                        "responses": [[row[k]["solution"]] for k in keys],
                    }
                )
                + "\n"
            )
            right.append(truth)
    config = tmp_path / "flexible.yaml"
    config.write_text("interaction:\n  - name: gsm8k\n    config: {method: flexible}\n")
    args = ["run", str(config), "--data", str(data), "--repeat", "4", "--json"]
    assert main([*args, "--max-assistant-turns", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 4 * 1319 and summary["errors"] == 0
    at_k = summary["pass_at_k"]
    assert at_k["4"] == pytest.approx(887 / 1319)
    # pass@1 is the mean share of right solutions, i.e. the mean final score.
    assert at_k["1"] == pytest.approx(summary["final_score_mean"])
    assert at_k["1"] < at_k["2"] < at_k["3"] < at_k["4"]
    assert summary["prompt_groups"]["prompts"] == len(right) == 1319


def test_pass_score_sets_what_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    rows = [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "interaction_kwargs": {"name": "rec", "answer": "yes"},
            "responses": [["no"], ["yes"]],
        }
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "c.yaml"
    config.write_text("interaction:\n  - name: rec\n    class_name: runtime_fakes.Recorder\n")
    args = ["run", str(config), "--data", str(data), "--repeat", "2", "--json"]
    assert main([*args, "--max-assistant-turns", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert main([*args, "--max-assistant-turns", "1", "--pass-score", "0.5"]) == 0
    # Recorder's final score is always 0.5: with --pass-score 0.5 every episode passes.
    assert json.loads(capsys.readouterr().out)["pass_at_k"] == {"1": 1.0, "2": 1.0}
    with pytest.raises(SystemExit):
        main([*args, "--pass-score", "nan"])
    assert "--pass-score: must be a finite number, not nan" in capsys.readouterr().err


async def test_policy_usage_hook_feeds_the_record_and_the_summary() -> None:
    class Metered:
        def start(self, sample: Any) -> list[int]:
            return [0]

        def reply(self, state: list[int], messages: Any) -> str:
            state[0] += 1
            return "x"

        def usage(self, state: list[int]) -> dict[str, Any]:
            return {
                "prompt_tokens": 10,
                "completion_tokens": state[0],
                "turns": [{"latency_s": 0.5}],
            }

    class Broken(Metered):
        def usage(self, state: list[int]) -> dict[str, Any]:
            raise RuntimeError("meter broke")

    class Attribute(Metered):
        usage = {"not": "a method"}  # type: ignore[assignment]

    samples = [{"prompt": [{"role": "user", "content": "q"}]}] * 3
    summary = await run_episodes(samples, Metered(), None, keep_records=True, observe=False)
    assert summary.records is not None
    assert all(
        r.usage == {"prompt_tokens": 10, "completion_tokens": 1, "turns": [{"latency_s": 0.5}]}
        for r in summary.records
    )
    usage = summary.as_dict()["usage"]
    assert (usage["prompt_tokens"], usage["requests"], usage["latency_s"]["p99"]) == (30, 3, 0.5)

    broken = await run_episodes(samples, Broken(), None, keep_records=True, observe=False)
    assert broken.records is not None and broken.errors == 3
    assert broken.records[0].errors[0]["where"] == "policy.usage"
    assert "meter broke" in broken.records[0].errors[0]["message"]

    plain = await run_episodes(samples, Attribute(), None, keep_records=True, observe=False)
    assert plain.errors == 0 and plain.as_dict()["usage"] is None

    # Not a mapping, or a KeyboardInterrupt: that episode's error. They stopped the whole
    # run in the summary's accounting, before any record was written.
    for odd, words in (([1, 2, 3], "must return a dict, not list"), ("lots", "not str")):

        class Odd(Metered):
            def usage(self, state: list[int], odd: Any = odd) -> Any:
                return odd

        run = await run_episodes(samples, Odd(), None, keep_records=True, observe=False)
        assert run.records is not None and run.errors == 3
        assert words in run.records[0].errors[0]["message"]

    class Interrupting(Metered):
        def usage(self, state: list[int]) -> dict[str, Any]:
            raise KeyboardInterrupt("usage KI")

    run = await run_episodes(samples, Interrupting(), None, keep_records=True, observe=False)
    assert run.records is not None and run.errors == 3 and run.episodes == 3


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_runner_refuses_a_bad_repeat(bad: Any) -> None:
    from interactions_core.runtime import Runner

    with pytest.raises(ValueError, match="repeat must be a positive integer"):
        Runner(ReplayPolicy(), None, repeat=bad, observe=False)


def test_reported_ks_are_few_and_reachable() -> None:
    from interactions_core.runtime.stats import reported_ks

    assert reported_ks(3, 3) == [1, 2, 3]
    assert reported_ks(12, 12) == [*range(1, 11), 12]
    assert reported_ks(100, 100) == [*range(1, 11), 16, 32, 64, 100]
    # Groups smaller than --repeat (errored repeats): no k beyond the largest group.
    assert reported_ks(10**9, 4) == [1, 2, 3, 4]
    assert len(reported_ks(30_000, 30_000)) == 10 + 11 + 1


def test_huge_repeat_summarises_only_the_reported_ks() -> None:
    """One prompt with 30,000 repeats: pass@k for a few k, each equal to the exact estimate."""
    groups = PromptGroups(repeat=30_000)
    for i in range(30_000):
        groups.add("a", 0, 1.0 if i % 3 == 0 else 0.0)
    at_k = groups.as_dict()["pass_at_k"]
    assert list(at_k) == [str(k) for k in [*range(1, 11), *(2**p for p in range(4, 15)), 30_000]]
    assert at_k["1"] == pytest.approx(1 / 3)
    assert at_k["2"] == pytest.approx(1 - (20_000 * 19_999) / (30_000 * 29_999))
    assert at_k["30000"] == 1.0
    # A group of 5 under --repeat 10**9 reports k = 1..5 and stops there.
    small = PromptGroups(repeat=10**9)
    for score in (1.0, 0.0, 0.0, 0.0, 0.0):
        small.add("a", 0, score)
    assert list(small.as_dict()["pass_at_k"]) == ["1", "2", "3", "4", "5"]


def test_usage_figures_a_server_or_plugin_could_not_mean_are_left_out() -> None:
    """A server's prompt_tokens of 10**400 overflowed the per-episode mean ("unexpected
    OverflowError", no summary), and a plugin's latency of 2**1024 stopped the run before
    its record was written; negative counts and NaN latencies reached the summary."""
    usage = UsageStats()
    usage.add(
        {"prompt_tokens": 10**400, "completion_tokens": -5, "turns": [{"latency_s": 2**1024}]}
    )
    usage.add(
        {
            "prompt_tokens": 7,
            "completion_tokens": 3,
            "turns": [{"latency_s": v} for v in (float("nan"), float("inf"), -1.0, 0.25)],
        }
    )
    usage.add({"prompt_tokens": 1, "turns": [{}, {"latency_s": None}]})  # requests untimed
    data = usage.as_dict()
    assert data is not None
    # Every request is counted (they read 1: only those with a latency), each latency
    # only when it is one.
    assert (data["prompt_tokens"], data["completion_tokens"], data["requests"]) == (8, 3, 7)
    assert data["latency_s"]["max"] == 0.25
    assert usage.format_lines()  # prints


async def test_a_policys_token_counts_in_the_record_are_what_the_summary_adds_up() -> None:
    """A plugin policy's record kept `prompt_tokens: -5` (or 1.5, or 10**30), which the
    summary's sums skip: the record and the summary disagreed on the same episode."""

    class Odd:
        def start(self, sample: Any) -> list[int]:
            return [sample["i"]]

        def reply(self, state: list[int], messages: Any) -> str:
            return "x"

        def usage(self, state: list[int]) -> dict[str, Any]:
            odd: list[Any] = [-5, 1.5, 10**30, "7", True, 12]
            return {"prompt_tokens": odd[state[0]], "completion_tokens": 3, "note": "kept"}

    samples = [{"prompt": [{"role": "user", "content": "q"}], "i": i} for i in range(6)]
    summary = await run_episodes(samples, Odd(), None, keep_records=True, observe=False)
    assert summary.records is not None
    told = sorted(summary.records, key=lambda r: r.index)
    assert [r.usage["prompt_tokens"] for r in told] == [None] * 5 + [12]
    assert all(r.usage["completion_tokens"] == 3 and r.usage["note"] == "kept" for r in told)
    assert summary.as_dict()["usage"]["prompt_tokens"] == sum(
        r.usage["prompt_tokens"] or 0 for r in told
    )
