"""Fixtures of the Ray tests: one real local cluster per session, the GSM8K replay files.

They need Ray, which the plain test install does not have: the nox session ``ray``
(run by ``.ci/run``) runs them in an environment with Ray; elsewhere they are reported
as skipped. With ``INTERACTIONS_REQUIRE_SUITES=1`` (set by the nox session) a missing
Ray fails the run instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cluster_support import GSM8K_CONFIG, KEYS, RAY_ENVIRONMENT, SHARED_DATA
from suites import importable, requires

pytest_pycollect_makemodule = requires("ray", modules=("ray",))

if importable("ray"):
    # Before Ray is imported (it reads them at import), and inherited by subprocesses.
    os.environ.update(RAY_ENVIRONMENT)
    os.environ.pop("RAY_ADDRESS", None)

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The session's cluster (head: 2 CPUs), with this process connected as the driver."""
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "object_store_memory": 200 * 1024 * 1024,
        },
    )
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="session")
def address(cluster: Cluster) -> str:
    return str(cluster.address)


def _gsm8k_folder() -> Path:
    folder = SHARED_DATA / "gsm8k"
    if not (folder / "example_model_solutions.jsonl").is_file():
        if os.environ.get("INTERACTIONS_REQUIRE_SHARED_DATA"):
            pytest.fail(f"shared GSM8K data not found at {folder}; CI requires it")
        pytest.skip(f"shared GSM8K data not found at {folder} (it lives beside the checkout)")
    return folder


@pytest.fixture(scope="session")
def replay_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The GSM8K self-correction replay: 1,319 samples, four recorded solutions each."""
    source = _gsm8k_folder() / "example_model_solutions.jsonl"
    folder = tmp_path_factory.mktemp("replay")
    data = folder / "gsm8k_replay.jsonl"
    with source.open(encoding="utf-8") as src, data.open("w", encoding="utf-8") as out:
        for line in src:
            row = json.loads(line)
            truth = row["ground_truth"].rsplit("A: ", 1)[1].strip().replace(",", "")
            sample = {
                "prompt": [{"role": "user", "content": row["question"]}],
                "interaction_kwargs": {"name": "gsm8k", "ground_truth": truth},
                "responses": [row[key]["solution"] for key in KEYS],
            }
            out.write(json.dumps(sample) + "\n")
    config = folder / "config.yaml"
    config.write_text(GSM8K_CONFIG, encoding="utf-8")
    return config, data
