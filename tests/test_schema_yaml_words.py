"""Option type errors speak YAML: a sequence is "a list", never a tuple a config cannot write."""

from __future__ import annotations

import attrs

from interactions_core._config import check_options, type_name


@attrs.define
class Tagged:
    tags: tuple[str, ...] = ()
    pair: tuple[int, int] = (0, 0)
    anything: tuple = ()  # type: ignore[type-arg]
    names: frozenset[str] = frozenset()


def test_tuple_options_are_called_lists() -> None:
    found = dict(check_options(Tagged, {"tags": "a", "pair": "b", "anything": "c", "names": 1}))
    assert found == {
        "tags": "option 'tags' must be list[str], got str 'a'",
        "pair": "option 'pair' must be list[int], got str 'b'",
        "anything": "option 'anything' must be list, got str 'c'",
        "names": "option 'names' must be list[str], got int 1",
    }


def test_other_names_are_unchanged() -> None:
    assert type_name(list[str]) == "list[str]"
    assert type_name(dict[str, int]) == "dict[str, int]"
    assert type_name(int | None) == "int | None"
