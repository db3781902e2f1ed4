"""``_selection.py``: allow- and deny-lists (``INTERACTIONS_PLUGINS``, ``INTERACTIONS_DISABLE``)."""

from __future__ import annotations

import pytest

from interactions_core._names import Selection, normalize
from interactions_core.errors import DisabledError
from interactions_core.registry import Registry

GROUP = "interactions_core.interactions"


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
