"""``yaml_reader.py``: the safe YAML reader behind config files (tags, aliases, bytes)."""

from __future__ import annotations

from core_helpers import problems, write


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


def test_files_that_are_not_text(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "UTF-8" in problems(path)[0]
    assert "cannot read config" in problems(tmp_path / "missing.yaml")[0]
