"""The analysis reports are what their TypedDicts say (``judge/analysis/reports.py``): every
key a producer writes is declared, every required key is there, and each value has the
declared type, checked recursively at run time. mypy cannot see this where a producer builds
its dict key by key (and casts it), so the real outputs are checked here, in every variant
(labels or not, a sample or not, enough reviewers or not, one run or a difference)."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints

import numpy as np
import pytest

from judge import load_run
from judge.analysis import (
    AgreementReport,
    AltTest,
    HumanLabel,
    HumanLabels,
    LabelledTsa,
    LabelPlan,
    LeaderboardJson,
    MethodTable,
    PpiMean,
    RunDifference,
    SampleEstimates,
    SystemTable,
    agreement_report,
    alt_test,
    draw_sample,
    labelled_tsa,
    method_table,
    plan_labels,
    ppi_mean,
    run_differences,
    sample_estimates,
    system_table,
    write_sample,
)
from judge.analysis._labels import row_key
from judge.cli import main
from judge.pipeline import Run

from ..conftest import EXAMPLES
from ..conftest import replayed_example_run as _run


def conforms(value: Any, tp: Any, where: str = "$") -> None:
    """Assert that ``value`` has type ``tp`` (TypedDicts with their exact key sets, unions,
    lists, dicts, scalars), naming the JSON path of the first mismatch."""
    if tp is Any:
        return
    if typing.is_typeddict(tp):
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not an object"
        keys = tp.__required_keys__ | tp.__optional_keys__
        assert set(value) <= keys, f"{where}: undeclared keys {set(value) - keys}"
        missing = tp.__required_keys__ - set(value)
        assert not missing, f"{where}: required keys missing {missing}"
        hints = get_type_hints(tp)
        for key, item in value.items():
            conforms(item, hints[key], f"{where}.{key}")
        return
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        failures = []
        for arm in get_args(tp):
            try:
                conforms(value, arm, where)
                return
            except AssertionError as error:
                failures.append(str(error))
        raise AssertionError(f"{where}: {value!r:.80} is none of {tp}: {failures}")
    if origin is list:
        assert isinstance(value, list), f"{where}: {type(value).__name__}, not a list"
        for i, item in enumerate(value):
            conforms(item, get_args(tp)[0], f"{where}[{i}]")
        return
    if origin is dict:
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not a dict"
        key_type, item_type = get_args(tp)
        for key, item in value.items():
            conforms(key, key_type, f"{where} key")
            conforms(item, item_type, f"{where}.{key}")
        return
    if tp is type(None):
        assert value is None, f"{where}: {value!r:.80}, not None"
    elif tp is float:
        assert isinstance(value, int | float) and not isinstance(value, bool), \
            f"{where}: {value!r:.80}, not a number"
    elif tp is int:
        assert isinstance(value, int) and not isinstance(value, bool), \
            f"{where}: {value!r:.80}, not an int"
    else:
        assert isinstance(value, tp), f"{where}: {value!r:.80}, not {tp}"


def test_the_checker_catches_an_undeclared_a_missing_and_a_mistyped_key():
    good = {"value": 1.0, "ci": None}
    from judge.analysis import LabelsTie
    from judge.analysis.reports import Figure

    conforms(good, Figure)
    with pytest.raises(AssertionError, match=r"\$: undeclared keys \{'low'\}"):
        conforms({**good, "low": 0.0}, Figure)
    with pytest.raises(AssertionError, match="required keys missing"):
        conforms({"value": 1.0}, Figure)
    with pytest.raises(AssertionError, match=r"\$\.ci"):
        conforms({"value": 1.0, "ci": "wide"}, Figure)
    # NotRequired is seen at run time (no postponed annotations in judge.analysis.reports)
    assert "note" in LabelPlan.__optional_keys__ and not LabelsTie.__optional_keys__
    assert get_origin(get_type_hints(LabelPlan, include_extras=True)["note"]) is NotRequired


def make_rows(dialogues: int = 60, seed: int = 0) -> tuple[list[dict[str, Any]], dict]:
    """A run whose judge agrees with the (hidden) human label on about 90 % of turns."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for d in range(dialogues):
        for turn in range(int(rng.integers(2, 6))):
            label = int(rng.random() < 0.7)
            verdict = label if rng.random() < 0.9 else 1 - label
            row = {"dialogue_id": f"D{d:03d}", "turn_index": turn, "verdict": bool(verdict),
                   "rule": {"2.1": bool(verdict) if turn % 4 else not verdict, "2.4": None},
                   "pred_turn_state": {"hotel-area": "x"}, "gold_turn_state": {"2.1": {}}}
            rows.append(row)
            truth[row_key(row)] = label
    return rows, truth


