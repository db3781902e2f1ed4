"""GSM8K raw JSONL -> rows in verl's multi-turn-with-interaction sample shape.

:func:`build_gsm8k` is registered as the dataset builder ``gsm8k`` (see
``hooks.py``), so one command makes a dataset the ``gsm8k`` interaction plays::

    interactions data gsm8k --input test.jsonl --output gsm8k.jsonl
    interactions data gsm8k --input test.jsonl --solutions example_model_solutions.jsonl \\
        --output gsm8k_replay.jsonl

and Python code calls it directly::

    from interactions_gsm8k.dataset import build_gsm8k
    rows = list(build_gsm8k(input="test.jsonl", max_rows=10))

The rows match verl's ``examples/data_preprocess/gsm8k_multiturn_w_interaction.py``:
the same system prompt, the question followed by the same instruction, ``ability``,
``reward_model`` and ``extra_info`` (with ``interaction_kwargs``). With
``solutions``, each row also carries ``responses`` (recorded model solutions) for
the ``replay`` policy.

Everything here is a pure function of its arguments and the files it reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator, Mapping
from typing import Any

__all__ = [
    "DATA_SOURCE",
    "INSTRUCTION",
    "SOLUTION_KEYS",
    "SYSTEM_PROMPT",
    "build_gsm8k",
    "final_answer",
    "make_row",
    "user_prompt",
]

#: ``data_source`` of every row (verl's value).
DATA_SOURCE = "openai/gsm8k"

#: verl's system prompt for GSM8K with an interaction.
SYSTEM_PROMPT = (
    "You are a math expert. You are given a question and you need to solve it step by step. "
    "You should rethinking carefully if user point out your answer is wrong. "
    "Put your final answer in the format of `#### <answer>`."
)

#: verl's instruction, appended to the question after one space.
INSTRUCTION = "Let's think step by step and output the final answer after `####`."

#: The final-answer marker of GSM8K's reference solutions.
MARKER = "#### "

#: The solution keys of ``example_model_solutions.jsonl``, in the order replayed.
SOLUTION_KEYS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def final_answer(answer: str) -> str | None:
    """The reference answer: the text after the last ``#### ``, commas removed.

    ``None`` when ``answer`` has no ``#### `` or nothing follows it.
    """
    _, marker, tail = answer.rpartition(MARKER)
    if not marker:
        return None
    truth = tail.strip().replace(",", "")
    return truth or None


def user_prompt(question: str) -> str:
    """The user message: the question, a space, and verl's instruction."""
    return f"{question} {INSTRUCTION}"


def make_row(
    question: str,
    answer: str,
    ground_truth: str,
    *,
    index: int,
    split: str = "test",
    interaction: str = "gsm8k",
    responses: list[str] | None = None,
) -> dict[str, Any]:
    """One sample in verl's multi-turn-with-interaction shape."""
    query = user_prompt(question)
    row: dict[str, Any] = {
        "data_source": DATA_SOURCE,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": query},
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {
            "split": split,
            "index": index,
            "answer": answer,
            "question": question,
            "interaction_kwargs": {
                "name": interaction,
                "query": query,
                "ground_truth": ground_truth,
            },
        },
    }
    if responses is not None:
        row["responses"] = list(responses)
    return row


def _path_option(name: str, value: Any) -> str:
    if isinstance(value, list):
        raise ValueError(f"--{name} was given more than once; give one file")
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"--{name} needs a file path")
    path = os.fspath(value)
    if os.path.isdir(path):
        raise ValueError(f"--{name} {path} is a directory; give the JSONL file")
    if os.path.exists(path) and not os.path.isfile(path):
        raise ValueError(
            f"--{name} {path} is not a regular file (a device or a pipe?); give the JSONL file"
        )
    if not os.path.isfile(path):
        raise ValueError(f"{name} file not found: {path}")
    return path


def _text_option(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"--{name} needs a non-empty value")
    return value


