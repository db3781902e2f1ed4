"""Starting replicas (interactions_core.ray.replica) and quoting Ray errors (.errors)."""

from __future__ import annotations

import pytest

from interactions_core.ray.errors import cause_text, one_line
from interactions_core.ray.replica import actor_options, check_sizes


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_sizes_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ValueError, match=f"max_batch must be a positive integer, not {bad!r}"):
        check_sizes(replicas=1, max_batch=bad)
    check_sizes(replicas=1, max_batch=3)


def test_resources_become_ray_options() -> None:
    options = actor_options(
        {"CPU": 1, "GPU": 0.5, "memory": 10, "judge_slot": 1},
        max_restarts=-1,
        max_in_flight=16,
        runtime_env={"pip": ["x"]},
    )
    assert options == {
        "max_restarts": -1,
        "max_task_retries": 0,
        "max_concurrency": 24,
        "num_cpus": 1,
        "num_gpus": 0.5,
        "memory": 10,
        "resources": {"judge_slot": 1},
        "runtime_env": {"pip": ["x"]},
    }
    plain = actor_options(None, max_restarts=0, max_in_flight=1, runtime_env=None)
    assert plain == {"max_restarts": 0, "max_task_retries": 0, "max_concurrency": 9}


def test_ray_error_texts_are_cut_to_what_a_message_quotes() -> None:
    error = RuntimeError("Traceback (most recent call last):\n  File x\n\nValueError: bad  \n\n")
    assert cause_text(error) == "ValueError: bad"
    assert cause_text(RuntimeError("")) == "RuntimeError"
    assert cause_text(RuntimeError("x" * 400)) == "x" * 297 + "..."
    assert one_line(error) == "Traceback (most recent call last): File x ValueError: bad"
