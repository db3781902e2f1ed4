"""``_names.py``: one lookup, one resolver, one did-you-mean and one error vocabulary for
every named thing; one record and one conflict rule for interactions, policies and
builders; the allow- and deny-lists (``INTERACTIONS_PLUGINS``, ``INTERACTIONS_DISABLE``)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from interactions_core import BaseInteraction
from interactions_core._hooks import Registration
from interactions_core._names import (
    Contribution,
    Selection,
    close_matches,
    mark_conflicts,
    normalize,
    suggest,
    summarize,
)
from interactions_core.cli import main
from interactions_core.errors import (
    ConflictError,
    DisabledError,
    UnknownBuilderError,
    UnknownInteractionError,
    UnknownNameError,
    UnknownPolicyError,
)
from interactions_core.registry import Entry, Registry, get_registry
from interactions_core.runtime.datasets import BuilderInfo, get_builder
from interactions_core.runtime.policies import PolicyInfo, get_policy_class

GROUP = "interactions_core.interactions"


# -- one lookup and one did-you-mean ---------------------------------------------------


PACKAGE = Path(__file__).resolve().parents[1] / "interactions_core"


def test_suggest_formats_the_closest_names() -> None:
    assert close_matches("gsm8", ["weather", "gsm8k", "gsm8k_v2"]) == ["gsm8k", "gsm8k_v2"]
    assert suggest("gsm8", ["gsm8k", "weather"]) == "; did you mean 'gsm8k'?"
    assert suggest("max_row", ["max_rows"], n=1, render=lambda k: "--" + k) == (
        "; did you mean --max_rows?"
    )
    assert suggest("zzz", ["gsm8k"]) == ""


def test_each_kind_has_its_own_unknown_error_under_one_base() -> None:
    registry = get_registry()
    with pytest.raises(UnknownInteractionError, match="did you mean 'gsm8k'") as interaction:
        registry.resolve("gsm8")
    with pytest.raises(UnknownPolicyError, match="did you mean 'replay'") as policy:
        get_policy_class("replya", Registry.from_classes({}))
    with pytest.raises(UnknownBuilderError, match="did you mean 'gsm8k'") as builder:
        get_builder("gsm8", registry)
    errors = [interaction.value, policy.value, builder.value]
    assert all(isinstance(e, UnknownNameError) for e in errors)
    # an unknown policy or builder is not reported as an unknown interaction
    assert not isinstance(policy.value, UnknownInteractionError)
    assert not isinstance(builder.value, UnknownInteractionError)
    assert [e.kind for e in errors] == ["interaction", "policy", "dataset builder"]


def test_difflib_is_used_in_one_place_only() -> None:
    users = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "difflib" in names:
                    users.append(path.relative_to(PACKAGE).as_posix())
    assert users == ["_names.py"]


def test_unknown_interaction_lists_suites_as_one_item(tmp_path, capsys):
    assert main(["show", "gsm8kk"]) == 1
    err = capsys.readouterr().err
    assert "did you mean 'gsm8k'?" in err
    installed = err.split("Installed", 1)[1]
    assert "gsm8k" in installed and "weather" in installed
    assert len(installed) < 200  # not a hundred generated names


def test_summarize() -> None:
    names = ["b", "a", *(f"rg/t{i}" for i in range(106)), "x/one", "x/two"]
    assert summarize(names) == "a, b, rg/* (106 names), x/one, x/two"
    assert summarize([f"n{i:02d}" for i in range(15)], limit=3) == "n00, n01, n02, ... and 12 more"


# -- which interaction a name means ----------------------------------------------------


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


# -- one record and one conflict rule for every kind -----------------------------------


def test_two_distributions_claiming_a_name_are_both_marked() -> None:
    a = Contribution("judge", "acme-a", "a:J", "entry-point")
    b = Contribution("judge", "Acme_B", "b:J", "entry-point")
    same = Contribution("echo", "acme-a", "a:E", "entry-point")
    twin = Contribution("echo", "ACME.a", "a:E", "entry-point")  # one distribution, two spellings
    off = Contribution("judge", "acme-c", "c:J", "entry-point")
    off.status = "disabled"
    mark_conflicts([a, b, same, twin, off], "use a qualified name ({qualified})")
    assert (a.status, b.status) == ("conflict", "conflict")
    assert a.error == (
        "name 'judge' is also provided by Acme_B:judge; "
        "use a qualified name (acme-a:judge) or disable one"
    )
    assert same.status == twin.status == "ok" and off.status == "disabled"


def test_every_kind_is_a_contribution_with_the_same_fields() -> None:
    def builder(**options: object) -> list[dict[str, object]]:
        """Rows from nowhere."""
        return []

    records = [
        Entry("gsm8k", "interactions-gsm8k", "0.1", "interactions_gsm8k:Gsm8kInteraction"),
        PolicyInfo("replay", "interactions-core", "m:ReplayPolicy", "builtin", None),
        BuilderInfo(Registration("rows", builder, "acme-data:acme_data")),
    ]
    for record in records:
        assert isinstance(record, Contribution) and record.status == "ok"
        assert record.qualified == f"{record.distribution}:{record.name}"
    assert [r.noun for r in records] == ["interaction", "policy", "dataset builder"]
    assert records[2].description == "Rows from nowhere."
    assert records[2].target.endswith(
        ":test_every_kind_is_a_contribution_with_the_same_fields.<locals>.builder"
    )


# -- the allow- and deny-lists ---------------------------------------------------------


@pytest.mark.parametrize(
    ("allow", "deny", "expected"),
    [
        (None, None, {"acme": "ok", "acme_b": "ok"}),
        ("", None, {"acme": "disabled", "acme_b": "disabled"}),
        ("acme", None, {"acme": "ok", "acme_b": "disabled"}),
        ("acme-b-dist", None, {"acme": "disabled", "acme_b": "ok"}),
        ("acme,acme_b", "acme_b", {"acme": "ok", "acme_b": "disabled"}),
        (None, "acme-tasks", {"acme": "disabled", "acme_b": "ok"}),
    ],
)
def test_allow_and_deny_lists(make_dist, monkeypatch, allow, deny, expected):
    make_dist("acme-tasks", "1", {GROUP: {"acme": "acme_mod:Acme"}})
    make_dist("acme-b-dist", "1", {GROUP: {"acme_b": "acme_modb:Acme"}})
    if allow is not None:
        monkeypatch.setenv("INTERACTIONS_PLUGINS", allow)
    if deny is not None:
        monkeypatch.setenv("INTERACTIONS_DISABLE", deny)
    registry = Registry.from_environment()
    got = {e.name: e.status for e in registry.entries() if e.name in expected}
    assert got == expected
    for name, status in expected.items():
        if status == "disabled":
            with pytest.raises(DisabledError):
                registry.load(name)


# -- the decision itself, without an installation -----------------------------------


def test_names_are_compared_after_pep_503_normalisation() -> None:
    assert normalize(" Interactions_GSM8K ") == "interactions-gsm8k"
    assert normalize("a.b__c") == "a-b-c"
    selection = Selection.from_env({"INTERACTIONS_DISABLE": "Interactions_GSM8K"})
    assert selection.excluded("gsm8k", "interactions-gsm8k") == "disabled by INTERACTIONS_DISABLE"
    assert selection.excluded("weather", "interactions-weather") is None


def test_the_deny_list_wins_and_an_empty_allow_list_allows_nothing() -> None:
    both = Selection.from_env({"INTERACTIONS_PLUGINS": "acme", "INTERACTIONS_DISABLE": "acme"})
    assert both.excluded("acme") == "disabled by INTERACTIONS_DISABLE"
    empty = Selection.from_env({"INTERACTIONS_PLUGINS": " , "})
    assert "allows nothing" in (empty.excluded("acme") or "")
    only = Selection.from_env({"INTERACTIONS_PLUGINS": "acme"})
    assert only.excluded("other", "other-dist") == "not in INTERACTIONS_PLUGINS"
    assert Selection.from_env({}).excluded("anything") is None


def test_a_hook_plugin_is_allowed_by_one_name_it_provides_but_not_denied_by_one() -> None:
    identities = ("suite", "hooky-suite", "hooky-suite:suite")
    allow_one = Selection.from_env({"INTERACTIONS_PLUGINS": "suite/alpha"})
    assert allow_one.excluded(*identities) == "not in INTERACTIONS_PLUGINS"
    assert allow_one.plugin_excluded(identities, ("suite/alpha", "suite/beta")) is None
    assert allow_one.plugin_excluded(identities, ("suite/gamma",)) is not None
    deny_one = Selection.from_env({"INTERACTIONS_DISABLE": "suite/alpha"})
    assert deny_one.plugin_excluded(identities, ("suite/alpha", "suite/beta")) is None
    deny_dist = Selection.from_env({"INTERACTIONS_DISABLE": "hooky_suite"})
    assert deny_dist.plugin_excluded(identities, ("suite/alpha",)) is not None


def test_the_key_tells_selections_apart_and_ignores_order() -> None:
    one = Selection.from_env({"INTERACTIONS_PLUGINS": "a,b"})
    assert one.key == Selection.from_env({"INTERACTIONS_PLUGINS": "b, a"}).key
    assert one.key != Selection.from_env({"INTERACTIONS_DISABLE": "a,b"}).key
    assert Selection.from_env({}).key != Selection.from_env({"INTERACTIONS_PLUGINS": ""}).key
