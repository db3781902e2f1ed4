"""Episode rows from reasoning-gym: no data files, just a seed.

:func:`build_rows` is registered as the dataset builder ``rg/<dataset>`` for
every dataset, so the command line makes a dataset in one step::

    interactions data rg/countdown --count 200 --seed 7 --output countdown.jsonl
    interactions data rg/countdown --count 50 --dataset-options '{"max_numbers": 4}' -o c.jsonl

and Python code calls it directly::

    from interactions_reasoning_gym import build_rows
    rows = list(build_rows("countdown", count=200, seed=7))

Each row is in verl's sample shape: ``prompt`` (a system prompt asking for an
``<answer>`` tag, then the question), ``extra_info.interaction_kwargs`` (the
interaction name and the problem's ``index``, ``seed``, ``size`` and
``dataset_options``, so the interaction regenerates exactly this problem), the
reference answer under ``reward_model.ground_truth``, and ``responses`` for the
``replay`` policy: the reference answer (``responses="reference"``, the default),
answers that are always wrong (``"wrong"``), or none (``"none"``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from .interaction import PREFIX, dataset_names

__all__ = ["RESPONSES", "WRONG_ANSWER", "build_rows", "wrong_answer"]

RESPONSES = ("reference", "wrong", "none")


#: The reply of ``responses="wrong"``: no digits, symbols or words any task's answer is made of.
WRONG_ANSWER = "I do not know"


def wrong_answer(answer: Any = None) -> str:
    """A wrong answer for a problem whose reference answer is ``answer``.

    A fixed phrase rather than a mangled reference: several scorers extract the
    numbers of an answer, so "not 42" would be read as 42.
    """
    return WRONG_ANSWER if str(answer).strip().lower() != WRONG_ANSWER.lower() else "?"


def _options(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(
                f"dataset_options must be a JSON object, e.g. '{{\"max_numbers\": 4}}': {exc}"
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"dataset_options must be a JSON object, got {type(value).__name__}")
    return dict(value)


def build_rows(
    dataset: str,
    count: int = 200,
    seed: int = 42,
    size: int = 0,
    dataset_options: Any = None,
    responses: str = "reference",
    attempts: int = 3,
    system_prompt: str = "default",
) -> Iterator[dict[str, Any]]:
    """Generate ``count`` problems of reasoning-gym ``dataset`` as episode rows.

    ``seed``, ``size`` (default: ``count``) and ``dataset_options`` (a mapping or
    a JSON object string: the dataset's difficulty options) choose the problems.
    ``responses`` fills the replay policy's replies: ``reference`` (one reply,
    the generator's answer), ``wrong`` (``attempts`` wrong replies) or ``none``.
    ``system_prompt`` names one of reasoning-gym's system prompts.
    """
    import reasoning_gym
    from reasoning_gym.utils import SYSTEM_PROMPTS

    if dataset not in dataset_names():
        raise ValueError(f"unknown reasoning-gym dataset {dataset!r}")
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    if responses not in RESPONSES:
        raise ValueError(f"responses must be one of {', '.join(RESPONSES)}; got {responses!r}")
    if system_prompt not in SYSTEM_PROMPTS:
        known = ", ".join(sorted(SYSTEM_PROMPTS))
        raise ValueError(f"unknown system_prompt {system_prompt!r}; choose one of {known}")
    options = _options(dataset_options)
    size = max(int(size or 0), count)
    try:
        generated = reasoning_gym.create_dataset(dataset, seed=seed, size=size, **options)
    except (TypeError, AssertionError) as exc:
        raise ValueError(f"reasoning-gym refused the options {options!r}: {exc}") from exc
    name = PREFIX + dataset
    system = SYSTEM_PROMPTS[system_prompt]
    return _rows(generated, name, count, seed, size, options, responses, attempts, system)


def _rows(
    generated: Any,
    name: str,
    count: int,
    seed: int,
    size: int,
    options: dict[str, Any],
    responses: str,
    attempts: int,
    system: str,
) -> Iterator[dict[str, Any]]:
    for index in range(count):
        entry = generated[index]
        answer = entry.get("answer")
        row: dict[str, Any] = {
            "id": f"{name}/{seed}/{index}",
            "data_source": f"reasoning_gym/{name[len(PREFIX) :]}",
            "prompt": [
                {"role": "system", "content": system},
                {"role": "user", "content": entry["question"]},
            ],
            "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {
                "index": index,
                "interaction_kwargs": {
                    "name": name,
                    "index": index,
                    "seed": seed,
                    "size": size,
                    "dataset_options": options,
                },
            },
        }
        if responses == "reference":
            row["responses"] = [f"<answer>{answer}</answer>"] if answer is not None else []
        elif responses == "wrong":
            row["responses"] = [f"<answer>{wrong_answer(answer)}</answer>"] * max(1, attempts)
        yield row
