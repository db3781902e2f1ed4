"""The interaction: a reasoning-gym problem, scored by the dataset's own scorer, with retries.

A session is one problem. It is identified by the sample's ``interaction_kwargs``:

* ``index`` (int): the problem's index in the dataset generated from ``seed``,
  ``size`` and ``dataset_options``; each may be given per sample (rows made by
  the ``rg/<dataset>`` builder carry all four, so they are self-describing) and
  falls back to the interaction's config. reasoning-gym generates problem
  ``index`` from the seed alone, so the same four values always give the same
  problem, on any machine; or
* ``entry`` (mapping): a reasoning-gym item (``question``, ``answer``,
  ``metadata``) produced elsewhere. Prefer ``index``: a few scorers (the ARC
  ones) compare tuples that a JSON round trip turns into lists.

After each assistant turn the answer is taken from the last ``<answer>...</answer>``
of the message (``answer_format: raw`` uses the whole message) and scored with
``dataset.score_answer``. A score of at least ``success_threshold`` solves the
problem and ends the episode; otherwise the model gets feedback and tries again,
up to ``max_attempts`` answers. The turn score and the final score are 1.0 for a
solved problem and 0.0 otherwise (``reward: raw`` passes the scorer's partial
credit through instead); the scorer's raw value is always in ``extra``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from interactions_core import InteractionResult, SessionInteraction, last_assistant_text
from interactions_core.errors import ConfigError, SessionError

from .answers import evaluates, unsafe_answer

__all__ = [
    "PREFIX",
    "ReasoningGymConfig",
    "ReasoningGymInteraction",
    "dataset_description",
    "dataset_names",
]

#: Interactions and builders are registered as ``rg/<dataset>``.
PREFIX = "rg/"
#: How many generated datasets an instance keeps (one per seed/size/options seen).
DATASET_CACHE = 16

CORRECT = "Correct!"
NO_TAG = "I could not find your final answer: put it between <answer> and </answer> tags."


def _registry() -> dict[str, Any]:
    import reasoning_gym  # noqa: F401
    from reasoning_gym.factory import DATASETS  # importing reasoning_gym fills the registry

    return DATASETS


def dataset_names() -> list[str]:
    """Every dataset name reasoning-gym registers, sorted (imports reasoning-gym)."""
    return sorted(_registry())


def dataset_description(name: str) -> str:
    """The first line of the dataset class's docstring."""
    dataset_cls = _registry()[name][0]
    doc = (dataset_cls.__doc__ or "").strip()
    first = doc.splitlines()[0].strip() if doc else ""
    return f"reasoning-gym {name}: {first}" if first else f"reasoning-gym {name}"


def _positive(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value}")


@attrs.frozen
class ReasoningGymConfig:
    """Options of an ``rg/<dataset>`` interaction (its ``config:`` mapping)."""

    dataset: str = attrs.field(
        metadata={"help": "the reasoning-gym dataset (set by the rg/<dataset> registration)"}
    )
    max_attempts: int = attrs.field(
        default=3,
        validator=_positive,
        metadata={"help": "answers the model may give before the episode ends unsolved"},
    )
    seed: int = attrs.field(
        default=42,
        metadata={"help": "generation seed for samples that give an index but no seed"},
    )
    size: int = attrs.field(
        default=500,
        validator=_positive,
        metadata={"help": "dataset size for samples that give an index but no size"},
    )
    dataset_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            "help": "generation options passed to the dataset's config (difficulty: "
            "min_numbers, max_target, ...), for samples that give none"
        },
    )
    answer_format: Literal["tag", "raw"] = attrs.field(
        default="tag",
        metadata={
            "help": "'tag': the answer is the last <answer>...</answer> of the message; "
            "'raw': the whole message"
        },
    )
    success_threshold: float = attrs.field(
        default=1.0,
        metadata={"help": "scorer value at or above which the problem counts as solved"},
    )
    reward: Literal["binary", "raw"] = attrs.field(
        default="binary",
        metadata={
            "help": "'binary': scores are 1.0 solved / 0.0 not; 'raw': the scorer's value "
            "(partial credit)"
        },
    )


