"""YAML tags that construct Python objects are refused, and nothing they name ever runs.

Every payload below would create a marker file if it were executed. A control
test runs the same payloads through PyYAML's *unsafe* loader to prove the
payloads are live, so the absence of the marker in the real tests means
something.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from interactions_core import ConfigError, load_config, load_interactions
from interactions_core._yaml import read_config_file, read_yaml
from interactions_core.compat.verl import initialize_interactions_from_config


def payloads(marker: Path) -> dict[str, str]:
    """Config texts that each touch ``marker`` if a Python tag is honoured."""
    m = str(marker)
    return {
        "apply at top level": f"!!python/object/apply:os.system ['touch {m}']\n",
        "apply as entry": f"interaction:\n  - !!python/object/apply:os.system ['touch {m}']\n",
        "apply in config": (
            "interaction:\n  - name: gsm8k\n    config:\n"
            f"      x: !!python/object/apply:os.system ['touch {m}']\n"
        ),
        "apply as name": (
            f"interaction:\n  - name: !!python/object/apply:os.system ['touch {m}']\n"
        ),
        "new": (f"interaction: []\nx: !!python/object/new:os.system ['touch {m}']\n"),
        "apply as key": (
            f"interaction: []\n? !!python/object/apply:os.system ['touch {m}']\n: 1\n"
        ),
        "apply behind an alias": (
            f"x: &p !!python/object/apply:os.system ['touch {m}']\n"
            "interaction:\n  - name: gsm8k\n    config: {a: *p}\n"
        ),
        "apply in a merge": (
            f"x: &p !!python/object/apply:os.system ['touch {m}']\ninteraction:\n  - <<: *p\n"
        ),
        "apply with mapping args": (
            f"interaction:\n  - name: !!python/object/apply:os.system\n      args: ['touch {m}']\n"
        ),
    }


def test_payloads_are_live_under_an_unsafe_loader(tmp_path: Path) -> None:
    """Control: PyYAML's unsafe loader really runs these payloads (so the tests below bite)."""
    for label, text in payloads(tmp_path / "marker").items():
        marker = tmp_path / "marker"
        if "merge" in label:
            continue  # merging a non-mapping is an error even for the unsafe loader
        try:
            yaml.unsafe_load(text)
        except Exception:
            pass  # some documents fail *after* constructing the payload; that is the point
        assert marker.exists(), label
        marker.unlink()


@pytest.mark.parametrize("label", sorted(payloads(Path("m"))))
def test_python_tags_are_refused_and_nothing_runs(tmp_path: Path, label: str) -> None:
    marker = tmp_path / "marker"
    path = tmp_path / "config.yaml"
    path.write_text(payloads(marker)[label])
    for load in (load_config, load_interactions, initialize_interactions_from_config):
        with pytest.raises(ConfigError) as info:
            load(str(path))
        text = "\n".join(info.value.problems)
        assert "is not allowed" in text or "invalid YAML" in text, text
        assert str(path) in text  # the problem says where
    assert not marker.exists()


def test_python_module_tag_imports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp_sidefx.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('imported.flag').touch()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for tag in ("!!python/module:tmp_sidefx", "!!python/name:tmp_sidefx.x"):
        with pytest.raises(ConfigError, match="is not allowed"):
            read_yaml(f"interaction: []\nx: {tag} ''\n", "c.yaml")
    assert "tmp_sidefx" not in sys.modules
    assert not (tmp_path / "imported.flag").exists()


@pytest.mark.parametrize(
    "text",
    [
        "interaction: !!set {a, b}\n",
        "interaction: !!omap [{a: 1}]\n",
        "interaction: !!pairs [{a: 1}]\n",
        "interaction: !local []\n",
        "interaction:\n  - !Entry {name: gsm8k}\n",
        "interaction:\n  - name: !<tag:example.com,2024:x> gsm8k\n",
    ],
)
def test_other_non_plain_tags_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="is not allowed"):
        load_config(str(path))


def test_check_command_refuses_without_side_effect(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path = tmp_path / "config.yaml"
    path.write_text(payloads(marker)["apply in config"])
    proc = subprocess.run(
        [sys.executable, "-m", "interactions_core", "check", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "INTERACTIONS_NO_CACHE": "1"},
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "is not allowed" in proc.stderr and "config.yaml:4" in proc.stderr
    assert not marker.exists()


def test_a_config_that_is_a_named_pipe_with_no_writer_is_told_empty(tmp_path: Path) -> None:
    """`interactions check FIFO` waited for a writer, silent, for ever."""
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "interactions_core", "check", str(fifo)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1 and "the config is empty" in done.stderr, done.stderr


def test_a_config_read_from_a_pipe_with_its_writer_is_read_whole(tmp_path: Path) -> None:
    """As `interactions check <(generate-config)` hands it: the pipe is read to its end."""
    read, write = os.pipe()
    text = b"interaction:\n  - name: gsm8k\n"
    os.write(write, text)
    os.close(write)
    try:
        data, _, _ = read_config_file(f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert data == {"interaction": [{"name": "gsm8k"}]}
