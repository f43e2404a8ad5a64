"""CLI help a newcomer can use: every option explained with its default; commands list only the
options that act there."""

from __future__ import annotations

import argparse

import pytest

from judge.cli import build_parser


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[-1]: a for a in parser._actions
            if a.option_strings and a.option_strings[-1] != "--help"}


@pytest.mark.parametrize("path", [("evaluate",), ("retry-errors",), ("metrics",),
                                  ("batch", "prepare"), ("batch", "collect"),
                                  ("agreement",), ("compare",), ("systems",), ("audit",)])
def test_every_option_and_argument_has_help(path):
    parser = _subparser(build_parser(), *path)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{' '.join(path)}: {action.dest} has no help"


@pytest.mark.parametrize("flag", ["--prompt-variant", "--response-format", "--temperature",
                                  "--top-p", "--seed", "--max-tokens", "--max-retries",
                                  "--method", "--concurrency", "--timeout", "--reasks"])
def test_evaluate_judge_options_show_their_default(flag):
    action = _options(_subparser(build_parser(), "evaluate"))[flag]
    assert "default:" in action.help, (flag, action.help)


def test_batch_prepare_lists_only_options_that_act_there():
    prepare = _options(_subparser(build_parser(), "batch", "prepare"))
    for flag in ("--concurrency", "--budget", "--cache-dir", "--rpm", "--timeout",
                 "--semantics", "--rule-match", "--http-backend", "--reasks", "--base-url"):
        assert flag not in prepare, flag
    for flag in ("--model", "--method", "--temperature", "--response-format", "--out"):
        assert flag in prepare, flag


def test_semantics_help_says_it_changes_filtering_not_requests():
    text = _options(_subparser(build_parser(), "evaluate"))["--semantics"].help
    assert "filter" in text and "never the requests" in text


def test_dry_run_needs_no_out(capsys):
    from pathlib import Path

    from judge.cli import main

    examples = Path(__file__).resolve().parents[2] / "examples"
    code = main(["evaluate", "--schema", str(examples / "schema.json"),
                 "--dialogues", str(examples / "dialogues.jsonl"),
                 "--predictions", str(examples / "predictions.jsonl"), "--no-cache",
                 "--dry-run"])
    assert code == 0
    assert "calls" in capsys.readouterr().out.lower()


def test_evaluate_without_out_names_the_option(capsys):
    from pathlib import Path

    from judge.cli import main

    examples = Path(__file__).resolve().parents[2] / "examples"
    code = main(["evaluate", "--schema", str(examples / "schema.json"),
                 "--dialogues", str(examples / "dialogues.jsonl"),
                 "--predictions", str(examples / "predictions.jsonl"), "--no-cache"])
    assert code == 2
    assert "--out" in capsys.readouterr().err


def test_command_groups_say_what_their_steps_are_for():
    """``labels --help`` (a group of steps) has a description, not just a list of steps;
    so does every other group of subcommands."""
    top = build_parser()
    groups = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    missing = [name for name, parser in groups.choices.items()
               if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
               and not parser.description]
    assert missing == []
    assert "plan" in _subparser(top, "labels").description
