"""Agreement between judge, RULE and humans: hand-computed figures on small made-up runs,
dialogue-level bootstrap intervals, and human label loading with errors that point at the line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support

from judge import InputError
from judge.analysis._agreement import (
    HumanLabel,
    HumanLabels,
    _bootstrap,
    agreement_report,
    load_labels,
    resample_dialogues,
    statistics_from_counts,
)
from judge.analysis._agreement_tables import (
    AGREEMENT_HEADER,
    REEVALUATION_HEADER,
    format_agreement,
    format_reevaluation,
)
from judge.errors import DataMismatchError, OptionError

from ..conftest import assert_located, write_jsonl

SCHEMA_PATH = (Path(__file__).resolve().parents[2] / "judge" / "data" / "formats"
               / "labels.schema.json")


def row(dialogue: str, turn: int, verdict: bool | None, **rule: bool | None) -> dict[str, Any]:
    """A judgment row with only the fields agreement needs; ``v24=True`` -> rule {"2.4": True}."""
    return {"dialogue_id": dialogue, "turn_index": turn, "verdict": verdict,
            "rule": {k[1] + "." + k[2:]: v for k, v in rule.items()}}


def labels(*records: dict[str, Any]) -> HumanLabels:
    return HumanLabels([HumanLabel.model_validate(r) for r in records])


def pair(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["pairs"] if p["name"] == name)


def assert_no_nan(value: Any) -> None:
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for item in value.values():
            assert_no_nan(item)
    elif isinstance(value, list | tuple):
        for item in value:
            assert_no_nan(item)


# Judge (a) against RULE-2.4 (b), per dialogue (judge, rule) as 1/0:
#   D0 (0,0) (0,0)   D1 (0,0) (0,1)   D2 (1,0) (1,0)   D3 (1,1) (1,1)   D4 (1,1) (1,1)
# plus an error row in D5 that no statistic may see.
HAND = [(d, t, j, r) for d, pairs in enumerate(
    [[(0, 0), (0, 0)], [(0, 0), (0, 1)], [(1, 0), (1, 0)], [(1, 1), (1, 1)], [(1, 1), (1, 1)]])
    for t, (j, r) in enumerate(pairs)]
HAND_ROWS = [row(f"D{d}", t, bool(j), v24=bool(r)) for d, t, j, r in HAND]
HAND_ROWS.append(row("D5", 0, None, v24=True))


def test_hand_computed_kappa_confusion_and_incorrect_class():
    report = agreement_report(HAND_ROWS, n_boot=200, seed=1)
    assert report["raters"] == ["judge", "RULE-2.4"]
    assert (report["turns"], report["judged_turns"], report["error_turns"]) == (11, 10, 1)
    assert report["dialogues"] == 6
    p = pair(report, "judge vs RULE-2.4")
    assert (p["a"], p["b"], p["reference"], p["n"], p["dialogues"]) == (
        "judge", "RULE-2.4", "RULE-2.4", 10, 5)
    # rows = judge, columns = RULE, order [incorrect, correct]:
    #   c00 = D0 x2 + D1 first = 3, c01 = D1 second = 1, c10 = D2 x2 = 2, c11 = D3 + D4 = 4
    assert p["confusion"] == {"rows": "judge", "columns": "RULE-2.4",
                              "labels": ["incorrect", "correct"], "matrix": [[3, 1], [2, 4]]}
    # accuracy = (3 + 4) / 10 = 70 %
    assert p["accuracy"]["value"] == pytest.approx(70.0)
    # po = 0.7; judge marginals (4 incorrect, 6 correct), RULE marginals (5, 5)
    # pe = (4*5 + 6*5) / 10² = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert p["kappa"]["value"] == pytest.approx(0.4)
    # incorrect class, RULE as reference: tp = 3, fp = 1 (judge incorrect, RULE correct),
    # fn = 2; precision = 3/4, recall = 3/5, F1 = 2*3 / (2*3 + 1 + 2) = 6/9
    assert p["precision"]["value"] == pytest.approx(75.0)
    assert p["recall"]["value"] == pytest.approx(60.0)
    assert p["f1"]["value"] == pytest.approx(100 * 6 / 9)
    assert report["bootstrap"] == {"n_boot": 200, "seed": 1, "confidence": 0.95,
                                   "unit": "dialogue", "method": "percentile"}
    assert report["human"] is None and report["reevaluation"] is None
    assert_no_nan(report)


def test_rules_of_every_version_are_raters_and_later_rater_is_reference():
    rows = [row("D0", 0, True, v21=True, v24=False), row("D0", 1, False, v21=False, v24=False)]
    report = agreement_report(rows, n_boot=0)
    assert report["raters"] == ["judge", "RULE-2.1", "RULE-2.4"]
    assert [p["name"] for p in report["pairs"]] == [
        "judge vs RULE-2.1", "judge vs RULE-2.4", "RULE-2.1 vs RULE-2.4"]
    assert pair(report, "judge vs RULE-2.1")["accuracy"]["value"] == 100.0
    p = pair(report, "judge vs RULE-2.4")
    assert p["accuracy"]["value"] == 50.0
    # judge says incorrect once and RULE-2.4 agrees (tp 1, fp 0); RULE-2.4 says incorrect
    # twice (fn 1): precision 100 %, recall 50 %
    assert (p["precision"]["value"], p["recall"]["value"]) == (100.0, 50.0)
    assert p["accuracy"]["ci"] is None  # n_boot = 0: no intervals


def test_vectorised_statistics_match_scikit_learn():
    cases = [[3, 1, 2, 4], [0, 0, 0, 5], [5, 0, 0, 0], [0, 3, 0, 2], [0, 0, 4, 1],
             [2, 0, 0, 2], [0, 2, 2, 0], [1, 2, 3, 4]]
    for c00, c01, c10, c11 in cases:
        a = [0] * (c00 + c01) + [1] * (c10 + c11)
        b = [0] * c00 + [1] * c01 + [0] * c10 + [1] * c11
        counts = np.array([c00, c01, c10, c11])
        got = {k: float(v) for k, v in statistics_from_counts(counts).items()}
        assert got["accuracy"] == pytest.approx(100 * (c00 + c11) / len(a))
        # kappa is undefined only when both raters give one and the same label throughout
        constant = len(set(a)) == 1 and set(a) == set(b)
        expected_kappa = np.nan if constant else cohen_kappa_score(a, b, labels=[0, 1])
        assert got["kappa"] == pytest.approx(expected_kappa, nan_ok=True)
        p, r, f, _ = precision_recall_fscore_support(b, a, labels=[0], zero_division=np.nan)
        for name, value in (("precision", p[0]), ("recall", r[0]), ("f1", f[0])):
            assert got[name] == pytest.approx(100 * value, nan_ok=True), (name, c00, c01, c10, c11)


def test_undefined_statistics_are_none():
    # both raters say "correct" everywhere: chance agreement 1, no incorrect labels at all
    rows = [row(f"D{d}", t, True, v24=True) for d in range(3) for t in range(2)]
    p = pair(agreement_report(rows, n_boot=50), "judge vs RULE-2.4")
    assert p["accuracy"]["value"] == 100.0
    for name in ("kappa", "precision", "recall", "f1"):
        assert p[name] == {"value": None, "ci": None}
    # a constant judge: kappa is defined and 0 (po = pe); precision is undefined (the judge
    # never says incorrect), recall and F1 are 0 (RULE's incorrect turns are all missed)
    rows = [row("D0", 0, True, v24=False), row("D0", 1, True, v24=True),
            row("D1", 0, True, v24=True)]
    report = agreement_report(rows, n_boot=50)
    p = pair(report, "judge vs RULE-2.4")
    assert p["kappa"]["value"] == 0.0
    assert p["precision"]["value"] is None
    assert (p["recall"]["value"], p["f1"]["value"]) == (0.0, 0.0)
    assert_no_nan(report)


def test_bootstrap_is_reproducible_and_seed_dependent():
    rng = np.random.default_rng(7)
    rows = []
    for d in range(40):
        for t in range(int(rng.integers(2, 8))):
            judge = bool(rng.random() < 0.7)
            rule = judge if rng.random() < 0.8 else not judge
            rows.append(row(f"MUL{d:04d}.json", t, judge, v24=rule))
    first = agreement_report(rows, n_boot=300, seed=3)
    assert agreement_report(rows, n_boot=300, seed=3) == first
    other = agreement_report(rows, n_boot=300, seed=4)
    p, q = pair(first, "judge vs RULE-2.4"), pair(other, "judge vs RULE-2.4")
    assert p["accuracy"]["value"] == q["accuracy"]["value"]
    assert p["accuracy"]["ci"] != q["accuracy"]["ci"]
    for name in ("accuracy", "kappa", "precision", "recall", "f1"):
        low, high = p[name]["ci"]
        assert low <= p[name]["value"] <= high, name
        assert low < high
    wider = pair(agreement_report(rows, n_boot=300, seed=3, confidence=0.99),
                 "judge vs RULE-2.4")["accuracy"]["ci"]
    assert wider[0] <= p["accuracy"]["ci"][0] and wider[1] >= p["accuracy"]["ci"][1]


def test_resampling_draws_dialogues_with_replacement():
    counts = resample_dialogues(10, 500, np.random.default_rng(0))
    assert counts.shape == (500, 10)
    assert (counts.sum(axis=1) == 10).all()
    assert (counts == 0).any() and (counts >= 2).any()
    assert np.array_equal(counts, resample_dialogues(10, 500, np.random.default_rng(0)))


def test_bootstrap_moves_whole_dialogues():
    # D0 holds all 5 disagreements; D1..D9 have 5 agreeing turns each. A replicate's accuracy
    # is 100 * (1 - 5m/50) where m = how often D0 was drawn, so only multiples of 10 occur;
    # resampling turns instead would give values like 98.
    per_dialogue = np.array([[0, 5, 0, 0]] + [[5, 0, 0, 0]] * 9)  # [c00, c01, c10, c11]
    sums = _bootstrap(per_dialogue, 2000, np.random.default_rng(5))
    assert (sums.sum(axis=1) == 50).all()
    accuracy = statistics_from_counts(sums)["accuracy"]
    assert set(np.round(accuracy, 9)) <= {100.0, 90.0, 80.0, 70.0, 60.0, 50.0, 40.0}
    assert (accuracy == 100.0).any()  # D0 left out
    assert (accuracy <= 80.0).any()  # D0 drawn at least twice


def test_option_and_row_errors():
    with pytest.raises(OptionError):
        agreement_report(HAND_ROWS, confidence=1.5)
    with pytest.raises(OptionError):
        agreement_report(HAND_ROWS, n_boot=-1)
    with pytest.raises(DataMismatchError, match="twice"):
        agreement_report([row("D0", 0, True, v24=True), row("d0.json", 0, False, v24=True)])
    with pytest.raises(DataMismatchError, match="verdict"):
        agreement_report([row("D0", 0, "yes", v24=True)])  # type: ignore[arg-type]


@pytest.mark.parametrize(("second", "field"), [
    (row("d0.json", 0, False, v24=True), "dialogue_id"),  # the same turn again
    (row("D1", 0, "yes", v24=True), "verdict")])  # type: ignore[arg-type]
def test_cli_names_the_judgments_line_of_a_bad_row(tmp_path, capsys, second, field):
    from judge.cli import main

    run = tmp_path / "run"
    run.mkdir()
    rows = write_jsonl(run / "judgments.jsonl", [row("D0", 0, True, v24=True), second])
    (run / "summary.json").write_text("{}", encoding="utf-8")
    assert main(["agreement", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{rows}:2: field '{field}'" in err and "Traceback" not in err


# --------------------------------------------------------------------------- human labels


def test_majority_vote_and_ties():
    human = labels(
        {"dialogue_id": "D0", "turn_index": 0, "label": 1, "annotator": "x"},
        {"dialogue_id": "D0", "turn_index": 0, "label": 1, "annotator": "y"},
        {"dialogue_id": "D0", "turn_index": 0, "label": 0, "annotator": "z"},
        {"dialogue_id": "D0", "turn_index": 1, "label": 1, "annotator": "x"},
        {"dialogue_id": "D0", "turn_index": 1, "label": 0, "annotator": "y"},
        {"dialogue_id": "D0.json", "turn_index": 2, "label": 0, "annotator": "z"},
        {"dialogue_id": "d0", "turn_index": 3, "label": 0},
    )
    assert human.annotators == ("x", "y", "z", "(unnamed)")
    assert human.per_turn() == {("d0", 0): 1, ("d0", 2): 0, ("d0", 3): 0}
    assert human.tied_turns() == [("d0", 1)]


def test_inter_annotator_agreement():
    # x and y on four turns: x = 1 1 0 0, y = 1 0 0 0 -> agreement 3/4 = 75 %;
    # rows x, columns y: c00 = 2, c01 = 0, c10 = 1, c11 = 1; po = 0.75,
    # pe = (2*3 + 2*1) / 4² = 0.5, kappa = 0.25 / 0.5 = 0.5.
    # z labels turns 0-1 as 1 1: with x (1 1) 100 % and kappa undefined (both constant);
    # with y (1 0) 50 %, pe = (1*0 + 1*2) / 4 = 0.5 = po, kappa 0.
    x, y, z = [1, 1, 0, 0], [1, 0, 0, 0], [1, 1]
    records = [{"dialogue_id": "D0", "turn_index": t, "label": v, "annotator": name}
               for name, values in (("x", x), ("y", y), ("z", z)) for t, v in enumerate(values)]
    block = agreement_report([row("D0", t, True, v24=True) for t in range(4)], labels(*records),
                             n_boot=0)["human"]["inter_annotator"]
    assert [(p["a"], p["b"], p["n"]) for p in block["pairs"]] == [
        ("x", "y", 4), ("x", "z", 2), ("y", "z", 2)]
    xy, xz, yz = block["pairs"]
    assert (xy["agreement"], xy["kappa"]) == (75.0, pytest.approx(0.5))
    assert (xz["agreement"], xz["kappa"]) == (100.0, None)
    assert (yz["agreement"], yz["kappa"]) == (50.0, pytest.approx(0.0))
    assert block["mean_kappa"] == pytest.approx(0.25)  # mean of the defined kappas 0.5 and 0
    assert block["mean_agreement"] == pytest.approx(75.0)  # (75 + 100 + 50) / 3


def test_one_annotator_has_no_inter_annotator_block():
    human = labels({"dialogue_id": "D0", "turn_index": 0, "label": 1})
    assert agreement_report(HAND_ROWS, human, n_boot=0)["human"]["inter_annotator"] is None


# Judge (J) and RULE-2.4 (R) per turn, with the human labels of the paper's protocol:
#   A0 J1 R1 agree                 B0 J0 R1 disagree, human 1 (sides with RULE)
#   A1 J0 R0 agree                 B1 J1 R1 agree
#   A2 J1 R0 disagree, human 1     B2 J0 R1 disagree, no label
#   C0 J1 R0 disagree, humans tie  C1 error row (no judge verdict), human 1
REEVAL_ROWS = [
    row("SNG01.json", 0, True, v24=True), row("SNG01.json", 1, False, v24=False),
    row("SNG01.json", 2, True, v24=False),
    row("SNG02.json", 0, False, v24=True), row("SNG02.json", 1, True, v24=True),
    row("SNG02.json", 2, False, v24=True),
    row("SNG03.json", 0, True, v24=False), row("SNG03.json", 1, None, v24=True),
]
REEVAL_LABELS = [
    {"dialogue_id": "sng01", "turn_index": 2, "label": 1, "annotator": "x"},
    {"dialogue_id": "sng02", "turn_index": 0, "label": 1, "annotator": "x"},
    {"dialogue_id": "sng03", "turn_index": 0, "label": 1, "annotator": "x"},
    {"dialogue_id": "sng03", "turn_index": 0, "label": 0, "annotator": "y"},
    {"dialogue_id": "sng03", "turn_index": 1, "label": 1, "annotator": "x"},
    {"dialogue_id": "ZZZ9", "turn_index": 0, "label": 0, "annotator": "x"},
]


def test_reevaluation_accuracy_by_hand(tmp_path):
    human = load_labels(write_jsonl(tmp_path / "labels.jsonl", REEVAL_LABELS))
    report = agreement_report(REEVAL_ROWS, human, n_boot=200, seed=2)
    assert report["raters"] == ["judge", "RULE-2.4", "human"]
    (entry,) = report["reevaluation"]
    # 7 turns with a judge verdict; agree A0 A1 B1 = 3; disagree A2 B0 B2 C0 = 4, of which
    # A2 and B0 have a majority label and only A2's equals the judge; B2 (none) and C0 (tie)
    # count as not matching: (3 + 1) / 7
    assert entry["accuracy"]["value"] == pytest.approx(400 / 7)
    assert {k: entry[k] for k in ("turns", "agreeing", "disagreeing", "disagreeing_labelled",
                                  "disagreeing_unlabelled", "disagreeing_tied",
                                  "human_matches_judge", "human_matches_rule")} == {
        "turns": 7, "agreeing": 3, "disagreeing": 4, "disagreeing_labelled": 2,
        "disagreeing_unlabelled": 2, "disagreeing_tied": 1, "human_matches_judge": 1,
        "human_matches_rule": 1}
    assert "without human review" in entry["assumption"]
    low, high = entry["accuracy"]["ci"]
    assert low <= entry["accuracy"]["value"] <= high
    h = report["human"]
    assert (h["labels"], h["turns"], h["tied_turns"]) == (6, 3, 1)  # A2, B0, C1 resolved
    assert h["unknown"] == {"count": 1, "examples": [
        {"line": 6, "dialogue_id": "ZZZ9", "turn_index": 0, "annotator": "x"}]}
    # judge vs human: A2 (1 vs 1), B0 (0 vs 1); C1 has no judge verdict
    p = pair(report, "judge vs human")
    assert p["n"] == 2 and p["confusion"]["matrix"] == [[0, 1], [0, 1]]
    assert pair(report, "RULE-2.4 vs human")["n"] == 3
    assert [r.dialogue_id for r in human.unknown_turns(REEVAL_ROWS)] == ["ZZZ9"]
    assert_no_nan(report)


def test_labels_only_on_unknown_turns_give_empty_pairs():
    human = labels({"dialogue_id": "X", "turn_index": 0, "label": 1})
    report = agreement_report(HAND_ROWS, human, n_boot=20)
    p = pair(report, "judge vs human")
    assert p["n"] == 0 and p["confusion"]["matrix"] == [[0, 0], [0, 0]]
    assert all(p[s] == {"value": None, "ci": None} for s in ("accuracy", "kappa", "f1"))
    assert report["human"]["unknown"]["count"] == 1


def test_format_rows():
    report = agreement_report(REEVAL_ROWS, labels(*REEVAL_LABELS), n_boot=50)
    rows = format_agreement(report)
    assert len(rows) == len(report["pairs"]) == 3
    assert all(len(r) == len(AGREEMENT_HEADER) for r in rows)
    assert rows[0][:2] == ("judge vs RULE-2.4", "7")
    assert rows[0][2].startswith("42.9 [")  # agree on 3 of 7 turns
    (again,) = format_reevaluation(report)
    assert len(again) == len(REEVALUATION_HEADER)
    assert again[:5] == ("RULE-2.4", "7", "3", "4", "2") and again[5].startswith("57.1 [")
    empty = pair(agreement_report(HAND_ROWS, labels({"dialogue_id": "X", "turn_index": 0,
                                                      "label": 1}), n_boot=0), "judge vs human")
    assert format_agreement({"pairs": [empty]})[0][2:] == ("n/a", "n/a", "n/a")
    assert format_reevaluation(agreement_report(HAND_ROWS, n_boot=0)) == []


# --------------------------------------------------------------------------- loading errors


GOOD = {"dialogue_id": "D0", "turn_index": 0, "label": 1, "annotator": "x", "note": "ok"}


@pytest.mark.parametrize(("record", "field"), [
    ({**GOOD, "label": 2}, "label"),
    ({**GOOD, "label": True}, "label"),
    ({**GOOD, "label": "1"}, "label"),
    ({k: v for k, v in GOOD.items() if k != "turn_index"}, "turn_index"),
    ({k: v for k, v in GOOD.items() if k != "label"}, "label"),
    ({**GOOD, "turn_index": -1}, "turn_index"),
    ({**GOOD, "dialogue_id": ""}, "dialogue_id"),
    ({**GOOD, "annotater": "x"}, "annotater"),
])
def test_bad_label_named_by_file_line_field(tmp_path, record, field):
    path = write_jsonl(tmp_path / "labels.jsonl", [GOOD | {"turn_index": 5}, record])
    with pytest.raises(InputError) as info:
        load_labels(path)
    assert_located(info.value, path, 2, field)
    # the published JSON Schema rejects the same record
    assert list(jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).iter_errors(
        record))


def test_duplicate_annotator_on_a_turn(tmp_path):
    path = write_jsonl(tmp_path / "labels.jsonl", [
        GOOD, {**GOOD, "annotator": "y"}, {**GOOD, "dialogue_id": "d0.json", "label": 0}])
    with pytest.raises(InputError, match=r"annotator 'x' already labelled .*line 1") as info:
        load_labels(path)
    assert_located(info.value, path, 3, "annotator")
    unnamed = {"dialogue_id": "D0", "turn_index": 0, "label": 1}
    path = write_jsonl(tmp_path / "unnamed.jsonl", [unnamed, unnamed])
    with pytest.raises(InputError, match="without annotator") as info:
        load_labels(path)
    assert_located(info.value, path, 2, "annotator")


def test_malformed_json_and_empty_file(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n{\"dialogue_id\": \"D0\",\n", encoding="utf-8")
    with pytest.raises(InputError, match="invalid JSON") as info:
        load_labels(path)
    assert_located(info.value, path, 3, None)
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(InputError, match="no labels") as info:
        load_labels(path)
    assert_located(info.value, path, None, None)
    with pytest.raises(InputError, match="not found") as info:
        load_labels(tmp_path / "missing.jsonl")
    assert_located(info.value, tmp_path / "missing.jsonl", None, None)


def test_schema_is_valid_and_accepts_good_labels(tmp_path):
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = [GOOD, {"dialogue_id": "D0", "turn_index": 3, "label": 0},
            {"dialogue_id": "D0", "turn_index": 4, "label": 0, "annotator": None, "note": None}]
    for record in good:
        assert not list(validator.iter_errors(record))
    loaded = load_labels(write_jsonl(tmp_path / "labels.jsonl", good))
    assert [r.label for r in loaded.records] == [1, 0, 0] and loaded.lines == [1, 2, 3]


# --------------------------------------------------------------------------- coefficients


def test_every_pair_reports_ac1_alpha_pabak_with_intervals():
    from judge.analysis import gwet_ac1, krippendorff_alpha, pabak

    report = agreement_report(HAND_ROWS, n_boot=200, seed=1)
    p = pair(report, "judge vs RULE-2.4")
    judge = [j for _, _, j, _ in HAND]
    rule = [r for _, _, _, r in HAND]
    assert report["coefficients"] == ["kappa", "ac1", "alpha", "pabak"]
    # po = 0.7, π(incorrect) = (4 + 5) / 20 = 0.45: pe = 2·0.45·0.55 = 0.495,
    # AC1 = (0.7 - 0.495) / 0.505; PABAK = 2·0.7 - 1 = 0.4
    assert p["ac1"]["value"] == pytest.approx(0.205 / 0.505)
    assert p["ac1"]["value"] == pytest.approx(gwet_ac1(list(zip(judge, rule, strict=True))))
    assert p["pabak"]["value"] == pytest.approx(0.4) == pytest.approx(pabak(judge, rule))
    assert p["alpha"]["value"] == pytest.approx(
        krippendorff_alpha(list(zip(judge, rule, strict=True))))
    for name in ("ac1", "alpha", "pabak"):
        low, high = p[name]["ci"]
        assert low <= p[name]["value"] <= high
    assert agreement_report(HAND_ROWS, n_boot=200, seed=1) == report  # seeded
    assert_no_nan(report)


def test_reviewer_group_agreement_with_intervals():
    from judge.analysis import gwet_ac1, krippendorff_alpha

    records = [{"dialogue_id": f"D{d}", "turn_index": t, "label": v, "reviewer": name}
               for name, labels in (("x", [1, 1, 0, 0, 1, 1]), ("y", [1, 0, 0, 0, 1, 1]),
                                    ("z", [1, 1, 0, None, 1, 0]))
               for i, v in enumerate(labels) if v is not None
               for d, t in [(i // 2, i % 2)]]
    rows = [row(f"D{d}", t, True, v24=True) for d in range(3) for t in range(2)]
    block = agreement_report(rows, labels(*records), n_boot=300, seed=2)["human"][
        "inter_annotator"]
    group = block["group"]
    assert group["reviewers"] == ["x", "y", "z"] and group["turns"] == 6
    ratings = [[1, 1, 1], [1, 0, 1], [0, 0, 0], [0, 0, None], [1, 1, 1], [1, 1, 0]]
    assert group["ac1"]["value"] == pytest.approx(gwet_ac1(ratings))
    assert group["alpha"]["value"] == pytest.approx(krippendorff_alpha(ratings))
    for name in ("agreement", "ac1", "alpha", "pabak"):
        assert group[name]["ci"] is not None
    xy = block["pairs"][0]
    assert (xy["a"], xy["b"], xy["n"]) == ("x", "y", 6)
    assert xy["ac1"] is not None and xy["alpha"] is not None and xy["pabak"] is not None


def test_judge_against_per_slot_labels():
    rows = [dict(row("D0", 0, False, v24=False), incorrect=["hotel-area"], missed=[]),
            dict(row("D0", 1, True, v24=True), incorrect=[], missed=[])]
    human = labels(
        {"dialogue_id": "D0", "turn_index": 0, "label": 0,
         "slots": {"hotel-area": {"label": 0}, "hotel-stars": {"label": 1}}},
        {"dialogue_id": "D0", "turn_index": 1, "label": 1,
         "slots": {"hotel-name": {"label": 1}}})
    report = agreement_report(rows, human, n_boot=0)
    slots = pair(report, "judge vs human (slots)")
    assert slots["unit"] == "slot" and slots["n"] == 3
    assert slots["confusion"]["matrix"] == [[1, 0], [0, 2]]
    assert report["human"]["slot_labels"] == 3


def test_unsure_labels_stay_out_of_the_pairs():
    human = labels({"dialogue_id": "D0", "turn_index": 0, "label": 1, "unsure": True},
                   {"dialogue_id": "D0", "turn_index": 1, "label": 0})
    report = agreement_report(HAND_ROWS, human, n_boot=0)
    assert pair(report, "judge vs human")["n"] == 1
    assert report["human"]["unsure"] == 1


def test_printed_footnote_names_no_single_version(capsys):
    from rich.console import Console

    from judge.cli._report import print_agreement

    rows = [row("D0", 0, True, v21=False, vM24=True), row("D0", 1, False, v21=False, vM24=True)]
    for r in rows:  # a version named M24 next to 2.1
        r["rule"] = {"2.1": r["rule"].pop("2.1"), "M24": r["rule"].pop("M.24")}
    report = agreement_report(rows, labels({"dialogue_id": "D0", "turn_index": 0, "label": 1}),
                              n_boot=0)
    print_agreement(report, Console(width=200))
    out = capsys.readouterr().out
    assert "RULE-M24" in out and "RULE-2.1" in out
    footnote = out[out.index("Accuracy after human re-evaluation"):]
    footnote = footnote[footnote.index("Each row"):]
    assert "RULE-2.1" not in footnote and "RULE-M24" not in footnote
    assert "that row's RULE version" in footnote
