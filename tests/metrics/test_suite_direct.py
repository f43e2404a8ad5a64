"""The suite, its tables, the per-turn columns and the profiles' value forms on one small
two-version data set whose every figure is worked out by hand below. Written where mutation
testing found changed lines that no test noticed (bench/mutation.py metrics)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from judge import load_dialogues, load_predictions
from judge.metrics import (
    MetricOptions,
    TurnScorer,
    compute_metrics,
    gca_from_counts,
    paper_tables,
    score_profile,
    stream_metrics,
    stream_paper_tables,
    to_csv,
    to_latex,
    turn_verdicts,
)
from judge.metrics._profiles import (
    _convlab_prepare,
    _mwz_prepare,
    _mwz_time,
    _sgd_prepare,
    _tail,
)
from judge.metrics._tables import CHANGE_COLUMNS, paired_change

from ..conftest import write_jsonl

AREA, STARS, DAY, FOOD = "hotel-area", "hotel-stars", "train-day", "restaurant-food"

# Two dialogues, gold 2.1 and 2.4 (they differ only at D1 t1), one system:
#   D1 t0 gold {area}              pred {area, foo-bar}     foo-bar: outside the schema
#   D1 t1 gold {area, stars 4|5}   pred {area, stars 4}     right under 2.1 only
#   Dé t0 gold {day, food}         pred {day: other}        day wrong, food missed
DIALOGUES = [
    {"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "user": "", "system": "",
         "gold_state_21": {AREA: "north"}, "gold_state_24": {AREA: "north"}},
        {"turn_index": 1, "user": "", "system": "",
         "gold_state_21": {AREA: "north", STARS: "4"},
         "gold_state_24": {AREA: "north", STARS: "5"}}]},
    {"dialogue_id": "Dé", "turns": [
        {"turn_index": 0, "user": "", "system": "",
         "gold_state_21": {DAY: "monday", FOOD: "thai"},
         "gold_state_24": {DAY: "monday", FOOD: "thai"}}]},
]
PREDICTIONS = [
    {"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "pred_state": {AREA: "north", "foo-bar": "x"}},
        {"turn_index": 1, "pred_state": {AREA: "north", STARS: "4"}}]},
    {"dialogue_id": "Dé", "turns": [{"turn_index": 0, "pred_state": {DAY: "tuesday"}}]},
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return (write_jsonl(tmp_path / "dialogues.jsonl", DIALOGUES),
            write_jsonl(tmp_path / "predictions.jsonl", PREDICTIONS))


@pytest.fixture
def loaded(files, mini_schema):
    dialogues = load_dialogues(files[0])
    return dialogues, load_predictions(files[1], dialogues, mini_schema, name="sys")


# --- the suite (_suite) ----------------------------------------------------------------------

def test_per_slot_counts_in_and_out_of_the_schema(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    system = compute_metrics(dialogues, predictions, mini_schema).systems[0]
    slots = system.per_slot
    assert slots is not None
    # three turns; a slot's accuracy counts the turns where gold and prediction agree
    assert slots[AREA] == {"in_schema": True, "gold_turns": 2, "pred_turns": 2,
                           "accuracy": 100.0, "precision": 100.0, "recall": 100.0,
                           "f1": 100.0}
    assert slots[STARS]["gold_turns"] == 1 and slots[STARS]["f1"] == 100.0
    assert slots[DAY] == {"in_schema": True, "gold_turns": 1, "pred_turns": 1,
                          "accuracy": pytest.approx(200 / 3), "precision": 0.0,
                          "recall": 0.0, "f1": 0.0}
    assert slots[FOOD] == {"in_schema": True, "gold_turns": 1, "pred_turns": 0,
                           "accuracy": pytest.approx(200 / 3), "precision": None,
                           "recall": 0.0, "f1": None}
    assert slots["foo-bar"] == {"in_schema": False, "gold_turns": 0, "pred_turns": 1,
                                "accuracy": pytest.approx(200 / 3), "precision": 0.0,
                                "recall": None, "f1": None}
    assert slots["taxi-departure"] == {"in_schema": True, "gold_turns": 0, "pred_turns": 0,
                                       "accuracy": 100.0, "precision": None, "recall": None,
                                       "f1": None}


def test_headline_breakdowns_and_inputs(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    report = compute_metrics(dialogues, predictions, mini_schema,
                             MetricOptions(per_dialogue=True))
    system = report.systems[0]
    m = system.metrics
    assert m["jga"] == pytest.approx(100 / 3)  # D1 t1 only
    # mismatches 1 (foo-bar), 0, 2 (day, food) of K = 30
    assert m["sa"] == pytest.approx(100 * 87 / 90)
    # RULE: D1 t0's turn state carries foo-bar; D1 t1 adds stars 4 (right under 2.1 only)
    assert m["rule_tsa"] == {"2.1": pytest.approx(100 / 3), "2.4": 0.0}
    assert "dstc" in m and m["dstc"] is None  # no hypothesis lists
    assert system.path == str(predictions.path) and system.name == "sys"
    domains = system.per_domain
    assert domains is not None
    assert (domains["hotel"]["dialogues"], domains["hotel"]["turns"],
            domains["hotel"]["jga"]) == (1, 2, 100.0)
    assert (domains["train"]["dialogues"], domains["train"]["turns"]) == (1, 1)
    # the prediction never names a restaurant slot: the dialogue still counts there
    assert (domains["restaurant"]["dialogues"], domains["restaurant"]["turns"],
            domains["restaurant"]["jga"]) == (1, 1, 0.0)
    assert (domains["taxi"]["dialogues"], domains["taxi"]["jga"]) == (0, None)
    per = system.per_dialogue
    assert per is not None and list(per) == ["D1", "Dé"]
    assert per["D1"]["turns"] == 2 and per["D1"]["jga"] == 50.0
    assert per["D1"]["rule_tsa"] == {"2.1": 50.0, "2.4": 0.0}
    assert per["Dé"]["turns"] == 1 and per["Dé"]["rule_tsa"] == {"2.1": 0.0, "2.4": 0.0}
    inputs = system.inputs
    assert inputs["dialogues"] == 2 and inputs["turns"] == 3
    assert inputs["out_of_schema_slots"] == {"foo-bar": 1}
    assert set(inputs["out_of_schema_suggestions"]) == {"foo-bar"}
    assert inputs["renamed_slots"] == {}
    assert inputs["turns_with_out_of_schema_slots"] == 1
    assert inputs["integration_mismatches"] == 0 and inputs["integration_examples"] == []


def test_recorded_options_and_the_report_as_json(loaded, mini_schema, tmp_path) -> None:
    dialogues, predictions = loaded
    report = compute_metrics(dialogues, predictions, mini_schema,
                             MetricOptions(breakdowns=False), gold="2.4")
    recorded = report.options
    assert recorded["match"] == "exact" and recorded["num_slots"] == 30
    assert recorded["rule_match"] == "exact+alternatives" and recorded["gold"] == "2.4"
    assert recorded["none_values"] == ["none"]  # JSON form: a list, not a tuple
    assert report.data["versions"] == ["2.1", "2.4"] and report.data["num_turns"] == 3
    as_dict = report.to_dict()
    assert list(as_dict) == ["options", "data", "systems"]
    assert list(as_dict["systems"][0]) == ["name", "path", "metrics", "inputs"]
    with_parts = compute_metrics(dialogues, predictions, mini_schema,
                                 MetricOptions(per_dialogue=True)).systems[0].to_dict()
    assert list(with_parts) == ["name", "path", "metrics", "inputs", "per_domain",
                                "per_slot", "per_dialogue"]
    out = tmp_path / "report.json"
    report.write_json(out)
    text = out.read_text(encoding="utf-8")
    assert text.startswith('{\n  "options": {\n    "match": "exact"')
    assert '"Dé"' not in text  # no per-dialogue part here; the name below is kept as is
    with_parts_path = tmp_path / "parts.json"
    compute_metrics(dialogues, predictions, mini_schema,
                    MetricOptions(per_dialogue=True)).write_json(with_parts_path)
    assert '"Dé": {' in with_parts_path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and json.loads(text) == json.loads(json.dumps(as_dict))


def test_input_tally_counts_every_integration_issue_and_shows_five(tmp_path, mini_schema):
    """Seven turns whose own turn state disagrees with the cumulative state: seven issues
    counted, five shown."""
    turns = [{"turn_index": t, "pred_state": {AREA: "north"},
              "pred_turn_state": {AREA: "south"}} for t in range(7)]
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": t, "gold_state": {AREA: "north"}} for t in range(7)]}]))
    predictions = load_predictions(write_jsonl(tmp_path / "p.jsonl", [
        {"dialogue_id": "D", "turns": turns}]), dialogues, mini_schema)
    inputs = compute_metrics(dialogues, predictions, mini_schema).systems[0].inputs
    assert inputs["integration_mismatches"] == 7
    assert len(inputs["integration_examples"]) == 5
    assert inputs["turns_with_out_of_schema_slots"] == 0


def test_streamed_equals_whole(files, loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    options = MetricOptions(match="nospace", per_dialogue=True, keep_explicit_none=True)
    whole = compute_metrics(dialogues, predictions, mini_schema, options, gold="2.4")
    streamed, _ = stream_metrics(files[0], [files[1]], mini_schema, options, gold="2.4")
    assert streamed.options == whole.options
    assert streamed.systems[0].metrics == whole.systems[0].metrics
    assert streamed.systems[0].per_dialogue == whole.systems[0].per_dialogue
    assert streamed.data["num_dialogues"] == 2 and streamed.data["versions"] == ["2.1", "2.4"]


# --- paper tables (_tables) ------------------------------------------------------------------

def test_paired_change_by_hand() -> None:
    # weights 2, 1; diffs 2·(0-50), 0 → change -100/3; residuals ∓100/3; se = √(2·2·(100/3)²)/3
    change, low, high = paired_change([50.0, 0.0], [0.0, 0.0], [2, 1])
    assert change == pytest.approx(-100 / 3)
    half = 12.7062 * math.sqrt(2 * 2 * (100 / 3) ** 2) / 3  # t(0.975, 1 d.f.) = 12.7062
    assert (low, high) == (pytest.approx(change - half, rel=1e-4),
                           pytest.approx(change + half, rel=1e-4))
    alone = paired_change([10.0], [40.0], [3])
    assert alone[0] == 30.0 and math.isnan(alone[1]) and math.isnan(alone[2])


def test_change_table_of_a_corrected_version(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    tables = paper_tables(dialogues, [predictions], mini_schema, versions=["2.1"],
                          corrected=[("2.1", "2.4")])
    assert tables.change_columns == CHANGE_COLUMNS
    (row,) = tables.change_rows
    assert row[:3] == ["sys", "2.1", "2.4"]
    # JGA 1/3 → 0; per dialogue D1 50 → 0 over 2 turns, Dé 0 → 0: the paired change above
    assert row[3] == pytest.approx(100 / 3) and row[4] == 0.0
    change, low, high = paired_change([50.0, 0.0], [0.0, 0.0], [2, 1])
    assert row[5:8] == [pytest.approx(change), pytest.approx(low), pytest.approx(high)]
    # slot accuracy 87/90 → 86/90 (stars wrong under 2.4); one turn's gold differs
    assert row[8:11] == [pytest.approx(100 * 87 / 90), pytest.approx(100 * 86 / 90),
                         pytest.approx(-100 / 90)]
    assert row[11] == 1
    assert tables.notes[-1] == ("Δ: corrected minus original, with a 95 % interval "
                                "clustered by dialogue")


def test_main_and_slot_tables(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    tables = paper_tables(dialogues, [predictions], mini_schema, profiles=["trade"])
    assert tables.columns == ["system", "gold", "JGA", "final JGA", "slot acc.", "slot F1",
                              "JGA hotel", "JGA train", "JGA restaurant", "JGA attraction",
                              "JGA taxi", "trade JGA", "trade final JGA", "trade slot acc.",
                              "trade turn F1"]
    assert tables.slot_columns == ["system", "gold", "slot", "accuracy", "precision",
                                   "recall", "F1", "gold turns", "pred turns"]
    assert [row[:2] for row in tables.rows] == [["sys", "2.1"], ["sys", "2.4"]]
    assert tables.rows[0][6:11] == [100.0, 0.0, 0.0, None, None]
    # TRADE on 2.1: the same exact JGA; joint F1 per turn 2/3, 1, 0 → 5/9
    assert tables.rows[0][11] == pytest.approx(100 / 3)
    assert tables.rows[0][14] == pytest.approx(100 * 5 / 9)
    assert tables.notes[0] == "exact-match columns: match=exact"
    assert tables.notes[1].startswith("trade: TRADE-style exact match (")
    assert tables.change_columns == [] and tables.change_rows == []
    plain = paper_tables(dialogues, [predictions], mini_schema, versions=["2.4"],
                         options=MetricOptions(breakdowns=False, match="nospace"))
    assert plain.rows[0][6:] == [None] * 5 and plain.slot_rows == []
    assert plain.notes == ["exact-match columns: match=nospace"]


def test_streamed_tables_name_systems_of_one_name_by_path(files, mini_schema) -> None:
    dialogues, predictions = files
    tables, _ = stream_paper_tables(dialogues, [predictions, predictions], mini_schema,
                                    versions=["2.4"], options=MetricOptions(match="nospace"))
    assert [row[:2] for row in tables.rows] == [[str(predictions), "2.4"]] * 2
    assert tables.notes == ["exact-match columns: match=nospace"]
    single, _ = stream_paper_tables(dialogues, [predictions], mini_schema)
    assert [row[:2] for row in single.rows] == [["predictions", "2.1"],
                                                ["predictions", "2.4"]]


def test_csv_and_latex_by_hand() -> None:
    rows = [["a_b", 12.345, 3], ["c&d", None, 4]]
    assert to_csv(["system", "JGA", "n"], rows) == "system,JGA,n\na_b,12.35,3\nc&d,,4\n"
    assert to_latex(["system", "JGA", "n"], rows, caption="Cap") == (
        "% Cap\n"
        "\\begin{tabular}{lrr}\n\\toprule\n"
        "system & JGA & n \\\\\n\\midrule\n"
        "a\\_b & 12.3 & 3 \\\\\n"
        "c\\&d & – & 4 \\\\\n"
        "\\bottomrule\n\\end{tabular}\n")
    assert to_latex(["x"], []) == ("\\begin{tabular}{l}\n\\toprule\nx \\\\\n\\midrule\n"
                                   "\\bottomrule\n\\end{tabular}\n")


# --- per-turn columns (_turns) ---------------------------------------------------------------

def test_turn_scorer_columns_by_hand(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    for expected in (0, 2):  # one chunk, and chunks of two turns
        scorer = TurnScorer(mini_schema, MetricOptions(), fga_lambda=0.5,
                            expected_turns=expected)
        for dialogue in dialogues.dialogues:
            pred = predictions.for_dialogue(dialogue)
            scorer.add([t.gold_states["2.1"] for t in dialogue.turns],
                       [t.pred_state or {} for t in pred.turns])
        # a carried error: right, wrong (the turn's own), still wrong (carried one turn)
        scorer.add([{AREA: "n"}, {AREA: "n", STARS: "4"}, {AREA: "n", STARS: "4"}],
                   [{AREA: "n"}, {AREA: "n", STARS: "9"}, {AREA: "n", STARS: "9"}])
        assert scorer.rows == 6
        columns = scorer.finish()
        assert columns.jga.tolist() == [False, True, False, True, False, False]
        assert columns.wrong.tolist() == [1, 0, 2, 0, 1, 1]
        assert columns.fga_mark.tolist() == [0, -1, 0, -1, 0, 1]
        # GCA per turn: area C, foo-bar O; stars C, foo-bar's deletion C (gold never had it);
        # day W, food M; area C; stars W; nothing new
        assert columns.changes.tolist() == [[1, 0, 1, 0], [2, 0, 0, 0], [0, 1, 0, 1],
                                            [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]
        # domain bits in the schema's order: hotel 1, train 2, restaurant 4 (foo: none)
        assert columns.domain_errors.tolist() == [0, 0, 6, 0, 1, 1]
        assert columns.domain_errors.dtype == np.uint8
        assert columns.sa.tolist() == pytest.approx([29 / 30, 1.0, 28 / 30, 1.0, 29 / 30,
                                                     29 / 30])
        assert columns.fga.tolist() == pytest.approx([0.0, 1.0, 0.0, 1.0, 0.0,
                                                      1 - math.exp(-0.5)])
        assert (columns.num_slots, columns.fga_lambda) == (30, 0.5)
        assert columns.nbytes == 6 * (1 + 2 + 2 + 8 + 1)
    whole = turn_verdicts(dialogues, predictions, mini_schema, version="2.4",
                          options=MetricOptions(num_slots=10), fga_lambda=1.0)
    assert whole.jga.tolist() == [False, False, False] and whole.num_slots == 10
    assert whole.fga_lambda == 1.0
    assert whole.wrong.tolist() == [1, 1, 2]


def test_gca_from_counts_matches_the_formula() -> None:
    counts = np.array([[6, 6, 7, 4], [0, 3, 0, 0], [0, 0, 0, 2], [2, 0, 0, 0]])
    got = gca_from_counts(counts)
    assert got[0] == pytest.approx(35 / (617 / 12 * 21 / 11))
    assert got[1:].tolist() == [0.0, 0.0, 1.0]  # none right; nothing predicted; all right
    null = gca_from_counts(counts, undefined="null")
    assert math.isnan(null[2]) and null[3] == 1.0
    # alpha weighs value accuracy against label accuracy: 1 → value accuracy alone
    assert gca_from_counts(np.array([[1, 1, 0, 0]]), alpha=1.0)[0] == pytest.approx(0.5)
    assert gca_from_counts(np.array([[1, 1, 0, 0]]), alpha=0.0)[0] == pytest.approx(1.0)


# --- scoring profiles (_profiles) ------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    ("by 7pm", "19:00"), ("BY 7PM", "19:00"), ("after 17:15", "17:15"), ("afer 9:30", "09:30"),
    ("7am", "07:00"), ("12am", "00:00"), ("12pm", "12:00"), ("7:30 pm", "19:30"),
    ("1715", "17:15"), ("7", "07:00"), ("17", "17:00"), ("123", "123"), ("12345", "12345"),
    ("9 : 30", "09:30"), ("10:30.", "10:30"), ("5:30?", "05:30"), ("noon", "noon"),
])
def test_mwzeval_time_forms(value: str, expected: str) -> None:
    assert _mwz_time(value) == expected


def test_mwzeval_value_forms(mini_schema) -> None:
    def prepare(slot: str, value: str, side: str = "pred") -> list[str] | None:
        return _mwz_prepare(slot, value, side, mini_schema)  # type: ignore[arg-type]

    assert prepare("restaurant-name", "Pizza & Co") == ["pizza and co"]
    assert prepare("taxi-destination", "b&b") == ["b and b"]
    assert prepare("train-departure", "king 's") == ["king's"]
    assert prepare("hotel-type", "guest house") == ["guesthouse"]
    assert prepare("restaurant-book time", "7pm") == ["19:00"]
    assert prepare("bus-leaveat", "7pm") == ["19:00"]  # by the slot's name, not the schema
    assert prepare("bus-arriveby", "1715") == ["17:15"]
    assert prepare("bus-time", "by 9") == ["09:00"]
    assert prepare("hotel-parking", "free") == ["yes"]
    assert prepare("hotel-internet", "free") == ["yes"]
    assert prepare("hotel-parking", "no") == ["no"]
    assert prepare("hotel-stars", "free") == ["free"]
    assert prepare("hotel-area", "north|centre") == ["north"]
    assert prepare("hotel-area", "  ") is None
    assert prepare("hotel-area", "Not Mentioned") is None
    assert prepare("hotel-area", "dontcare", "gold") is None
    assert prepare("hotel-area", "dontcare") == ["dontcare"]


def test_slot_tails() -> None:
    assert _tail("restaurant-book time") == "time"
    assert _tail("hotel-book day") == "day"
    assert _tail("train-arrive by") == "arriveby"
    assert _tail("plain") == "plain"


def test_score_profile_result(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    result = score_profile(dialogues, predictions, mini_schema, "trade", gold="2.4")
    assert (result["profile"], result["gold"]) == ("trade", "2.4")
    assert result["headline"] == ["jga", "final_turn_jga", "slot_accuracy", "turn_f1"]
    assert result["rules"][0].startswith("a state is the set")
    assert result["reference"].startswith("TRADE (Wu et al., 2019)")
    # per domain, the states restricted to it: hotel t0 right, t1 wrong (stars 5 ≠ 4);
    # train and restaurant wrong; foo (the prediction's slot) right at t1 only
    assert result["per_domain_jga"] == {"hotel": 50.0, "train": 0.0, "restaurant": 0.0}
    assert result["figures"]["turns"] == 3 and result["figures"]["jga"] == 0.0


# --- options that travel to every family -----------------------------------------------------

def _scored(gold: list[dict], pred: list[dict], schema, **options) -> list[list[int]]:
    scorer = TurnScorer(schema, MetricOptions(**options), fga_lambda=0.5)
    scorer.add(gold, pred)
    assert scorer.rows == len(gold)
    return scorer.finish().changes.tolist()


def test_turn_scorer_passes_the_gca_options_on(mini_schema) -> None:
    # an explicit deletion in gold, of a slot never set: counted only when kept (C)
    assert _scored([{}, {AREA: "none"}], [{}, {}], mini_schema,
                   keep_explicit_none=True) == [[0, 0, 0, 0], [1, 0, 0, 0]]
    assert _scored([{}, {AREA: "none"}], [{}, {}], mini_schema) == [[0, 0, 0, 0],
                                                                    [0, 0, 0, 0]]
    # the first none value is GCA's deletion marker
    assert _scored([{}, {AREA: "-"}], [{}, {}], mini_schema, keep_explicit_none=True,
                   none_values=("-",)) == [[0, 0, 0, 0], [1, 0, 0, 0]]
    # both loops count a matched deletion unless deduplicated
    gold, pred = [{AREA: "1"}, {AREA: "none"}], [{AREA: "1"}, {}]
    assert _scored(gold, pred, mini_schema, keep_explicit_none=True) == [
        [1, 0, 0, 0], [1, 0, 0, 1]]
    assert _scored(gold, pred, mini_schema, keep_explicit_none=True, gca_dedupe=True) == [
        [1, 0, 0, 0], [1, 0, 0, 0]]


def test_turn_scorer_matches_with_the_schemas_time_slots_and_none_values(mini_schema) -> None:
    scorer = TurnScorer(mini_schema, MetricOptions(match="normalized+alternatives",
                                                   none_values=("none", "?")),
                        fga_lambda=0.5)
    scorer.add([{"train-leaveat": "7pm|8pm", AREA: "?"}], [{"train-leaveat": "20:00"}])
    assert scorer.finish().jga.tolist() == [True]


def test_gca_from_counts_edges() -> None:
    # one change, found: n_gold = 1 is not empty
    assert gca_from_counts(np.array([[1, 0, 0, 0]])).tolist() == [1.0]
    # no change right: 0 even when value accuracy has no weight
    assert gca_from_counts(np.array([[0, 3, 0, 0]]), alpha=0.0).tolist() == [0.0]


def test_none_values_reach_the_suite_rule_and_integration_check(tmp_path, mini_schema) -> None:
    """A second none value drops gold pairs, is no RULE pair and deletes in a turn state."""
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": 0, "gold_state": {AREA: "north", STARS: "?"}},
                  {"turn_index": 1, "gold_state": {}}]}]))
    predictions = load_predictions(write_jsonl(tmp_path / "p.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": 0, "pred_state": {AREA: "north"}},
                  {"turn_index": 1, "pred_state": {}, "pred_turn_state": {AREA: "?"}}]}]),
        dialogues, mini_schema)
    options = MetricOptions(none_values=("none", "?"))
    system = compute_metrics(dialogues, predictions, mini_schema, options).systems[0]
    assert system.metrics["jga"] == 100.0
    # RULE: t0's gold turn state is area alone (stars "?" is no pair): right; t1's turn
    # state {area: "?"} is a pair RULE compares (only nospace drops none pairs): wrong
    assert system.metrics["rule_tsa"] == {"gold": 50.0}
    # the turn state deletes area, which integrates into t1's empty state
    assert system.inputs["integration_mismatches"] == 0
    plain = compute_metrics(dialogues, predictions, mini_schema).systems[0]
    assert plain.metrics["jga"] == 50.0 and plain.metrics["rule_tsa"] == {"gold": 0.0}
    assert plain.inputs["integration_mismatches"] == 1


def test_gca_marker_and_kept_nones_reach_the_suite(tmp_path, mini_schema) -> None:
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": 0, "gold_state": {}},
                  {"turn_index": 1, "gold_state": {AREA: "-"}}]}]))
    predictions = load_predictions(write_jsonl(tmp_path / "p.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": 0, "pred_state": {}}, {"turn_index": 1, "pred_state": {}}]}]),
        dialogues, mini_schema)
    options = MetricOptions(none_values=("-",), keep_explicit_none=True, per_dialogue=True)
    system = compute_metrics(dialogues, predictions, mini_schema, options).systems[0]
    # the kept deletion of a slot the prediction never had is a correct change
    assert system.metrics["gca"]["counts"] == {"C": 1, "W": 0, "O": 0, "M": 0}
    assert system.per_dialogue["D"]["gca"]["counts"] == {"C": 1, "W": 0, "O": 0, "M": 0}
    assert system.per_domain["hotel"]["gca"]["counts"] == {"C": 1, "W": 0, "O": 0, "M": 0}


def test_issues_are_counted_over_dialogues_and_shown_up_to_five(tmp_path, mini_schema):
    wrong = {"pred_state": {AREA: "north"}, "pred_turn_state": {AREA: "south"}}
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [
        {"dialogue_id": name, "turns": [{"turn_index": t, "gold_state": {}}
                                        for t in range(turns)]}
        for name, turns in (("A", 6), ("B", 2))]))
    predictions = load_predictions(write_jsonl(tmp_path / "p.jsonl", [
        {"dialogue_id": name, "turns": [{"turn_index": t, **wrong} for t in range(turns)]}
        for name, turns in (("A", 6), ("B", 2))]), dialogues, mini_schema)
    inputs = compute_metrics(dialogues, predictions, mini_schema).systems[0].inputs
    assert inputs["integration_mismatches"] == 8
    assert len(inputs["integration_examples"]) == 5


def test_streamed_rule_ignores_none_pairs_under_nospace(tmp_path, mini_schema) -> None:
    d = write_jsonl(tmp_path / "d.jsonl", [{"dialogue_id": "D", "turns": [
        {"turn_index": 0, "gold_state": {AREA: "north"}}]}])
    p = write_jsonl(tmp_path / "p.jsonl", [{"dialogue_id": "D", "turns": [
        {"turn_index": 0, "pred_state": {AREA: "north"},
         "pred_turn_state": {AREA: "north", STARS: "none"}}]}])
    streamed, _ = stream_metrics(d, [p], mini_schema, MetricOptions(match="nospace"))
    assert streamed.systems[0].metrics["rule_tsa"] == {"gold": 100.0}
    exact, _ = stream_metrics(d, [p], mini_schema)
    assert exact.systems[0].metrics["rule_tsa"] == {"gold": 0.0}


def test_change_table_the_other_way(loaded, mini_schema) -> None:
    dialogues, predictions = loaded
    tables = paper_tables(dialogues, [predictions], mini_schema, versions=["2.4"],
                          corrected=[("2.4", "2.1")])
    (row,) = tables.change_rows
    change, low, high = paired_change([0.0, 0.0], [50.0, 0.0], [2, 1])
    assert row[3:8] == [0.0, pytest.approx(100 / 3), pytest.approx(change),
                        pytest.approx(low), pytest.approx(high)]
    assert change == pytest.approx(100 / 3)


def test_paired_change_over_three_dialogues_by_hand() -> None:
    # weights 1, 1, 2; diffs 100, 0, 100 → change 50; residuals 50, -50, 0
    change, low, high = paired_change([0.0, 0.0, 0.0], [100.0, 0.0, 50.0], [1, 1, 2])
    assert change == 50.0
    half = 4.3027 * math.sqrt(3 / 2 * 5000) / 4  # t(0.975, 2 d.f.) = 4.3027
    assert (low, high) == (pytest.approx(50 - half, rel=1e-4),
                           pytest.approx(50 + half, rel=1e-4))


def test_trade_joint_f1_of_empty_turns(tmp_path, mini_schema) -> None:
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": t, "gold_state": g}
                  for t, g in enumerate([{}, {}, {AREA: "x"}])]}]))
    predictions = load_predictions(write_jsonl(tmp_path / "p.jsonl", [{"dialogue_id": "D",
        "turns": [{"turn_index": t, "pred_state": p}
                  for t, p in enumerate([{}, {AREA: "y"}, {AREA: "x"}])]}]),
        dialogues, mini_schema)
    figures = score_profile(dialogues, predictions, mini_schema, "trade")["figures"]
    # both empty: 1; gold empty but a prediction: 0; right: 1
    assert figures["turn_f1"] == pytest.approx(200 / 3)


def test_sgd_and_convlab_value_forms(mini_schema) -> None:
    assert _sgd_prepare(AREA, "north|centre", "gold", mini_schema) == ["north", "centre"]
    assert _sgd_prepare(AREA, "north|centre", "pred", mini_schema) == ["north|centre"]
    assert _convlab_prepare(AREA, " North  Side|SOUTH| ", "pred", mini_schema) == [
        "northside", "south"]
