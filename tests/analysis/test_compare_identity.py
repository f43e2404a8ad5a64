"""``compare`` names each run's system and predictions file, and warns when its rows differ in
more than one of: predictions, judge method, model, dialogues, gold version."""

from __future__ import annotations

import json
import shutil

import pytest
from rich.console import Console

from judge.analysis import method_table
from judge.cli import main
from judge.cli._report import print_methods
from judge.pipeline import load_run
from tests.conftest import EXAMPLES, ROOT


def _run(out, predictions="predictions.jsonl", cassette="example-two-dim.json",
         dialogues=None, method="two-dim"):
    assert main(["evaluate", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(dialogues or EXAMPLES / "dialogues.jsonl"), "--predictions",
                 str(EXAMPLES / predictions), "--model", "local", "--method", method,
                 "--replay", str(ROOT / "cassettes" / cassette), "--no-cache",
                 "--no-progress", "--out", str(out)]) == 0
    return load_run(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    only_21 = base / "dialogues-21.jsonl"
    lines = []
    for line in (EXAMPLES / "dialogues.jsonl").read_text(encoding="utf-8").splitlines():
        dialogue = json.loads(line)
        for turn in dialogue["turns"]:
            turn.pop("gold_state_24", None)
        lines.append(json.dumps(dialogue))
    only_21.write_text("\n".join(lines) + "\n", encoding="utf-8")
    made = {"strong": _run(base / "strong"),
            "weak": _run(base / "weak", "predictions-weak.jsonl", "example-weak-two-dim.json"),
            "direct": _run(base / "direct", cassette="example-direct.json", method="direct"),
            "gold21": _run(base / "gold21", dialogues=only_21)}
    shutil.copytree(base / "strong", base / "other-model")
    summary = json.loads((base / "other-model" / "summary.json").read_text(encoding="utf-8"))
    summary["options"]["model"] = "another-model"
    (base / "other-model" / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    made["other-model"] = load_run(base / "other-model")
    return made


@pytest.mark.parametrize(("names", "differs"), [
    (("strong", "weak"), ["predictions"]),
    (("strong", "direct"), ["judge method"]),
    (("strong", "other-model"), ["model"]),
    (("strong", "gold21"), ["gold version"]),
    (("weak", "direct"), ["predictions", "judge method"]),
    (("direct", "gold21", "other-model"), ["judge method", "model", "gold version"]),
])
def test_the_aspects_rows_differ_in(runs, names, differs):
    table = method_table([runs[n] for n in names])
    assert table["differs_in"] == differs
    if len(differs) > 1:
        assert table["warning"].startswith(f"these runs differ in {differs[0]}")
    else:
        assert table["warning"] is None


def test_each_row_names_its_system_and_predictions_file(runs):
    table = method_table([runs["strong"], runs["weak"]])
    assert [(m["method"], m["system"], m["predictions_file"]) for m in table["methods"]] == [
        ("two-dim", "example-dst", "predictions.jsonl"),
        ("two-dim", "weaker-dst", "predictions-weak.jsonl")]
    console = Console(width=80, record=True, color_system=None)
    print_methods(method_table([runs["weak"], runs["direct"]]), console)
    text = console.export_text()
    assert "two-dim: system weaker-dst · predictions-weak.jsonl · model local" in text
    assert "direct: system example-dst · predictions.jsonl · model local" in text
    assert "warning: these runs differ in predictions and judge method" in " ".join(
        text.split())