def _objects(path: str) -> Generator[tuple[int, Mapping[str, Any]], None, None]:
    """``(line number, object)`` for each non-blank line of a JSONL file."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from None
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: invalid JSON: {exc}") from None
            if not isinstance(obj, Mapping):
                raise ValueError(
                    f"{path}:{number}: expected a JSON object, got {type(obj).__name__}"
                )
            yield number, obj


def _string_field(path: str, number: int, obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        what = "missing" if value is None else f"not a string ({type(value).__name__})"
        raise ValueError(f"{path}:{number}: {key!r} is {what}")
    return value


def _responses(path: str, number: int, obj: Mapping[str, Any]) -> list[str]:
    out = []
    for key in SOLUTION_KEYS:
        entry = obj.get(key)
        solution = entry.get("solution") if isinstance(entry, Mapping) else None
        if not isinstance(solution, str):
            raise ValueError(f"{path}:{number}: {key!r} must be an object with a string 'solution'")
        out.append(solution)
    return out


def build_gsm8k(
    *,
    input: str,
    split: str = "test",
    interaction: str = "gsm8k",
    solutions: str = "",
    max_rows: int = 0,
) -> Iterator[dict[str, Any]]:
    """GSM8K raw JSONL (question, answer) -> verl multi-turn rows with interaction_kwargs.

    Options:
      input        GSM8K JSONL, one {"question", "answer"} object a line; the ground
                   truth is the text after the last "#### " of answer, commas removed
      split        written to extra_info.split
      interaction  the interaction name written to interaction_kwargs.name
      solutions    optional JSONL of recorded model solutions for the same problems
                   in the same order (keys 6b_finetuning, 6b_verification,
                   175b_finetuning, 175b_verification, each {"solution": ...});
                   each row then gets "responses", those four solutions in that
                   order, for the replay policy
      max_rows     stop after this many rows (0: all)

    Raises ValueError naming the file and line for a missing file, a line that is
    not a JSON object, an answer without "#### ", or a solutions file whose
    question differs from the input's on the same row.
    """
    path = _path_option("input", input)
    split = _text_option("split", split)
    interaction = _text_option("interaction", interaction)
    solutions_path = _path_option("solutions", solutions) if solutions else ""
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0:
        raise ValueError(f"max_rows must be 0 (all) or a positive integer, got {max_rows!r}")
    return _rows(path, split, interaction, solutions_path, max_rows)


def _rows(
    path: str, split: str, interaction: str, solutions_path: str, max_rows: int
) -> Iterator[dict[str, Any]]:
    recorded = _objects(solutions_path) if solutions_path else None
    try:
        yield from _rows_checked(path, split, interaction, solutions_path, recorded, max_rows)
    finally:
        if recorded is not None:
            recorded.close()


def _rows_checked(
    path: str,
    split: str,
    interaction: str,
    solutions_path: str,
    recorded: Generator[tuple[int, Mapping[str, Any]], None, None] | None,
    max_rows: int,
) -> Iterator[dict[str, Any]]:
    index = 0
    for number, obj in _objects(path):
        question = _string_field(path, number, obj, "question")
        answer = _string_field(path, number, obj, "answer")
        truth = final_answer(answer)
        if truth is None:
            raise ValueError(
                f"{path}:{number}: 'answer' has no final answer after '{MARKER.strip()}'"
            )
        responses = None
        if recorded is not None:
            entry = next(recorded, None)
            if entry is None:
                raise ValueError(
                    f"{solutions_path}: ends before the problem on {path}:{number}; "
                    "it must hold the same problems in the same order"
                )
            at, solved = entry
            if _string_field(solutions_path, at, solved, "question").strip() != question.strip():
                raise ValueError(
                    f"{solutions_path}:{at}: question does not match {path}:{number}; "
                    "it must hold the same problems in the same order"
                )
            responses = _responses(solutions_path, at, solved)
        yield make_row(
            question,
            answer,
            truth,
            index=index,
            split=split,
            interaction=interaction,
            responses=responses,
        )
        index += 1
        if max_rows and index >= max_rows:
            return
    if recorded is not None:
        extra = next(recorded, None)
        if extra is not None:
            raise ValueError(
                f"{solutions_path}:{extra[0]}: more problems than {path} ({index}); "
                "it must hold the same problems in the same order"
            )
