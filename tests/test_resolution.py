"""``_resolution``: which interaction a name means, and the errors when it means none or several."""

from __future__ import annotations

from typing import Any

import pytest

from interactions_core import BaseInteraction
from interactions_core._names import Selection
from interactions_core.errors import ConflictError, DisabledError, UnknownInteractionError
from interactions_core.registry import Registry


class Judge(BaseInteraction):
    async def generate_response(self, instance_id: str, messages: Any, **kwargs: Any) -> Any:
        return True, "", 1.0, {}


def two_claims(selection: Selection | None = None) -> Registry:
    registry = Registry.from_classes({}, selection=selection or Selection())
    registry.add("judge", Judge, distribution="acme-a")
    registry.add("judge", Judge, distribution="acme-b")
    registry.add("echo", Judge, distribution="acme-a")
    return registry


def test_a_plain_name_claimed_twice_is_a_conflict_naming_the_qualified_names() -> None:
    with pytest.raises(ConflictError) as info:
        two_claims().resolve("judge")
    message = str(info.value)
    assert message.startswith("interaction name 'judge' is registered by 2 distributions:")
    assert "Write the qualified name 'acme-a:judge' or 'acme-b:judge'" in message
    assert message.endswith("(INTERACTIONS_DISABLE=acme-b).")


def test_a_qualified_name_picks_one_distribution() -> None:
    entry = two_claims().resolve("acme-b:judge")
    assert (entry.name, entry.distribution) == ("judge", "acme-b")


def test_disabling_one_claim_resolves_the_other_and_refuses_the_disabled_one() -> None:
    registry = two_claims(Selection(deny=frozenset({"acme-b"})))
    assert registry.resolve("judge").distribution == "acme-a"
    with pytest.raises(DisabledError, match=r"^interaction 'judge' \(acme-b, "):
        registry.resolve("acme-b:judge")


def test_a_name_only_disabled_entries_have_says_how_to_enable_it() -> None:
    registry = two_claims(Selection(deny=frozenset({"judge"})))
    with pytest.raises(DisabledError) as info:
        registry.resolve("judge")
    assert str(info.value).endswith(
        "; change INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE to use it"
    )


def test_an_unknown_name_gets_a_did_you_mean_and_what_is_installed() -> None:
    registry = two_claims(Selection(deny=frozenset({"echo"})))
    with pytest.raises(UnknownInteractionError) as info:
        registry.resolve("judg")
    assert str(info.value) == (
        "unknown interaction 'judg'; did you mean 'judge'? Installed (1): judge. "
        "1 installed interaction is disabled by INTERACTIONS_PLUGINS / INTERACTIONS_DISABLE. "
        "Install the plugin that provides it, or see 'interactions list'."
    )


def test_an_empty_registry_says_nothing_is_installed() -> None:
    with pytest.raises(UnknownInteractionError, match=r"\. No interactions are installed\. "):
        Registry.from_classes({}).resolve("judge")


# -- one resolver for every kind of named thing ----------------------------------------


def test_builders_resolve_through_the_same_rules() -> None:
    """Conflicts and qualified names read the same for every kind; "unknown" is the kind's."""
    from interactions_core._names import Contribution, resolve
    from interactions_core.errors import UnknownBuilderError

    class Builder(Contribution):
        noun = "dataset builder"

    builders = [
        Builder("math", "acme-a", "acme_a:build", "hook"),
        Builder("math", "acme-b", "acme_b:build", "hook"),
        Builder("words", "acme-a", "acme_a:words", "hook"),
    ]
    calls: list[str] = []

    def unknown() -> UnknownBuilderError:
        calls.append("unknown")
        return UnknownBuilderError("unknown dataset builder 'nope'")

    with pytest.raises(ConflictError, match=r"^dataset builder name 'math' is registered by 2"):
        resolve(builders, "math", unknown)
    assert resolve(builders, "acme-b:math", unknown) is builders[1]
    assert resolve(builders, "words", unknown) is builders[2]
    with pytest.raises(UnknownBuilderError):
        resolve(builders, "nope", unknown)
    assert calls == ["unknown"]  # built only when needed


def test_the_policy_and_builder_lookups_use_the_one_resolver() -> None:
    import inspect

    for method in (Registry.resolve, Registry.policy, Registry.builder):
        source = inspect.getsource(method)
        assert "resolve(" in source and "ConflictError" not in source, method.__name__
