"""A corrected gold on the commands that read a judge run's RULE verdicts: ``labels sample
--gold V --corrections C`` stratifies by the corrected version, and the sample's consumers draw
it again only with the same corrections."""

from __future__ import annotations

import json

from judge import load_dialogues, load_schema
from judge.cli import main
from judge.pipeline import load_run, with_gold_versions

from ..conftest import EXAMPLES
from ..conftest import replayed_example_run as _run


def _corrections(tmp_path):
    path = tmp_path / "corrections.jsonl"
    path.write_text(json.dumps(
        {"dialogue_id": "EX001.json", "turn_index": 2, "slot": "hotel-name",
         "value": "worth house", "gold": "2.1", "reviewer": "ann",
         "time": "2026-11-28T10:00:00Z"}) + "\n")
    return path


def test_rule_verdicts_of_a_version_computed_again_are_the_runs_own(tmp_path):
    run = load_run(_run(tmp_path))
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl", schema=schema)
    stripped = [{**row, "rule": {}, "gold_turn_state": {}} for row in run.rows]
    again = with_gold_versions(stripped, dialogues, schema, run.summary["rule_match"],
                               ["2.1", "2.4"])
    assert [row["rule"] for row in again] == [row["rule"] for row in run.rows]
    assert [row["gold_turn_state"] for row in again] == \
        [row["gold_turn_state"] for row in run.rows]


def test_labels_sample_stratifies_by_the_corrected_gold_and_consumers_need_it(tmp_path,
                                                                             capsys):
    run = _run(tmp_path)
    corrections = _corrections(tmp_path)
    sample = tmp_path / "sample.jsonl"
    assert main(["labels", "sample", str(run), "--n", "6", "--design", "judge-rule",
                 "--gold", "2.1", "--corrections", str(corrections), "--out",
                 str(sample)]) == 0
    first = json.loads(sample.read_text().splitlines()[0])
    assert first["gold"].startswith("2.1+corr:")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"dialogue_id": json.loads(line)["dialogue_id"],
                                          "turn_index": json.loads(line)["turn_index"],
                                          "label": 1}) + "\n"
                              for line in sample.read_text().splitlines()))
    capsys.readouterr()
    code = main(["agreement", str(run), "--human", str(labels), "--sample", str(sample)])
    err = capsys.readouterr().err
    assert code == 2 and "pass the corrections it was drawn with" in err
    assert main(["agreement", str(run), "--human", str(labels), "--sample", str(sample),
                 "--corrections", str(corrections), "--json",
                 str(tmp_path / "agreement.json")]) == 0
    report = json.loads((tmp_path / "agreement.json").read_text())
    assert any(key.startswith("2.1+corr:") for key in json.dumps(report).split('"'))