ROWS, TRUTH = make_rows()


def reviewers(sample, names=("ann", "bob", "cy"), flip_every=7) -> HumanLabels:
    """Each reviewer labels every sampled turn, each wrong on a different few."""
    records = []
    for r, name in enumerate(names):
        for i, turn in enumerate(sample.turns):
            label = TRUTH[turn.key]
            if (i + r) % flip_every == 0:
                label = 1 - label
            records.append(HumanLabel(dialogue_id=turn.dialogue_id,
                                      turn_index=turn.turn_index, label=label,
                                      annotator=name))
    return HumanLabels(records)


def test_agreement_report_in_each_variant():
    sample = draw_sample(ROWS, n=60, design="random", seed=2)
    three = reviewers(sample)
    full = agreement_report(ROWS, three, sample=sample, n_boot=50)
    conforms(full, AgreementReport)
    assert full["alt_test"] is not None and full["population"] is not None
    assert full["human"] is not None and full["human"]["inter_annotator"] is not None
    assert "undecided" in full["human"] and "labels_tied" in full["population"]
    plain = agreement_report(ROWS, n_boot=0)
    conforms(plain, AgreementReport)
    assert plain["human"] is None and plain["alt_test"] is None
    one = reviewers(sample, names=("ann",))
    conforms(agreement_report(ROWS, one, n_boot=10), AgreementReport)
    two = agreement_report(ROWS, reviewers(sample, names=("ann", "bob")), n_boot=0)
    conforms(two, AgreementReport)
    assert two["alt_test"] is not None and two["alt_test"]["passes"] is None


def test_alternative_annotator_test_in_each_outcome():
    judge = {k: v for k, v in TRUTH.items()}
    labels = {name: dict(list(TRUTH.items())[i::1]) for i, name in enumerate("abc")}
    passing = alt_test(judge, labels, n_boot=20)
    conforms(passing, AltTest)
    assert passing is not None and "tested_reviewers" in passing
    sparse = alt_test(judge, {"a": dict(list(TRUTH.items())[:3]),
                              "b": dict(list(TRUTH.items())[3:6])}, n_boot=0)
    conforms(sparse, AltTest)
    assert sparse is not None and sparse["enough_overlap"] is False
    assert "note" in sparse["reviewers"][0]
    constant = {k: 1 for k in TRUTH}
    unbalanced = alt_test(constant, {n: dict.fromkeys(TRUTH, 1) for n in "abc"}, n_boot=0)
    conforms(unbalanced, AltTest)


