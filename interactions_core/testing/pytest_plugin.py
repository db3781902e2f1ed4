"""pytest fixtures for interaction authors (loaded through the ``pytest11`` entry point).

Installing interactions-core makes these fixtures available in every test suite;
nothing needs to be installed or registered for the interaction under test::

    from my_plugin import EchoInteraction

    def test_conformance(interaction_checker):
        interaction_checker(EchoInteraction, {"max_attempts": 2})

    async def test_second_try(session_driver):
        driver = session_driver(EchoInteraction)
        transcript = await driver.play(["wrong", "right"], ground_truth="right")
        assert transcript.final_score == 1.0

    def test_by_name(interaction_registry):
        registry = interaction_registry({"echo": EchoInteraction})
        assert registry.create("echo").name == "echo"

The fixtures are factories, so one test can build several registries or drivers.
This module imports nothing from the framework until a fixture is used, to keep
pytest's start-up untouched for suites that never use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

__all__ = ["interaction_checker", "interaction_registry", "session_driver"]


@pytest.fixture
def interaction_registry() -> Callable[..., Any]:
    """Build a :class:`~interactions_core.registry.Registry` from in-memory classes.

    ``interaction_registry({"name": Class, ...}, distribution="<memory>")``; the
    registry resolves, validates, and creates by name exactly like the installed
    one, and ignores what is installed (and the allow/deny environment variables).
    """

    def make(classes: Mapping[str, Any], *, distribution: str | None = None) -> Any:
        from interactions_core._names import Selection
        from interactions_core.registry import MEMORY_DISTRIBUTION, Registry

        return Registry.from_classes(
            dict(classes),
            distribution=distribution or MEMORY_DISTRIBUTION,
            selection=Selection(),
        )

    return make


@pytest.fixture
def session_driver() -> Callable[..., Any]:
    """Build a :class:`~interactions_core.testing.SessionDriver`.

    ``session_driver(target, config=None, *, registry=None, timeout=30.0)``:
    ``target`` is an interaction class (instantiated with ``config``), an instance,
    or a name resolved in ``registry`` (default: the installed plugins).
    """

    def make(
        target: Any,
        config: Mapping[str, Any] | None = None,
        *,
        registry: Any = None,
        timeout: float | None = 30.0,
    ) -> Any:
        from interactions_core.testing.driver import SessionDriver

        if isinstance(target, str):
            if registry is None:
                from interactions_core.registry import get_registry

                registry = get_registry()
            interaction = registry.create(target, dict(config or {}))
        elif isinstance(target, type):
            interaction = target(dict(config or {}))
        else:
            interaction = target
        return SessionDriver(interaction, timeout=timeout)

    return make


@pytest.fixture
def interaction_checker() -> Callable[..., Any]:
    """:func:`~interactions_core.testing.check_interaction`: raises with a full report.

    ``interaction_checker(target, config=None, *, episodes=None, registry=None,
    skip=(), timeout=10.0, raise_on_error=True)``.
    """
    from interactions_core.testing.checker import check_interaction

    return check_interaction
