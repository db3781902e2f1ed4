"""``_yaml.py``: the safe YAML reader behind config files (tags, aliases, bytes)."""

from __future__ import annotations

import pytest
from core_helpers import problems, write

from interactions_core import ConfigError
from interactions_core._yaml import read_yaml, short_repr


def test_python_tags_are_refused_without_running_anything(tmp_path):
    marker = tmp_path / "pwned"
    path = write(
        tmp_path,
        f"""
        interaction:
          - name: !!python/object/apply:os.system ["touch {marker}"]
        """,
    )
    [problem] = problems(path)
    assert "tag" in problem and "not allowed" in problem
    assert not marker.exists()


def test_alias_bomb_is_cheap(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 30):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    path = write(tmp_path, "\n".join(lines) + "\ninteraction: []\n")
    assert any("unknown top-level key 'a0'" in p for p in problems(path))


def test_a_long_base_60_number_is_refused_before_it_is_built(tmp_path):
    """YAML 1.1 reads 59:59:59... as one integer in base 60, which PyYAML builds at a cost
    growing with the square of its length: 960 KB of it took `check` 18.5 s, 4 MiB over
    two minutes, with nothing said. A short one, as a duration is, still reads as a number."""
    long = ":".join(["59"] * 320_000)
    path = write(tmp_path, f"interaction:\n  - name: gsm8k\n    config: {{x: {long}}}\n")
    [problem] = problems(path)
    assert "base-60 number of 959,999 characters" in problem and ":3:" in problem, problem
    data, _ = read_yaml("d: 1:30:00\ne: '1:30:00'\n", "c.yaml")
    assert data == {"d": 5400, "e": "1:30:00"}


def test_files_that_are_not_text(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "UTF-8" in problems(path)[0]
    assert "cannot read config" in problems(tmp_path / "missing.yaml")[0]


# -- the reader itself ---------------------------------------------------------------


def test_every_value_remembers_its_line() -> None:
    text = "interaction:\n  - name: a\n    config:\n      x: [1, 2]\n"
    data, lines = read_yaml(text, "c.yaml")
    assert data == {"interaction": [{"name": "a", "config": {"x": [1, 2]}}]}
    assert lines[("interaction", 0, "name")] == 2
    assert lines[("interaction", 0, "config", "x")] == 4
    assert lines[("interaction", 0, "config", "x", 1)] == 4
    assert read_yaml("", "c.yaml") == (None, {})


def test_duplicate_keys_and_tags_are_errors_with_their_line() -> None:
    with pytest.raises(ConfigError) as duplicate:
        read_yaml("a: 1\nb: 2\na: 3\n", "c.yaml")
    assert duplicate.value.problems == ["c.yaml:3: duplicate key 'a'"]
    with pytest.raises(ConfigError) as tagged:
        read_yaml("a: 1\nb: !foo 2\n", "c.yaml")
    [problem] = tagged.value.problems
    assert problem.startswith("c.yaml:2: YAML tag '!foo' is not allowed")


def test_values_in_messages_are_shortened() -> None:
    assert short_repr("abc") == "'abc'"
    long = short_repr("x" * 100)
    assert len(long) == 60 and long.endswith("...")
