"""Counts read as English ("1 turn", "2 turns"), and judge JGA is defined where it is shown:
in full in ``evaluate --help`` (why it can exceed TSA), in one line under the report."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from judge._glossary import JUDGE_JGA_DEFINITION
from judge._io import plural
from judge.cli import main
from judge.cli._report import print_evaluation, print_metrics
from judge.data import load_dialogues, load_predictions, load_schema
from judge.metrics import MetricOptions, compute_metrics
from tests.conftest import EXAMPLES, ROOT, predictions_with_slot_errors


def test_plural():
    assert plural(1, "label") == "1 label" and plural(0, "label") == "0 labels"
    assert plural(2, "turn") == "2 turns" and plural(3, "reply", "replies") == "3 replies"


def test_evaluate_help_defines_judge_jga(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(JUDGE_JGA_DEFINITION.split()) in out
    assert "can exceed it" in out and "value rule" in out


def test_the_report_says_what_judge_jga_is_when_it_exceeds_tsa(tmp_path, capsys):
    # the weak example system: judge JGA 81.8 % against TSA 72.7 % (a value-rule drop)
    assert main(["evaluate", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions",
                 str(EXAMPLES / "predictions-weak.jsonl"), "--model", "local", "--replay",
                 str(ROOT / "cassettes" / "example-weak-two-dim.json"), "--no-cache",
                 "--out", str(tmp_path / "weak"), "--no-progress"]) == 0
    import json

    summary = json.loads((tmp_path / "weak" / "summary.json").read_text(encoding="utf-8"))
    assert summary["judge_jga"] > summary["tsa"]
    console = Console(width=200, record=True, color_system=None)
    print_evaluation(summary, console)
    text = console.export_text()
    assert "Judge JGA: the share of turns after which the judge leaves nothing outstanding" \
        in text and "it can still exceed TSA" in text


def test_counts_of_one_are_singular_in_the_metrics_notes(tmp_path):
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl", schema=schema)
    planted = predictions_with_slot_errors(tmp_path / "p.jsonl", typo=False)
    predictions = load_predictions(planted, dialogues, schema)
    report = compute_metrics(dialogues, [predictions], schema, MetricOptions())
    console = Console(width=300, record=True, color_system=None)
    print_metrics(report, console)
    text = console.export_text()
    assert ("1 predicted slot name outside the schema in 1 turn (train-book time: closest "
            "schema slot restaurant-book time)") in text
    assert "name(s)" not in text and not re.search(r"\b1 turns\b", text)


def test_a_dry_run_of_one_system_says_no_one_systems():
    """A dry run of one system with identical requests says so, not "(1 systems)"."""
    from rich.console import Console

    from judge.cli._report import print_estimate

    figures = {"model": "m", "calls": 10, "already_cached": 0, "to_send": 10, "systems": 1,
               "duplicates": 3, "skipped": 0, "prompt_tokens": 1000,
               "static_prompt_tokens": 500, "provider_cacheable_tokens": 0,
               "completion_tokens": 100, "note": "",
               "cost_usd": {"live": 1.0, "live_with_prompt_caching": 0.5, "batch": 0.5}}
    for systems, wanted in ((1, "identical requests, sent once"),
                            (2, "(2 systems), sent once")):
        console = Console(width=200, record=True, color_system=None)
        print_estimate({**figures, "systems": systems}, console)
        output = console.export_text()
        assert wanted in output and "1 systems" not in output, output
