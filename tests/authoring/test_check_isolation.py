"""The ``isolation`` check (``_check_isolation.py``): sessions on one instance stay apart."""

from __future__ import annotations

import itertools
from typing import Any

from checker_fakes import ExactInteraction, assert_reported

from interactions_core import InteractionResult, SessionInteraction
from interactions_core.testing import Episode, check_interaction


class SharedStateInteraction(SessionInteraction):
    """Keeps the ground truth on the shared instance: sessions see each other's."""

    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> None:
        self.truth = str(ground_truth)

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        ok = str(messages[-1].get("content", "")).endswith(self.truth)
        return InteractionResult(ok, "", 1.0 if ok else 0.0)


_counter = itertools.count()


class Flaky(ExactInteraction):
    """Answers with a running number: two solo runs never agree."""

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        return InteractionResult(False, f"call {next(_counter)}", 0.0)


def test_shared_state_is_reported_with_the_first_difference() -> None:
    error = assert_reported(SharedStateInteraction, "isolation", "sessions share state")
    assert "first difference at step 1" in str(error)


def test_isolation_needs_distinct_episodes() -> None:
    report = check_interaction(ExactInteraction, episodes=[Episode(["1"], {"ground_truth": "1"})])
    assert any("isolation not checked" in n for n in report.notes)


def test_non_deterministic_episodes_are_noted_not_compared() -> None:
    report = check_interaction(Flaky, raise_on_error=False)
    assert "isolation" not in {v.check for v in report.violations}, report.format()
    assert any(
        n.startswith("episode(s) 1, 2, 3 gave different results on two solo runs")
        for n in report.notes
    ), report.notes


class FromKwargs(SessionInteraction):
    """Keeps nothing per session: the ground truth comes with every call, as a run passes it."""

    def new_session(self, **kwargs: Any) -> dict[str, Any]:
        return {}

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        ok = str(messages[-1].get("content", "")).endswith(str(kwargs.get("ground_truth")))
        return InteractionResult(ok, "yes" if ok else "no", 1.0 if ok else 0.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return 1.0 if kwargs.get("ground_truth") else 0.0


def test_the_concurrent_run_makes_the_same_calls_as_the_solo_runs() -> None:
    """Both sides go through Session: the interaction kwargs reach every call of both."""
    report = check_interaction(FromKwargs, skip=["messages"], raise_on_error=False)
    assert report.ok, report.format()
    assert not any("isolation" in n for n in report.notes)
