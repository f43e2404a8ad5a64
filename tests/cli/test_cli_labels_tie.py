"""Labels that belong to their run (issue 42, item 5): a labels file whose labels name no
predictions digest cannot be told from labels of another system's run, so ``agreement`` and
``compare`` alike warn, naming the risk, and mark the figures (in the output and the JSON) as
resting on labels not tied to the run; ``labels import --run`` writes the digest."""

from __future__ import annotations

import json

from judge.analysis import recorded_predictions_sha256
from judge.cli import main

from .test_cli_estimates import flat, label_file, rows_of

RISK = "labels written for another system's predictions would be taken for this run's"


def _sample(runs, tmp_path, capsys, n: int = 7):
    sample = tmp_path / "sample.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--n", str(n), "--seed", "1",
                 "--out", str(sample)]) == 0
    capsys.readouterr()
    return sample


def _stamped(path, digest):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    stamped = path.with_name("stamped-" + path.name)
    stamped.write_text("".join(json.dumps({**r, "predictions_sha256": digest}) + "\n"
                               for r in records))
    return stamped


def test_agreement_warns_and_marks_figures_on_another_runs_labels_without_a_digest(
        runs, tmp_path, capsys):
    """Labels written for the weak system's run, naming no digest, given for the good run:
    the figures come (exit 0) but the output warns and marks them, and so does the JSON."""
    sample = _sample(runs, tmp_path, capsys)
    keys = list(rows_of(runs["good"]))
    weak = label_file(tmp_path / "weak.jsonl", runs["weak"], keys)
    report = tmp_path / "report.json"
    assert main(["agreement", str(runs["good"]), "--human", str(weak), "--sample", str(sample),
                 "--n-boot", "0", "--json", str(report)]) == 0
    out = flat(capsys.readouterr().out)
    # rich may break the long temporary path anywhere: compared with every space taken out
    assert "".join(f"{len(keys)} of {len(keys)} labels in {weak} name no "
                   "predictions_sha256".split()) in "".join(out.split())
    assert RISK in out
    assert "human figures rest on labels not tied to this run" in out
    assert "Estimates (random design by turn, 95 % t intervals) — on labels not tied to " \
           "this run" in out
    data = json.loads(report.read_text())
    assert data["labels_tie"]["tied"] is False
    assert data["labels_tie"]["unnamed_labels"] == len(keys)
    assert RISK in data["labels_tie"]["warning"]
    assert data["population"]["labels_tied"] is False
    # the same labels naming the good run's predictions: tied, no warning, nothing marked
    digest = recorded_predictions_sha256(runs["good"])
    assert digest is not None
    good = _stamped(label_file(tmp_path / "good.jsonl", runs["good"], keys), digest)
    assert main(["agreement", str(runs["good"]), "--human", str(good), "--sample", str(sample),
                 "--n-boot", "0", "--json", str(report)]) == 0
    out = flat(capsys.readouterr().out)
    assert "not tied" not in out and "predictions_sha256" not in out
    data = json.loads(report.read_text())
    assert data["labels_tie"]["tied"] is True and data["labels_tie"]["warning"] is None
    assert data["population"]["labels_tied"] is True
    # naming the weak run's predictions, they are refused for the good run (as before)
    wrong = _stamped(weak, recorded_predictions_sha256(runs["weak"]))
    assert main(["agreement", str(runs["good"]), "--human", str(wrong)]) != 0
    assert "belong to another run's predictions" in flat(capsys.readouterr().err)


def test_compare_treats_labels_without_a_digest_as_agreement_does(runs, tmp_path, capsys):
    keys = list(rows_of(runs["good"]))
    sample = _sample(runs, tmp_path, capsys, n=11)
    table = tmp_path / "compare.json"
    # one labels file for both runs, naming no digest: each run's figures are marked
    shared = label_file(tmp_path / "shared.jsonl", runs["good"], keys)
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--human", str(shared),
                 "--json", str(table)]) == 0
    out = flat(capsys.readouterr().out)
    assert RISK in out and "name no predictions_sha256" in out
    assert "(human figures rest on labels not tied to these runs)" in out
    data = json.loads(table.read_text())
    assert data["labels_tied"] is False
    assert [t["tied"] for t in data["labels_tie"]] == [False, False]
    # one file per run, naming none: paired by order (said) and marked, differences too
    good = label_file(tmp_path / "good.jsonl", runs["good"], keys)
    weak = label_file(tmp_path / "weak.jsonl", runs["weak"], keys)
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                 "--human", str(good), str(weak), "--json", str(table)]) == 0
    out = flat(capsys.readouterr().out)
    assert "paired with runs by the order given" in out and RISK in out
    assert "on labels not tied to this run" in out
    data = json.loads(table.read_text())
    assert data["labels_tied"] is False
    assert all(d["labels_tied"] is False for d in data["differences"])
    # with their runs' digests: tied, nothing said or marked
    stamped = [_stamped(path, recorded_predictions_sha256(runs[name]))
               for path, name in ((good, "good"), (weak, "weak"))]
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                 "--human", *map(str, stamped), "--json", str(table)]) == 0
    out = flat(capsys.readouterr().out)
    assert "not tied" not in out and RISK not in out
    data = json.loads(table.read_text())
    assert data["labels_tied"] is True
    assert all(d["labels_tied"] is True for d in data["differences"])


def test_labels_import_writes_the_runs_digest(runs, tmp_path, capsys):
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text("".join(json.dumps({"dialogue_id": d, "turn_index": t,
                                             "decision": "correct", "annotator": "ana"}) + "\n"
                                 for d, t in list(rows_of(runs["good"]))[:3]))
    out = tmp_path / "labels.jsonl"
    assert main(["labels", "import", str(decisions), "--out", str(out), "--run",
                 str(runs["good"])]) == 0
    assert "warning" not in capsys.readouterr().out
    digest = recorded_predictions_sha256(runs["good"])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 and {r["predictions_sha256"] for r in records} == {digest}
    assert main(["validate", "labels", str(out)]) == 0
    capsys.readouterr()
    assert main(["labels", "import", str(decisions), "--out", str(out)]) == 0
    said = flat(capsys.readouterr().out)
    assert "the labels name no predictions_sha256 (give --run RUN_DIR)" in said
    assert all("predictions_sha256" not in json.loads(line)
               for line in out.read_text().splitlines())
