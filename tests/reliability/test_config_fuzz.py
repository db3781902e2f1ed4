"""Bad input: whatever a config file holds, loading it succeeds or raises ``ConfigError``.

Hypothesis generates arbitrary YAML text, arbitrary bytes and arbitrary
structures in the config's shape; hand-written cases cover the classic attacks
(alias bombs, deep nesting, huge files, binary data, wrong encodings, NUL bytes).
``interactions check`` must answer each with exit 0 or 1 and never a traceback.

Dotted ``class_name`` paths are refused throughout (``INTERACTIONS_NO_CLASS_PATHS``)
so generated configs can never import an arbitrary module.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from interactions_core import ConfigError, load_config, load_interactions
from interactions_core._yaml import MAX_CONFIG_BYTES
from interactions_core.cli import main as cli_main

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(autouse=True)
def _no_class_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERACTIONS_NO_CLASS_PATHS", "1")


def outcome(source: Any) -> str:
    """Load ``source`` fully; only success and ``ConfigError`` are acceptable."""
    try:
        load_interactions(source)
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        return "error"
    return "ok"


def check_cli(path: Path) -> tuple[int, str]:
    """``interactions check PATH`` in-process: exit code and stderr."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli_main(["check", str(path)])
    text = err.getvalue()
    assert code in (0, 1), text
    assert "Traceback" not in text and "error: unexpected" not in text, text
    return code, text


# -- generated input -----------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)
names = st.sampled_from(["gsm8k", "weather", "interactions-gsm8k:gsm8k", "gsm8kk", ""]) | st.text(
    max_size=12
)
entries = st.dictionaries(
    st.sampled_from(["name", "plugin", "class_name", "config", "nmae", "extra"]),
    names | values,
    max_size=4,
) | st.builds(
    dict,
    name=names,
    config=st.dictionaries(
        st.sampled_from(["method", "strict", "flexible", "x"]) | st.text(max_size=6),
        values,
        max_size=3,
    ),
)
configs = st.dictionaries(
    st.sampled_from(["interaction", "default", "interactions", "x"]),
    st.lists(entries, max_size=4) | names | values,
    max_size=3,
) | st.builds(dict, interaction=st.lists(entries, max_size=4), default=names | st.none())


@FUZZ
@given(text=st.text(max_size=400))
def test_arbitrary_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    expected = outcome(str(path))
    code, _ = check_cli(path)
    assert code == (0 if expected == "ok" else 1)


@FUZZ
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(data)
    outcome(str(path))
    check_cli(path)


@FUZZ
@given(config=configs)
def test_arbitrary_structures_as_mapping_and_as_yaml(tmp_path: Path, config: dict) -> None:
    as_mapping = outcome(config)
    event(f"as a mapping: {as_mapping}")
    path = tmp_path / "c.yaml"
    try:
        text = yaml.safe_dump(config, allow_unicode=True)
    except yaml.YAMLError:
        return
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    as_file = outcome(str(path))
    if as_file == "ok":
        assert as_mapping == "ok"  # the file is never laxer than the mapping
    check_cli(path)


