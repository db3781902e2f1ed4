"""`interactions new`: a complete plugin that installs, lists and tests; clear refusals."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the standard library gained tomllib in 3.11
    import tomli as tomllib

from interactions_core import SessionInteraction
from interactions_core.cli import main
from interactions_core.registry import Registry
from interactions_core.scaffold import (
    ScaffoldError,
    core_requirement,
    create_plugin,
    plugin_names,
)

EMPTY = Registry.from_classes({})


@pytest.mark.parametrize(
    ("raw", "name", "dist", "package", "cls"),
    [
        ("echo", "echo", "interactions-echo", "interactions_echo", "EchoInteraction"),
        ("My-Task", "my_task", "interactions-my-task", "interactions_my_task", "MyTaskInteraction"),
        (
            " word.ladder ",
            "word_ladder",
            "interactions-word-ladder",
            "interactions_word_ladder",
            "WordLadderInteraction",
        ),
        ("interactions-maze", "maze", "interactions-maze", "interactions_maze", "MazeInteraction"),
        (
            "v2_judge",
            "v2_judge",
            "interactions-v2-judge",
            "interactions_v2_judge",
            "V2JudgeInteraction",
        ),
    ],
)
def test_names_are_normalised(raw: str, name: str, dist: str, package: str, cls: str) -> None:
    names = plugin_names(raw)
    assert (names.name, names.dist, names.package, names.class_name) == (name, dist, package, cls)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "invalid plugin name"),
        ("9lives", "starting with a letter"),
        ("héllo", "invalid plugin name"),
        ("a/b", "invalid plugin name"),
        ("class", "Python keyword"),
        ("---", "invalid plugin name"),
    ],
)
def test_invalid_names_write_nothing(tmp_path: Path, raw: str, message: str) -> None:
    with pytest.raises(ScaffoldError, match=message):
        create_plugin(raw, tmp_path / "out", registry=EMPTY)
    assert not (tmp_path / "out").exists()


def test_core_requirement_follows_the_running_core() -> None:
    assert core_requirement("0.1.0") == ">=0.1,<0.2"
    assert core_requirement("0.7.3rc1") == ">=0.7,<0.8"
    assert core_requirement("1.4.2") == ">=1.4,<2"
    assert core_requirement().startswith(">=")


def test_generated_distribution_is_complete(tmp_path: Path) -> None:
    folder = create_plugin("echo-task", tmp_path / "plugin", registry=EMPTY)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "README.md",
        "interactions_echo_task/__init__.py",
        "interactions_echo_task/interaction.py",
        "interactions_echo_task/py.typed",
        "pyproject.toml",
        "tests/test_echo_task_interaction.py",
    ]
    meta = tomllib.loads((folder / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == "interactions-echo-task"
    assert project["entry-points"]["interactions_core.interactions"] == {
        "echo_task": "interactions_echo_task:EchoTaskInteraction"
    }
    assert f"interactions-core{core_requirement()}" in project["dependencies"]
    for path in folder.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    assert "$" not in (folder / "interactions_echo_task/interaction.py").read_text()
    pytest_options = meta["tool"]["pytest"]["ini_options"]
    assert pytest_options["asyncio_default_fixture_loop_scope"] == "function"
    assert any(r.startswith("pytest-asyncio") for r in project["optional-dependencies"]["test"])
    readme = (folder / "README.md").read_text()
    publish = readme.split("## Publish", 1)[1]
    for step in ("python -m build", "twine check dist/*", "testpypi", "twine upload dist/*"):
        assert step in publish
    assert "pip install interactions-echo-task" in publish


def test_generated_class_passes_the_checker_and_its_own_tests(tmp_path: Path) -> None:
    folder = create_plugin("echo_task", tmp_path / "plugin", registry=EMPTY)
    sys.path.insert(0, str(folder))
    try:
        from interactions_core.testing import check_interaction

        module = __import__("interactions_echo_task")
        cls = module.EchoTaskInteraction
        assert issubclass(cls, SessionInteraction) and cls.config_schema is not None
        assert check_interaction(cls).ok
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m.startswith("interactions_echo_task")]:
            del sys.modules[name]
    env = {**os.environ, "PYTHONPATH": str(folder)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 passed, 1 skipped" in proc.stdout  # the last one needs the distribution installed


def test_generated_code_is_lint_clean(tmp_path: Path) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    folder = create_plugin("lint_me", tmp_path / "plugin", registry=EMPTY)
    proc = subprocess.run(
        [
            ruff,
            "check",
            "--isolated",
            "--line-length",
            "100",
            "--select",
            "E,F,W,B,UP",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_existing_non_empty_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not empty"):
        create_plugin("echo", target, registry=EMPTY)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ScaffoldError, match="is a file"):
        create_plugin("echo", a_file, registry=EMPTY)


def test_an_empty_folder_is_used(tmp_path: Path) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    assert create_plugin("echo", target, registry=EMPTY) == target
    assert (target / "pyproject.toml").is_file()


def test_shadowing_an_installed_interaction_is_refused(tmp_path: Path) -> None:
    class Taken(SessionInteraction):
        async def respond(self, state: Any, messages: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    registry = Registry.from_classes({"taken": Taken}, distribution="acme-taken")
    with pytest.raises(ScaffoldError, match=r"'taken' is already installed.*acme-taken"):
        create_plugin("taken", tmp_path / "out", registry=registry)
    assert not (tmp_path / "out").exists()


def test_shadowing_an_importable_package_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match="'interactions_gsm8k' is already importable"):
        create_plugin("gsm8k", tmp_path / "out", registry=EMPTY)
    assert not (tmp_path / "out").exists()


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "x").write_text("")
    with pytest.raises(ScaffoldError) as info:
        create_plugin("gsm8k", target)
    # the folder, the interaction name, the distribution name and the package
    assert str(info.value).count("\n  - ") == 4


def test_cli_new(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "cli-made"
    assert main(["new", "cli_made_plugin", "--dir", str(target)]) == 0
    out = capsys.readouterr().out
    assert "Created interactions-cli-made-plugin" in out and "pip install -e" in out
    assert (target / "interactions_cli_made_plugin" / "interaction.py").is_file()
    assert main(["new", "cli_made_plugin", "--dir", str(target)]) == 1
    assert "not empty" in capsys.readouterr().err
    assert main(["new", "9bad", "--dir", str(tmp_path / "never")]) == 1
    assert "invalid plugin name" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_installed_plugin_is_listed_and_its_tests_pass(tmp_path: Path) -> None:
    """pip install the generated folder (--target, no network), list it, run its tests."""
    folder = create_plugin("fresh_scaffold", tmp_path / "src", registry=EMPTY)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site)]
    try:
        import hatchling  # noqa: F401

        pip.append("--no-build-isolation")  # offline when the build backend is at hand
    except ImportError:
        pass
    proc = subprocess.run([*pip, str(folder)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    listed = subprocess.run(
        [sys.executable, "-m", "interactions_core", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "fresh_scaffold" in listed.stdout and "interactions-fresh-scaffold" in listed.stdout
    shutil.rmtree(folder / "interactions_fresh_scaffold")  # the tests must use the install
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "tests")],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "7 passed" in tests.stdout
    # no deprecation warning on the first run (pytest-asyncio's loop scope is set)
    assert "warning" not in (tests.stdout + tests.stderr).lower(), tests.stdout + tests.stderr


def test_a_name_whose_distribution_pip_takes_for_an_installed_one_is_refused(
    tmp_path: Path, make_dist: Any
) -> None:
    """`x__y` makes `interactions-x--y`, which pip takes for `interactions-x-y`: installing
    the new plugin silently uninstalled the other."""
    make_dist("interactions-acme-x", "0.1.0")
    with pytest.raises(ScaffoldError, match=r"'interactions-acme-x' \(0.1.0\) is installed"):
        create_plugin("acme__x", tmp_path / "p", registry=EMPTY)
