"""``contribution``: one record and one conflict rule for interactions, policies and builders."""

from __future__ import annotations

from interactions_core._names import Contribution, mark_conflicts
from interactions_core._hooks import Registration
from interactions_core.registry import Entry
from interactions_core.runtime.builders import BuilderInfo
from interactions_core.runtime.policies.registry import PolicyInfo


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