@FUZZ
@given(
    lines=st.lists(
        st.sampled_from(
            [
                "interaction:",
                "  - name: gsm8k",
                "  - name: weather",
                "    plugin: gsm8k",
                "    config: {method: flexible}",
                "    config:",
                "      method: strict",
                "      bogus: 1",
                "default: gsm8k",
                "default: nope",
                "x: &a [1, 2]",
                "  - name: *a",
                "  - <<: {name: weather}",
                "  -",
                "    - nested",
                "  - {name: gsm8k, name: gsm8k}",
                "\t- tab",
                "- top",
                "...",
                "---",
                "%YAML 1.1",
                "'unterminated",
            ]
        ),
        max_size=12,
    )
)
def test_config_shaped_line_soup(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("\n".join(lines) + "\n")
    event(f"outcome: {outcome(str(path))}")
    check_cli(path)


# -- hand-written attacks --------------------------------------------------------


def laughs(levels: int = 12) -> str:
    out = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        out.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(out) + "\n"


ATTACKS: dict[str, Any] = {
    "alias bomb in a name": laughs() + "interaction:\n  - name: *a11\n",
    "alias bomb in options": laughs() + "interaction:\n  - name: gsm8k\n    config: {x: *a11}\n",
    "alias bomb as the list": laughs() + "interaction: *a11\n",
    # 'default' must be a name: the list it was made was walked for interpolations anyway
    "alias bomb as the default": laughs() + "default: *a11\ninteraction:\n  - name: gsm8k\n",
    "merge-key bomb": "m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}\n"
    + "".join(
        f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 10)}], k{i}: [*m{i - 1}, *m{i - 1}]}}\n"
        for i in range(1, 9)
    )
    + "interaction:\n  - name: gsm8k\n    config: {x: *m8}\n",
    "self-referencing alias": "interaction:\n  - name: gsm8k\n    config: &c {x: *c}\n",
    "self-referencing list": "interaction: &l [*l]\n",
    "10,000 nested flow lists": "interaction: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "10,000 nested flow maps": "interaction: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
    "3,000 nested block lists": "interaction:\n"
    + "".join("  " * (i + 1) + "-\n" for i in range(3_000)),
    "3,000 nested block maps": "".join("  " * i + f"k{i}:\n" for i in range(3_000)),
    "a 5,000-digit integer": "interaction: []\ndefault: " + "9" * 5_000 + "\n",
    "a bad timestamp": "interaction: []\ndefault: !!timestamp 2024-13-45\n",
    "a merge of a scalar": "interaction:\n  - {<<: 1}\n",
    "two documents": "interaction: []\n---\ninteraction: []\n",
    "binary garbage": bytes(range(256)) * 64,
    "UTF-16 with BOM": "interaction:\n  - name: gsm8k\n".encode("utf-16"),
    "UTF-16-LE without BOM": "interaction:\n  - name: gsm8k\n".encode("utf-16-le"),
    "latin-1": "interaction:\n  - name: caf\xe9\n".encode("latin-1"),
    "NUL bytes": b"interaction:\n  - name: gsm8k\x00\n",
    "a lone NUL": b"\x00",
    "control characters": b"interaction: [\x07\x1b]\n",
    "an unpaired surrogate escape": b'interaction:\n  - name: "\\ud800"\n',
}


@pytest.mark.parametrize("label", list(ATTACKS))
def test_attack_is_a_clean_error(tmp_path: Path, label: str) -> None:
    content = ATTACKS[label]
    path = tmp_path / "c.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert time.perf_counter() - started < 5, "an attack must be cheap to refuse"
    assert all(p.startswith(str(path)) for p in info.value.problems), info.value.problems
    assert len(str(info.value)) < 2_000  # the message never expands the attack
    code, stderr = check_cli(path)
    assert code == 1 and "invalid config" in stderr


def test_a_long_string_aliased_many_times_costs_what_its_text_costs(tmp_path: Path) -> None:
    """Aliases share a value, but the scan for interpolations read a shared string once per
    reference: a 1 MB string aliased 20,000 times (a 1 MB file) took 17 s, and 2 MB
    450,000 times would have taken minutes."""
    text = "x" * 1_000_000
    path = tmp_path / "c.yaml"
    path.write_text(
        "interaction:\n  - name: gsm8k\n    config:\n"
        f'      big: &a "{text}"\n      v: [{", ".join(["*a"] * 20_000)}]\n'
    )
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="unknown option"):
        load_config(str(path))
    assert time.perf_counter() - started < 5


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes("interaction:\n  - name: gsm8k\n".encode("utf-8-sig"))
    assert load_config(str(path)).names == ["gsm8k"]


