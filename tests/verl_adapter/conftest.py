"""verl integration tests: they run where verl is installed (``nox -s verl``).

The core's own test run has no verl (it brings torch and Ray), so there these files
are reported as skipped; ``.ci/run`` runs ``nox -s verl``, which installs each
supported verl release in its own virtualenv and runs these tests there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from suites import importable, requires

HERE = Path(__file__).resolve().parent

pytest_pycollect_makemodule = requires("verl", modules=("verl",))
if importable("verl"):
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness import build_model_dir

    return build_model_dir(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path):  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "both_workers: run each test that builds a worker on verl's legacy and v1 workers",
    )
    config.addinivalue_line(
        "markers",
        "one_tokenization: run once, with the default tokenization mode (the test never "
        "tokenizes through the harness, so the other modes would only repeat it)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    once = metafunc.definition.get_closest_marker("one_tokenization") is not None
    if "tokenization" in metafunc.fixturenames and not once:
        from harness import tokenization_modes

        # indirect: the fixture below must run with each mode, or the mode is never set.
        metafunc.parametrize("tokenization", tokenization_modes(), indirect=True)
    marked = metafunc.definition.get_closest_marker("both_workers") is not None
    if marked and "tokenizer" in metafunc.fixturenames:
        from harness import WORKER_KINDS

        metafunc.parametrize("worker_kind", WORKER_KINDS, indirect=True)


@pytest.fixture(autouse=True)
def tokenization(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with each way the installed verl tokenizes appended turns."""
    import harness

    mode = getattr(request, "param", "continuous-token")
    monkeypatch.setattr(harness, "CONTINUOUS_TOKEN", mode == "continuous-token")
    return str(mode)


@pytest.fixture(autouse=True)
def worker_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which of verl's rollout workers ``make_worker`` builds: ``legacy`` unless parametrized.

    Modules marked ``both_workers`` run each test that builds a worker on both the
    legacy ``AgentLoopWorker`` and verl's default v1 ``AgentLoopWorkerTQ``.
    """
    import harness

    kind = getattr(request, "param", "legacy")
    monkeypatch.setattr(harness, "WORKER_KIND", kind)
    return str(kind)


@pytest.fixture(scope="module", autouse=True)
def transfer_queue_cluster(request: pytest.FixtureRequest) -> Iterator[None]:
    """One TransferQueue cluster for the session, out of the way of modules with their own Ray.

    The v1 worker starts TransferQueue (on a local Ray cluster) on first use and it
    is kept for the following modules; a module that starts its own Ray cluster (a
    ``ray_cluster`` fixture) cannot while another is connected, so it is stopped
    before such a module and started again when a later test needs it.
    """
    import harness

    if hasattr(request.module, "ray_cluster"):
        harness.stop_transfer_queue()
    yield


@pytest.fixture(scope="session", autouse=True)
def transfer_queue_shutdown() -> Iterator[None]:
    """Close TransferQueue and its Ray cluster at the end of the session."""
    yield
    if importable("verl"):
        import harness

        harness.stop_transfer_queue()