def test_sample_estimates_plans_and_ppi_in_each_variant():
    sample = draw_sample(ROWS, n=60, design="random", seed=2)
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    one = sample_estimates(sample, [ROWS], [labels])
    conforms(one, SampleEstimates)
    assert {"se", "lambda", "tuning"} <= set(one["estimates"]["tsa"]["ppi"])
    other = [dict(r, verdict=not r["verdict"] if i % 7 == 0 else r["verdict"])
             for i, r in enumerate(ROWS)]
    two = sample_estimates(sample, [ROWS, other], [labels, labels], names=["A", "B"],
                           resolutions=[reviewers(sample).resolve()] * 2)
    conforms(two, SampleEstimates)
    dialogues = draw_sample(ROWS, n=25, design="domain", unit="dialogue", seed=4)
    conforms(sample_estimates(dialogues, [ROWS], [{t.key: TRUTH[t.key]
                                                   for t in dialogues.turns}]),
             SampleEstimates)
    few = draw_sample(ROWS, n=4, design="random", seed=1)
    small = sample_estimates(few, [ROWS], [{t.key: TRUTH[t.key] for t in few.turns[:1]}])
    conforms(small, SampleEstimates)
    conforms(plan_labels(ROWS, width=20.0, disagreement=0.1), LabelPlan)
    conforms(plan_labels(ROWS, width=20.0, sample=sample, human=labels), LabelPlan)
    tiny = plan_labels(ROWS[:20], width=20.0, disagreement=0.1)
    conforms(tiny, LabelPlan)
    assert "note" in tiny
    conforms(ppi_mean([1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 1, 0]), PpiMean)


def test_differences_and_labelled_tsa_of_runs_in_memory():
    sample = draw_sample(ROWS, n=60, design="random", seed=2)
    other = [dict(r, verdict=not r["verdict"] if i % 7 == 0 else r["verdict"])
             for i, r in enumerate(ROWS)]
    runs = [Run(Path("a"), {}, ROWS), Run(Path("b"), {}, other)]
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    for difference in run_differences(runs, [labels, labels], sample):
        conforms(difference, RunDifference)
    found = labelled_tsa(runs, ["A", "B"], [reviewers(sample)], sample, sample_path="s.jsonl")
    conforms(found, LabelledTsa)
    assert found["pairs"] and found["systems"]


def test_tables_of_real_runs_and_the_cli_json(tmp_path):
    """The method and system tables of runs ``evaluate`` wrote, direct and as ``compare
    --json`` writes them (with the keys the command adds), and a leaderboard's JSON."""
    from judge import (
        Layout,
        MetricOptions,
        build_leaderboard,
        load_dialogues,
        load_predictions,
        load_schema,
        score_predictions,
    )

    strong = _run(tmp_path, "strong", "example-two-dim.json")
    weak = _run(tmp_path, "weak", "example-weak-two-dim.json",
                predictions="predictions-weak.jsonl")
    runs = [load_run(strong), load_run(weak)]
    human = {row_key(r): 1 for r in runs[0].rows[:4]}
    conforms(method_table(runs, human), MethodTable)
    conforms(system_table(runs, load_schema(EXAMPLES / "schema.json")), SystemTable)
    sample = draw_sample(runs[0].rows, n=8, design="random", seed=1)
    write_sample(sample, tmp_path / "sample.jsonl")
    files = []
    for name, flip in (("a", 3), ("b", 2)):
        labels = tmp_path / f"human-{name}.jsonl"
        labels.write_text("".join(json.dumps({"dialogue_id": t.dialogue_id,
                                              "turn_index": t.turn_index,
                                              "label": int(i % flip != 0)}) + "\n"
                                  for i, t in enumerate(sample.turns)), encoding="utf-8")
        files.append(str(labels))
    out = tmp_path / "compare.json"
    assert main(["compare", str(strong), str(weak), "--human", *files, "--sample",
                 str(tmp_path / "sample.jsonl"), "--json", str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    conforms(written, MethodTable)
    assert {"labels_tie", "labels_tied", "sample_check", "differences"} <= set(written)
    assert "labels_tied" in written["differences"][0]

    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl", schema=schema)
    options = MetricOptions()
    systems = [score_predictions(dialogues, load_predictions(EXAMPLES / p, dialogues, schema),
                                 schema, versions=["2.1", "2.4"], options=options, name=p)
               for p in ("predictions.jsonl", "predictions-weak.jsonl")]
    board = build_leaderboard(Layout.of(dialogues, schema, ["2.1", "2.4"]), systems,
                              options=options)
    conforms(board.to_json(), LeaderboardJson)
