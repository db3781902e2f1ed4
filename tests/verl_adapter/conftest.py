"""verl integration tests: they run where verl is installed (``nox -s verl``).

The core's own test run has no verl (it brings torch and Ray), so there these files
are reported as skipped; ``.ci/run`` runs ``nox -s verl``, which installs each
supported verl release in its own virtualenv and runs these tests there.
"""

from __future__ import annotations

import sys
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tokenization" in metafunc.fixturenames:
        from harness import tokenization_modes

        # indirect: the fixture below must run with each mode, or the mode is never set.
        metafunc.parametrize("tokenization", tokenization_modes(), indirect=True)


@pytest.fixture(autouse=True)
def tokenization(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with each way the installed verl tokenizes appended turns."""
    import harness

    mode = getattr(request, "param", "continuous-token")
    monkeypatch.setattr(harness, "CONTINUOUS_TOKEN", mode == "continuous-token")
    return str(mode)
