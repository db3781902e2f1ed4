"""The pytest plugin: registered through ``pytest11``; its fixtures work in a plain suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from interactions_core import InteractionResult, SessionInteraction


class Echo(SessionInteraction):
    def new_session(self, ground_truth: Any = None, **kwargs: Any) -> str:
        return str(ground_truth)

    async def respond(self, state: Any, messages: list[dict[str, Any]], **kwargs: Any):
        ok = bool(messages) and messages[-1].get("content") == state
        return InteractionResult(ok, "yes" if ok else "no", 1.0 if ok else 0.0)

    async def score(self, state: Any, **kwargs: Any) -> float:
        return 0.0


def test_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    values = {ep.value for ep in entry_points(group="pytest11")}
    assert "interactions_core.testing.pytest_plugin" in values


def test_fixtures_are_available_here(
    interaction_registry: Any, session_driver: Any, interaction_checker: Any
) -> None:
    registry = interaction_registry({"echo": Echo})
    assert registry.names() == ["echo"]
    assert registry.create("echo").name == "echo"
    driver = session_driver("echo", registry=registry)
    transcript = driver.play_sync(["a", "b"], ground_truth="b")
    assert transcript.scores == [0.0, 1.0]
    assert interaction_checker(Echo).ok


async def test_driver_fixture_in_an_async_test(session_driver: Any) -> None:
    transcript = await session_driver(Echo).play(["x"], ground_truth="x")
    assert transcript.terminated


def test_worked_example_from_the_docs_runs_in_a_fresh_pytest(tmp_path: Path) -> None:
    """A suite that installs nothing and imports no fixture module still gets the fixtures."""
    (tmp_path / "echo_plugin.py").write_text(
        textwrap.dedent(
            """
            from interactions_core import InteractionResult, SessionInteraction

            class EchoInteraction(SessionInteraction):
                def new_session(self, ground_truth=None, **kwargs):
                    return {"truth": str(ground_truth), "score": 0.0}

                async def respond(self, state, messages, **kwargs):
                    ok = bool(messages) and messages[-1].get("content") == state["truth"]
                    state["score"] = 1.0 if ok else 0.0
                    return InteractionResult(ok, "right" if ok else "wrong", state["score"])

                async def score(self, state, **kwargs):
                    return state["score"]

            class SharedEcho(EchoInteraction):
                def new_session(self, ground_truth=None, **kwargs):
                    self.truth = str(ground_truth)  # the bug the checker must catch
                    return {"truth": self.truth, "score": 0.0}

                async def respond(self, state, messages, **kwargs):
                    ok = bool(messages) and messages[-1].get("content") == self.truth
                    return InteractionResult(ok, "", 1.0 if ok else 0.0)
            """
        )
    )
    (tmp_path / "test_echo.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from interactions_core.errors import ConformanceError
            from echo_plugin import EchoInteraction, SharedEcho

            EPISODES = [(["a", "b"], {"ground_truth": "b"}), (["c"], {"ground_truth": "c"})]

            def test_conformance(interaction_checker):
                interaction_checker(EchoInteraction, episodes=EPISODES)

            def test_checker_catches_shared_state(interaction_checker):
                with pytest.raises(ConformanceError, match="isolation"):
                    interaction_checker(SharedEcho, episodes=EPISODES)

            async def test_second_try(session_driver):
                transcript = await session_driver(EchoInteraction).play(
                    ["wrong", "b"], ground_truth="b"
                )
                assert transcript.final_score == 1.0

            def test_by_name(interaction_registry, session_driver):
                registry = interaction_registry({"echo": EchoInteraction})
                driver = session_driver("echo", registry=registry)
                assert driver.play_sync(["x"], ground_truth="x").terminated
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout
