"""The exact-match suite and the paper tables read in step (one dialogue at a time) give the
very figures of the whole-set path, on the examples and on the shared test set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judge.cli import main
from judge.data import NotInStep, load_dialogues, load_predictions, load_schema
from judge.metrics import (
    MetricOptions,
    compute_metrics,
    paper_tables,
    stream_metrics,
    stream_paper_tables,
)

from ..conftest import EXAMPLES, ROOT, predictions_with_slot_errors, shared_path

SCHEMA, DIALOGUES = EXAMPLES / "schema.json", EXAMPLES / "dialogues.jsonl"
SYSTEMS = [EXAMPLES / "predictions.jsonl", EXAMPLES / "predictions-weak.jsonl"]


def _whole(schema_path: Path, dialogues_path: Path, paths: list[Path],
           options: MetricOptions, gold: str | None = None) -> dict:
    schema = load_schema(schema_path)
    dialogues = load_dialogues(dialogues_path, schema=schema)
    systems = [load_predictions(p, dialogues, schema) for p in paths]
    return compute_metrics(dialogues, systems, schema, options, gold=gold).to_dict()


@pytest.mark.parametrize("options", [
    MetricOptions(),
    MetricOptions(per_dialogue=True, aga_unit="frame", rsa_empty_turn="skip"),
    MetricOptions(match="normalized", keep_explicit_none=True, gca_dedupe=True,
                  update_include_removals=True),
    MetricOptions(breakdowns=False, undefined="null"),
], ids=["default", "per-dialogue", "normalized-none", "no-breakdowns"])
def test_streamed_metrics_equal_whole_examples(options):
    schema = load_schema(SCHEMA)
    streamed, _ = stream_metrics(DIALOGUES, SYSTEMS, schema, options)
    assert streamed.to_dict() == _whole(SCHEMA, DIALOGUES, SYSTEMS, options)


def test_streamed_metrics_count_input_problems_alike(tmp_path):
    planted = predictions_with_slot_errors(tmp_path / "planted.jsonl")
    schema = load_schema(SCHEMA)
    streamed, files = stream_metrics(DIALOGUES, [planted], schema, gold="2.1")
    whole = _whole(SCHEMA, DIALOGUES, [planted], MetricOptions(), gold="2.1")
    assert streamed.to_dict() == whole
    inputs = streamed.systems[0].inputs
    assert inputs["out_of_schema_slots"] and inputs["turns_with_out_of_schema_slots"] > 0
    assert files.scans[0].renamed == load_predictions(
        planted, load_dialogues(DIALOGUES, schema=schema), schema).renamed


def test_files_out_of_step_are_refused(tmp_path):
    lines = (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    shuffled = tmp_path / "reordered.jsonl"
    shuffled.write_text("\n".join([*lines[1:], lines[0]]) + "\n", encoding="utf-8")
    with pytest.raises(NotInStep):
        stream_metrics(DIALOGUES, [shuffled], load_schema(SCHEMA))


def test_cli_metrics_streamed_and_whole_write_the_same_json(tmp_path, capsys):
    lines = (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    shuffled = tmp_path / "reordered.jsonl"  # another order: loaded whole, same figures
    shuffled.write_text("\n".join([*lines[1:], lines[0]]) + "\n", encoding="utf-8")
    data = ["--schema", str(SCHEMA), "--dialogues", str(DIALOGUES)]
    outs = {}
    for label, systems in (("streamed", SYSTEMS), ("whole", [shuffled, SYSTEMS[1]])):
        outs[label] = tmp_path / f"{label}.json"
        assert main(["metrics", *data, "--predictions", *map(str, systems),
                     "--json", str(outs[label])]) == 0
    streamed, whole = (json.loads(outs[k].read_text(encoding="utf-8")) for k in outs)
    for report in (streamed, whole):
        for system in report["systems"]:
            system.pop("path")
    assert streamed == whole
    assert "JGA" in capsys.readouterr().out


def test_streamed_paper_tables_equal_whole_examples():
    schema = load_schema(SCHEMA)
    dialogues = load_dialogues(DIALOGUES, schema=schema)
    systems = [load_predictions(p, dialogues, schema) for p in SYSTEMS]
    for versions in (None, ["2.4"]):
        whole = paper_tables(dialogues, systems, schema, versions=versions)
        streamed, _ = stream_paper_tables(DIALOGUES, SYSTEMS, schema, versions=versions)
        assert streamed == whole


def test_cli_report_streamed_equals_whole(tmp_path, capsys):
    data = ["--schema", str(SCHEMA), "--dialogues", str(DIALOGUES)]
    lines = (EXAMPLES / "predictions-weak.jsonl").read_text(encoding="utf-8").splitlines()
    shuffled = tmp_path / "predictions-weak.jsonl"
    shuffled.write_text("\n".join([*lines[1:], lines[0]]) + "\n", encoding="utf-8")
    texts = []
    for systems in (SYSTEMS, [SYSTEMS[0], shuffled]):
        out = tmp_path / "table.csv"
        assert main(["report", *data, "--predictions", *map(str, systems),
                     "--table-out", str(out)]) == 0
        texts.append(out.read_text(encoding="utf-8"))
    assert texts[0] == texts[1] and texts[0].count("\n") == 5  # header, 2 systems x 2 versions


def test_cli_imports_no_heavy_statistics_library():
    """scikit-learn and SciPy (about 150 MB resident) load only when a statistic needs
    them, so a command that needs none stays small."""
    code = ("import sys, judge.cli; "
            "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("options", [MetricOptions(), MetricOptions(per_dialogue=True)],
                         ids=["default", "per-dialogue"])
def test_streamed_metrics_equal_whole_shared(options):
    folder = shared_path("multiwoz")
    paths = [folder / "predictions" / f"{name}.jsonl.gz" for name in ("original", "da", "da-p")]
    schema = load_schema(folder / "schema.json")
    streamed, _ = stream_metrics(folder / "dialogues.jsonl.gz", paths, schema, options,
                                 gold="2.4")
    assert streamed.to_dict() == _whole(folder / "schema.json", folder / "dialogues.jsonl.gz",
                                        paths, options, gold="2.4")


def test_streamed_paper_tables_equal_whole_shared():
    folder = shared_path("multiwoz")
    paths = [folder / "predictions" / f"{name}.jsonl.gz" for name in ("original", "da")]
    schema = load_schema(folder / "schema.json")
    dialogues = load_dialogues(folder / "dialogues.jsonl.gz", schema=schema)
    systems = [load_predictions(p, dialogues, schema) for p in paths]
    streamed, _ = stream_paper_tables(folder / "dialogues.jsonl.gz", paths, schema)
    assert streamed == paper_tables(dialogues, systems, schema)
