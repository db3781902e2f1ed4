"""A worker of a sharded run (interactions_core.ray.shard.play_chunk), without Ray.

The task is plain Python: the local runner, built once per run from the
settings, plays the chunk's numbered episodes and returns their records in the
chunk's order. The same on a real cluster: tests/ray_cluster.
"""

from __future__ import annotations

import pickle

import pytest

from interactions_core.ray import shard
from interactions_core.ray.errors import WorkerSetupError
from interactions_core.runtime.episode import RunOptions


def _chunk() -> list[tuple[int, int, dict[str, object]]]:
    prompt = [{"role": "user", "content": "hi"}]
    sample = {"prompt": prompt, "responses": [["a"], ["b"]]}
    return [(7, 0, sample), (7, 1, sample), (8, 0, {"prompt": prompt, "responses": ["c"]})]


def test_a_worker_plays_its_chunk_with_the_local_runner_in_order() -> None:
    settings = shard.RunSettings(None, options=RunOptions(concurrency=2), repeat=2)
    settings = pickle.loads(pickle.dumps(settings))  # what Ray sends to the worker
    records = shard.play_chunk(settings, _chunk())
    assert [(r.index, r.repeat, r.end_reason) for r in records] == [
        (7, 0, "single_turn"),
        (7, 1, "single_turn"),
        (8, 0, "single_turn"),
    ]
    assert records[1].messages[-1] == {"role": "assistant", "content": "b"}
    # the worker's state is kept between chunks of the same run
    state = shard._STATES[settings.key()]
    shard.play_chunk(settings, _chunk()[:1])
    assert shard._STATES[settings.key()] is state


def test_the_key_leaves_out_what_only_the_driver_uses() -> None:
    one = shard.RunSettings({"interaction": []}, repeat=1, pass_score=1.0)
    two = shard.RunSettings({"interaction": []}, repeat=4, pass_score=0.5)
    assert one.key() == two.key()
    assert one.key() != shard.RunSettings({"interaction": []}, max_user_turns=2).key()


def test_settings_are_checked_once_by_the_run_options() -> None:
    with pytest.raises(ValueError, match="repeat must be a positive integer, not 0"):
        shard.RunSettings(None, repeat=0)


def test_a_worker_that_cannot_set_up_names_its_node() -> None:
    settings = shard.RunSettings(None, policy="no-such-policy")
    with pytest.raises(WorkerSetupError, match="could not set up the run"):
        shard.play_chunk(settings, _chunk())