class _Problem:
    """Per-session state: the problem, its scorer, and what happened so far."""

    __slots__ = ("attempts", "best", "dataset", "entry", "solved")

    def __init__(self, dataset: Any, entry: Mapping[str, Any]) -> None:
        self.dataset = dataset
        self.entry = entry
        self.attempts = 0
        self.best = 0.0
        self.solved = False


def _options_key(options: Mapping[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, default=repr)


class ReasoningGymInteraction(SessionInteraction):
    """A reasoning-gym problem per session, scored by the dataset's own scorer.

    Start a session with ``index`` (and optionally ``seed``, ``size``,
    ``dataset_options``) or with a full ``entry``; see the module docstring.
    """

    config_schema = ReasoningGymConfig
    settings: ReasoningGymConfig

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        registry = _registry()
        name = self.settings.dataset
        if name not in registry:
            import difflib

            close = difflib.get_close_matches(name, list(registry), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                [f"interaction {self.name!r}: unknown reasoning-gym dataset {name!r}{hint}"]
            )
        self._datasets: dict[tuple[int, int, str], Any] = {}
        # Built now so bad generation options fail when the config is loaded.
        self._default = self._dataset(
            self.settings.seed, self.settings.size, self.settings.dataset_options
        )

    # -- datasets ------------------------------------------------------------------------

    def _dataset(self, seed: int, size: int, options: Mapping[str, Any]) -> Any:
        """The dataset for these generation parameters (cached, bounded)."""
        key = (seed, size, _options_key(options))
        dataset = self._datasets.get(key)
        if dataset is not None:
            return dataset
        from reasoning_gym import create_dataset

        try:
            dataset = create_dataset(self.settings.dataset, seed=seed, size=size, **options)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ConfigError(
                [
                    f"interaction {self.name!r}: reasoning-gym refused the generation options "
                    f"seed={seed!r}, size={size!r}, dataset_options={dict(options)!r}: "
                    f"{exc.__class__.__name__}: {exc}"
                ]
            ) from exc
        if len(self._datasets) >= DATASET_CACHE:
            self._datasets.pop(next(iter(self._datasets)))
        self._datasets[key] = dataset
        return dataset

    # -- sessions --------------------------------------------------------------------------

    def new_session(
        self,
        index: Any = None,
        entry: Any = None,
        seed: Any = None,
        size: Any = None,
        dataset_options: Any = None,
        **kwargs: Any,
    ) -> _Problem:
        """The problem of a sample: by ``index`` (regenerated) or by ``entry`` (as given)."""
        settings = self.settings
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise SessionError(
                    f"interaction {self.name!r}: index must be a non-negative int, got {index!r}"
                )
            seed = settings.seed if seed is None else seed
            size = settings.size if size is None else size
            options = settings.dataset_options if dataset_options is None else dataset_options
            if not isinstance(options, Mapping):
                raise SessionError(
                    f"interaction {self.name!r}: dataset_options must be a mapping, got "
                    f"{type(options).__name__}"
                )
            if index >= size:
                raise SessionError(
                    f"interaction {self.name!r}: index {index} is outside the dataset "
                    f"(size {size}); pass a larger size"
                )
            try:
                dataset = self._dataset(int(seed), int(size), options)
            except ConfigError as exc:
                raise SessionError(str(exc)) from exc
            return _Problem(dataset, dataset[index])
        if isinstance(entry, Mapping) and "question" in entry and "answer" in entry:
            item = {"metadata": {}, **entry}
            refused = _unsafe_entry(self._default, item)
            if refused is not None:
                raise SessionError(
                    f"interaction {self.name!r}: the entry's {refused}; this dataset's scorer "
                    "evaluates it as code, so such an entry is not taken"
                )
            return _Problem(self._default, item)
        raise SessionError(
            f"interaction {self.name!r} needs the problem in the sample's interaction_kwargs: "
            "'index' (rows from 'interactions data "
            f"{PREFIX}{settings.dataset}' carry it) or 'entry' (a reasoning-gym item with "
            "question, answer and metadata)"
        )

    def _answer(self, messages: Sequence[Any]) -> str | None:
        """The answer in the last assistant message (``None``: no ``<answer>`` tag in it)."""
        text = last_assistant_text(messages)
        if self.settings.answer_format == "raw":
            return text.strip()
        from reasoning_gym.utils import extract_answer

        return extract_answer(text)

    def _score(self, problem: _Problem, answer: str) -> tuple[float, str | None]:
        """The scorer's value for ``answer`` (0.0 with the error when the scorer fails, or
        when the answer may not reach a scorer that evaluates it: see ``answers.py``)."""
        if evaluates(type(problem.dataset)):
            refused = unsafe_answer(answer)
            if refused is not None:
                return 0.0, f"the answer was not scored: {refused}"
        try:
            value = float(problem.dataset.score_answer(answer, problem.entry))
        except Exception as exc:  # a scorer choking on a malformed answer is a wrong answer
            return 0.0, f"{exc.__class__.__name__}: {exc}"
        return (value if math.isfinite(value) else 0.0), None

    async def respond(
        self, state: _Problem, messages: list[dict[str, Any]], **kwargs: Any
    ) -> InteractionResult:
        """Score the latest answer; stop when solved or out of attempts."""
        settings = self.settings
        if state.solved or state.attempts >= settings.max_attempts:
            return InteractionResult(True, "The episode is over.", self._turn_score(state, 0.0))
        answer = self._answer(messages)
        state.attempts += 1
        extra: dict[str, Any] = {"attempt": state.attempts, "dataset": settings.dataset}
        if answer is None:
            raw, error = 0.0, None
            message = NO_TAG
        else:
            raw, error = self._score(state, answer)
            message = ""
        if error is not None:
            extra["scorer_error"] = error
        extra["raw_score"] = raw
        state.best = max(state.best, raw)
        if answer is not None and raw >= settings.success_threshold:
            state.solved = True
            return InteractionResult(True, CORRECT, self._turn_score(state, raw), extra)
        left = settings.max_attempts - state.attempts
        if left <= 0:
            message = (message + " " if message else "") + (
                "Your answer is incorrect and no attempts are left."
            )
            return InteractionResult(True, message, self._turn_score(state, raw), extra)
        message = message or "Your answer is incorrect."
        message += (
            f" You have {left} attempt{'s' if left != 1 else ''} left: reflect on the problem "
            "and try again, giving your final answer between <answer> and </answer> tags."
        )
        return InteractionResult(False, message, self._turn_score(state, raw), extra)

    def _turn_score(self, state: _Problem, raw: float) -> float:
        if self.settings.reward == "raw":
            return float(raw)
        return 1.0 if state.solved else 0.0

    async def score(self, state: _Problem, **kwargs: Any) -> float:
        """1.0 when the problem was solved, else 0.0 (``reward: raw``: the best scorer value)."""
        if self.settings.reward == "raw":
            return float(state.best)
        return 1.0 if state.solved else 0.0


def _unsafe_entry(dataset: Any, entry: Mapping[str, Any]) -> str | None:
    """What in a given ``entry`` may not reach ``dataset``'s scorer, which evaluates text."""
    if not evaluates(type(dataset)):
        return None
    texts: list[tuple[str, Any]] = [
        ("answer", entry.get("answer")),
        ("metadata", entry.get("metadata")),
    ]
    while texts:
        where, value = texts.pop()
        if isinstance(value, str):
            refused = unsafe_answer(value)
            if refused is not None:
                return f"{where} is refused: {refused}"
        elif isinstance(value, Mapping):
            texts.extend((f"{where}.{key}", item) for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            texts.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
    return None
