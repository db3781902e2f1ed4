"""The advice when no Ray cluster answers matches what the command was asked to do.

``interactions ray check`` without an address joins the cluster on this machine
(``"auto"``) and never starts one, so it must not advise leaving the address out;
a ``HOST:PORT`` that does not answer gets advice about that address. Ray itself is
stood in for by a module whose ``init`` fails as Ray's does.
"""

from __future__ import annotations

import sys
import types

import pytest

from interactions_core.cli import main
from interactions_core.ray.errors import RayUnavailableError, connect


@pytest.fixture
def ray_without_cluster(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    calls: list[dict] = []
    fake = types.ModuleType("ray")

    def init(**options: object) -> None:
        calls.append(dict(options))
        raise ConnectionError("Could not find any running Ray instance.")

    fake.init = init  # type: ignore[attr-defined]
    fake.is_initialized = lambda: False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return calls


def test_no_address_and_no_cluster_advises_starting_one(
    ray_without_cluster: list[dict], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ray", "check", "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert ray_without_cluster[0]["address"] == "auto"
    assert "no Ray cluster is running on this machine" in err
    assert "ray start --head" in err and "--address HOST:PORT" in err
    assert "leave the address out" not in err and "Traceback" not in err


def test_an_address_that_does_not_answer_gets_advice_about_it(
    ray_without_cluster: list[dict],
) -> None:
    with pytest.raises(RayUnavailableError) as info:
        connect("127.0.0.1:1")  # nothing listens on port 1: refused before ray.init
    text = str(info.value)
    assert "no Ray cluster could be reached at '127.0.0.1:1'" in text
    assert "Check the address" in text and "leave the address out" not in text
    assert ray_without_cluster == []