def test_encoding_errors_teach(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(ATTACKS["latin-1"])
    with pytest.raises(ConfigError, match=r"not UTF-8 text .*save it as UTF-8"):
        load_config(str(path))
    path.write_bytes(ATTACKS["NUL bytes"])
    with pytest.raises(ConfigError, match="NUL bytes"):
        load_config(str(path))


@pytest.mark.parametrize("size", [MAX_CONFIG_BYTES + 1, 10 * 1000 * 1000])
def test_oversized_file_is_refused_before_parsing(tmp_path: Path, size: int) -> None:
    path = tmp_path / "big.yaml"
    line = "# " + "x" * 1021 + "\n"
    with open(path, "w") as fh:
        fh.write("interaction: []\n")
        fh.write(line * (size // len(line) + 1))
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="limited to 4 MiB"):
        load_config(str(path))
    assert time.perf_counter() - started < 1
    code, stderr = check_cli(path)
    assert code == 1 and "MiB" in stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_device_is_refused() -> None:
    with pytest.raises(ConfigError, match="MiB"):
        load_config("/dev/zero")


def test_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(str(tmp_path))
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(str(tmp_path / "missing.yaml"))


def test_a_large_valid_config_is_fast(tmp_path: Path) -> None:
    """20,000 entries (~0.5 MB): grouping line numbers per entry was once quadratic."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "interaction:\n" + "".join(f"  - name: n{i}\n    plugin: gsm8k\n" for i in range(20_000))
    )
    started = time.perf_counter()
    loaded = load_config(str(path))
    assert len(loaded.names) == 20_000
    assert time.perf_counter() - started < 20


def test_real_process_never_prints_a_traceback(tmp_path: Path) -> None:
    """The same attacks through ``python -m interactions_core check`` (one process each)."""
    env = {**os.environ, "INTERACTIONS_NO_CACHE": "1"}
    for i, label in enumerate(
        ["alias bomb in options", "10,000 nested flow lists", "binary garbage", "UTF-16 with BOM"]
    ):
        path = tmp_path / f"c{i}.yaml"
        content = ATTACKS[label]
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        proc = subprocess.run(
            [sys.executable, "-m", "interactions_core", "check", str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 1, (label, proc.stderr)
        assert "Traceback" not in proc.stderr and "invalid config" in proc.stderr, label


def test_merge_keys_follow_yaml_rules(tmp_path: Path) -> None:
    """Explicit keys override merged ones; of several merged mappings the first wins."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "interaction:\n"
        "  - &strict {name: gsm8k, plugin: gsm8k, config: {method: strict}}\n"
        "  - <<: *strict\n"
        "    name: gsm8k_flexible\n"
        "    config: {method: flexible}\n"
        "  - <<: [{name: gsm8k_third, plugin: gsm8k}, {name: ignored, plugin: weather}]\n"
    )
    loaded = load_config(str(path))
    assert loaded.names == ["gsm8k", "gsm8k_flexible", "gsm8k_third"]
    assert [r.options for r in loaded.entries][:2] == [{"method": "strict"}, {"method": "flexible"}]
    path.write_text("interaction:\n  - {name: gsm8k, name: weather}\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:2: duplicate key 'name'"):
        load_config(str(path))


def test_merge_chains_are_bounded(tmp_path: Path) -> None:
    """Each level merges the previous one: quadratic copying, refused past the limit."""
    levels = 3_000
    text = "interaction:\n  - &l0 {name: gsm8k, k0: 0}\n" + "".join(
        f"  - &l{i} {{<<: *l{i - 1}, k{i}: {i}}}\n" for i in range(1, levels)
    )
    path = tmp_path / "c.yaml"
    path.write_text(text)
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="merge keys expand"):
        load_config(str(path))
    assert time.perf_counter() - started < 10


# Mostly valid configs, so the success path (instantiation included) is fuzzed too.
valid_entries = st.builds(
    lambda name, plugin, method, extra: {
        k: v
        for k, v in {
            "name": name,
            "plugin": plugin,
            "config": ({"method": method} if method else {}) | extra,
        }.items()
        if v is not None
    },
    name=st.sampled_from([None, "a", "b", "c", "gsm8k", "weather"]) | st.text(max_size=8),
    plugin=st.sampled_from(["gsm8k", "weather", "interactions-gsm8k:gsm8k", None]),
    method=st.sampled_from([None, None, None, "strict", "flexible", "loose", 3]),
    extra=st.sampled_from([{}, {}, {}, {"x": 1}]),
)


@FUZZ
@given(
    items=st.lists(valid_entries, max_size=4, unique_by=lambda e: e.get("name", e.get("plugin"))),
    default=st.sampled_from([None, None, None, "gsm8k", "weather", "nope"]),
)
def test_mostly_valid_configs(tmp_path: Path, items: list[dict], default: str | None) -> None:
    config: dict[str, Any] = {"interaction": items}
    if default is not None:
        config["default"] = default
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    result = outcome(str(path))
    event(f"outcome: {result}")
    assert outcome(config) == result
    code, _ = check_cli(path)
    assert code == (0 if result == "ok" else 1)


def test_in_memory_mappings_get_the_same_protection() -> None:
    shared: list[Any] = ["lol"] * 9
    for _ in range(10):
        shared = [shared] * 9  # 9**11 values when expanded, 100 objects in memory
    with pytest.raises(ConfigError, match="expand"):
        load_config({"interaction": [{"name": "gsm8k", "config": {"x": shared}}]})
    cyclic: dict[str, Any] = {"name": "gsm8k"}
    cyclic["config"] = {"self": cyclic}
    with pytest.raises(ConfigError, match="contains it"):
        load_config({"interaction": [cyclic]})
