"""``selection.py``: allow- and deny-lists (``INTERACTIONS_PLUGINS``, ``INTERACTIONS_DISABLE``)."""

from __future__ import annotations

import pytest

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
