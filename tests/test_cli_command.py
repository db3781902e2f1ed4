"""Subcommands declared as data, and the options they share (both cli/_command.py)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io

import pytest

from interactions_core.cli import COMMANDS, build_parser, main
from interactions_core.cli._command import (
    Arg,
    Command,
    config_file,
    default_interaction,
    finite_number,
    flag,
    positive_int,
    positive_seconds,
    timeout,
    wait_seconds,
)


def _parser(command: Command, run: object = print) -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="tool")
    command.add_to(root.add_subparsers(dest="command"), run)  # type: ignore[arg-type]
    return root


def test_a_command_is_built_as_declared() -> None:
    command = Command(
        "go",
        help="short",
        description="long text",
        arguments=[
            config_file("the config", optional=True),
            Arg("--count", type=positive_int, default=3, metavar="N", help="how many"),
            flag("--json", "as JSON"),
        ],
    )
    root = _parser(command)
    args = root.parse_args(["go", "c.yaml", "--count", "5", "--json"])
    assert (args.config, args.count, args.json, args.run) == ("c.yaml", 5, True, print)
    defaults = root.parse_args(["go"])
    assert (defaults.config, defaults.count, defaults.json) == (None, 3, False)
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices["go"].description == "long text"
    assert [a.help for a in sub._choices_actions] == ["short"]


def test_a_group_without_its_subcommand_prints_its_help_and_exits_2() -> None:
    inner = Command("check", help="inner", description="checks", arguments=[flag("--json", "j")])
    group = Command("grp", help="group", description="the group", subcommands=[inner])
    root = _parser(group, run=len)
    bare = root.parse_args(["grp"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert bare.run(bare) == 2
    assert "the group" in out.getvalue() and "SUBCOMMAND" in out.getvalue()
    nested = root.parse_args(["grp", "check", "--json"])
    assert nested.run is len and nested.json is True


def test_dest_and_flag_are_named_as_argparse_names_them() -> None:
    assert Arg("--output", "-o").dest == "output"
    assert Arg("-p", "--policy-option").dest == "policy_option"
    assert Arg("records").dest == "records"
    assert Arg("--x", dest="why").dest == "why"
    assert flag("--dry-run", "h").is_flag and flag("--dry-run", "h").dest == "dry_run"
    assert not Arg("--limit", type=int).is_flag


def test_every_command_module_declares_its_command_under_its_name() -> None:
    for name in COMMANDS:
        module = importlib.import_module(f"interactions_core.cli.{name}")
        assert module.COMMAND.name == name
        assert callable(module.run)
    assert build_parser().parse_args(["cache", "path"]).run.__module__.endswith(".cache")


@pytest.mark.parametrize(
    ("check", "text", "message"),
    [
        (positive_int, "0", "must be at least 1, not 0"),
        (positive_int, "x", "'x' is not an integer"),
        (positive_seconds, "-1", "must be a positive number of seconds, not -1"),
        (positive_seconds, "y", "'y' is not a number"),
        (wait_seconds, "q", "'q' is not a number of seconds"),
        (wait_seconds, "0", "must be a positive number of seconds, not 0"),
        (finite_number, "nan", "must be a finite number, not nan"),
        (finite_number, "inf", "must be a finite number, not inf"),
        (finite_number, "z", "'z' is not a number"),
    ],
)
def test_bad_values_are_refused_with_what_is_wrong(check, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        check(text)
    assert str(caught.value) == message


def test_good_values_pass_through() -> None:
    assert positive_int("7") == 7
    assert positive_seconds("0.5") == 0.5
    assert wait_seconds("120") == 120.0
    assert finite_number("-2.5") == -2.5


def test_shared_options_read_the_same_in_every_command() -> None:
    assert timeout("it fails").options["help"] == "bound on each interaction call; it fails"
    assert timeout("x").options["type"] is positive_seconds
    help_text = default_interaction("resets").options["help"]
    assert help_text.startswith("interaction for resets whose interaction_kwargs has no name")
    parser = build_parser()
    for command in ("run", "serve"):
        args = parser.parse_args(
            [command, "c.yaml", "--timeout", "2", "--default-interaction", "n"]
        )
        assert (args.timeout, args.default_interaction) == (2.0, "n")


def test_data_takes_its_own_options_after_the_builder_too(capsys: pytest.CaptureFixture) -> None:
    # --limit after BUILDER is checked like --limit before it
    assert main(["data", "nope", "--limit", "0"]) == 1
    assert "--limit: must be at least 1, not 0" in capsys.readouterr().err
    assert main(["data", "nope", "--output"]) == 1
    assert "--output needs a value" in capsys.readouterr().err


def test_data_split_separates_its_options_from_the_builders() -> None:
    from interactions_core.cli.data import _split

    args = argparse.Namespace(output=None, limit=None, json=False, agent_name=None)
    rest = _split(
        [
            "--split",
            "train",
            "-o=rows.jsonl",
            "--limit",
            "3",
            "--json",
            "--json=1",
            "--agent-name",
            "a",
        ],
        args,
    )
    assert rest == ["--split", "train", "--json=1"]
    assert (args.output, args.limit, args.json, args.agent_name) == ("rows.jsonl", 3, True, "a")


@pytest.mark.parametrize("token", ["abc\n", " abc", "abc "])
def test_serve_refuses_a_token_with_whitespace_at_its_ends(
    token: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A secret file's last newline: HTTP strips a header value's ends, so every Task API
    request was refused (401) while a WebSocket reset had to send the newline."""
    monkeypatch.setenv("INTERACTIONS_SERVE_TOKEN", token)
    assert main(["serve", "examples/config.yaml"]) == 1
    err = capsys.readouterr().err
    assert "INTERACTIONS_SERVE_TOKEN begins or ends with whitespace" in err, err
