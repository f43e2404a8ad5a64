"""Ranked label-error candidates: which (turn, slot) pairs are listed and where, the evidence
and its direction, the files written (CSV escaped against formula injection), and inputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from judge import load_dialogues, load_predictions, load_schema
from judge.analysis import (
    find_candidates,
    load_audit_inputs,
    source_from_predictions,
    source_from_run,
    write_candidates,
)
from judge.analysis._candidate_sheet import csv_cell
from judge.analysis._values import mentioned, squeeze
from judge.data import read_id_list
from judge.errors import OptionError
from judge.pipeline import load_run

from ..conftest import FIXTURES, shared_path, write_jsonl

# --------------------------------------------------------------------------- fixtures

SCHEMA = {
    "name": "mini",
    "domains": [{"domain": "hotel", "slots": [
        {"name": "hotel-area", "is_categorical": True,
         "possible_values": ["north", "south", "centre"]},
        {"name": "hotel-parking", "is_categorical": True, "possible_values": ["yes", "no"]},
        {"name": "hotel-name"},
        {"name": "hotel-pricerange", "is_categorical": True,
         "possible_values": ["cheap", "moderate", "expensive"]},
    ]}, {"domain": "taxi", "slots": [
        {"name": "taxi-leaveat", "value_format": "HH:MM (24-hour clock)"},
    ]}],
}


def dialogue(dialogue_id: str, turns: list[tuple[str, str, dict, dict]]) -> dict:
    """(system, user, gold 2.1 state, gold 2.4 state) per turn, cumulative states."""
    return {"dialogue_id": dialogue_id, "turns": [
        {"turn_index": i, "system": s, "user": u, "gold_state_21": g21, "gold_state_24": g24}
        for i, (s, u, g21, g24) in enumerate(turns)]}


def predictions(name: str, states: dict[str, list[dict]]) -> list[dict]:
    return [{"dialogue_id": d, "system_name": name,
             "turns": [{"turn_index": i, "pred_state": s} for i, s in enumerate(seq)]}
            for d, seq in states.items()]


D1 = dialogue("D1", [
    ("", "a hotel in the north please", {}, {"hotel-area": "north"}),
    ("ok . parking ?", "yes , free parking", {"hotel-area": "north", "hotel-parking": "free"},
     {"hotel-area": "north", "hotel-parking": "yes"}),
    ("the acorn guest house ?", "sounds good",
     {"hotel-area": "north", "hotel-parking": "free"},
     {"hotel-area": "north", "hotel-parking": "yes", "hotel-name": "acorn guest house"}),
])
D2 = dialogue("D2", [
    ("", "i do not care about the area , something cheap",
     {"hotel-pricerange": "moderate"}, {"hotel-pricerange": "cheap", "hotel-area": "dontcare"}),
    ("fine", "a taxi at 7pm", {"hotel-pricerange": "moderate", "taxi-leaveat": "7pm"},
     {"hotel-pricerange": "cheap", "hotel-area": "dontcare", "taxi-leaveat": "19:00"}),
])
GOOD = {"D1": [{"hotel-area": "north"}, {"hotel-area": "north", "hotel-parking": "yes"},
               {"hotel-area": "north", "hotel-parking": "yes", "hotel-name": "acorn guest house"}],
        "D2": [{"hotel-pricerange": "cheap", "hotel-area": "dontcare"},
               {"hotel-pricerange": "cheap", "hotel-area": "dontcare", "taxi-leaveat": "19:00"}]}
ODD = {"D1": [{"hotel-area": "cambridge"}, {"hotel-area": "cambridge", "hotel-type": "x"},
              {"hotel-area": "cambridge", "hotel-type": "x"}],
       "D2": [{"hotel-pricerange": "cheap"},
              {"hotel-pricerange": "cheap", "taxi-leaveat": "19:00"}]}


@pytest.fixture
def data(tmp_path):
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(SCHEMA))
    dialogues_path = write_jsonl(tmp_path / "dialogues.jsonl", [D1, D2])
    paths = []
    for name, states in (("good", GOOD), ("copy", GOOD), ("odd", ODD)):
        paths.append(write_jsonl(tmp_path / f"{name}.jsonl", predictions(name, states)))
    schema = load_schema(schema_path)
    dialogues = load_dialogues(dialogues_path)
    sources = [source_from_predictions(load_predictions(p, dialogues, schema)) for p in paths]
    return {"schema": schema, "dialogues": dialogues, "sources": sources, "paths": paths,
            "dialogues_path": dialogues_path, "schema_path": schema_path}


def by_place(candidates) -> dict[tuple[str, int, str], object]:
    """Candidates by (dialogue, turn, slot); where several values compete there, the one the
    most systems hold."""
    out: dict[tuple[str, int, str], object] = {}
    for c in sorted(candidates, key=lambda c: len(c.systems)):
        out[(c.dialogue_id, c.turn_index, c.slot)] = c
    return out


def codes(candidate) -> set[str]:
    return {e.code for e in candidate.evidence} - {"prior"}


# --------------------------------------------------------------------------- what is listed


def test_one_candidate_per_slot_and_value_at_the_first_turn(data):
    found = find_candidates(data["dialogues"], data["sources"], gold="2.1",
                            schema=data["schema"])
    places = [(c.dialogue_id, c.turn_index, c.slot, c.predicted) for c in found]
    assert len(places) == len(set(places))
    # the systems' "north" comes at turn 0, the 2.1 gold only at turn 1: listed once, at 0
    assert ("D1", 0, "hotel-area", "north") in places
    # "cheap" against 2.1's "moderate" holds on every turn of D2; listed at turn 0 only
    assert [p for p in places if p[2] == "hotel-pricerange"] == [
        ("D2", 0, "hotel-pricerange", "cheap")]
    # hotel-type is not in the schema: a prediction error, never a candidate
    assert all(c.slot != "hotel-type" for c in found)
    assert [c.rank for c in found] == list(range(1, len(found) + 1))
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
    assert all(0 < c.score < 1 for c in found)


def test_evidence_points_the_right_way(data):
    found = by_place(find_candidates(data["dialogues"], data["sources"], gold="2.1",
                                     schema=data["schema"]))
    north = found[("D1", 0, "hotel-area")]
    assert north.predicted == "north" and north.gold_value is None
    assert north.systems == ["good", "copy"]
    assert {"systems_agree", "gold_later", "gold_omits", "value_in_dialogue"} <= codes(north)
    parking = found[("D1", 1, "hotel-parking")]
    assert parking.gold_value == "free" and "gold_outside_schema" in codes(parking)
    leave = found[("D2", 1, "taxi-leaveat")]
    assert {"gold_outside_schema", "surface_variant"} <= codes(leave)  # 7pm = 19:00
    assert len(leave.systems) == 3
    every = find_candidates(data["dialogues"], data["sources"], gold="2.1",
                            schema=data["schema"])
    cambridge = next(c for c in every if c.predicted == "cambridge")
    assert "value_outside_schema" in codes(cambridge) and cambridge.systems == ["odd"]
    assert north.score > cambridge.score
    assert cambridge.rank == len(every)  # an invalid value of one system: last
    dontcare = next(c for c in every if c.predicted == "dontcare")
    assert "said_no_preference" in codes(dontcare)


def test_a_gold_dontcare_the_systems_miss_is_weak_evidence(tmp_path, data):
    d = dialogue("D3", [("", "any area is fine", {"hotel-area": "dontcare"},
                         {"hotel-area": "dontcare"})])
    path = write_jsonl(tmp_path / "d3.jsonl", [d])
    dialogues = load_dialogues(path)
    sources = [source_from_predictions(load_predictions(
        write_jsonl(tmp_path / f"p{i}.jsonl", predictions(f"p{i}", {"D3": [{}]})), dialogues))
        for i in range(2)]
    (only,) = find_candidates(dialogues, sources, gold="2.1", schema=data["schema"])
    assert only.predicted is None and only.gold_value == "dontcare"
    assert "gold_dontcare" in codes(only) and only.score < 0.5


def test_a_later_version_never_scores_the_audit_of_an_earlier_one(tmp_path, data):
    first = find_candidates(data["dialogues"], data["sources"], gold="2.1",
                            schema=data["schema"])
    # rewrite every 2.4 state: the 2.1 audit must not move
    altered = []
    for d in (D1, D2):
        d = json.loads(json.dumps(d))
        for turn in d["turns"]:
            turn["gold_state_24"] = {"hotel-name": "something else entirely"}
        altered.append(d)
    dialogues = load_dialogues(write_jsonl(tmp_path / "altered.jsonl", altered))
    sources = [source_from_predictions(load_predictions(p, dialogues, data["schema"]))
               for p in data["paths"]]
    second = find_candidates(dialogues, sources, gold="2.1", schema=data["schema"])

    def scored(candidates):
        return [(c.dialogue_id, c.turn_index, c.slot, c.predicted, c.score,
                 [(e.code, e.weight) for e in c.evidence]) for c in candidates]

    assert scored(first) == scored(second)
    assert first[0].other_versions != second[0].other_versions  # shown beside, that is all
    assert all(set(c.other_versions) == {"2.4"} for c in first)


def test_auditing_the_later_version(data):
    found = find_candidates(data["dialogues"], data["sources"], gold="2.4",
                            schema=data["schema"])
    assert all(c.gold_version == "2.4" and set(c.other_versions) == {"2.1"} for c in found)
    # the good systems match 2.4 exactly, so only the odd system's values are listed
    assert {tuple(c.systems) for c in found} <= {("odd",), ("good", "copy")}
    assert all(c.predicted != "north" for c in found)


def test_input_errors(data):
    with pytest.raises(OptionError, match="at least one"):
        find_candidates(data["dialogues"], [], gold="2.1")
    with pytest.raises(OptionError, match="unknown annotation version"):
        find_candidates(data["dialogues"], data["sources"], gold="3.0")
    twins = [data["sources"][0], data["sources"][0]]
    with pytest.raises(OptionError, match="same name"):
        find_candidates(data["dialogues"], twins, gold="2.1")
    with pytest.raises(OptionError, match="--dialogues"):
        load_audit_inputs([data["paths"][0]])


# --------------------------------------------------------------------------- writing


def test_jsonl_holds_every_field(tmp_path, data):
    found = find_candidates(data["dialogues"], data["sources"], gold="2.1",
                            schema=data["schema"])
    path = tmp_path / "out" / "c.jsonl"
    assert write_candidates(found, path) == len(found)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    first = records[0]
    for name in ("dialogue_id", "turn_index", "slot", "gold_version", "gold_value", "predicted",
                 "predictions", "evidence", "score", "rank", "systems", "other_versions"):
        assert name in first, name
    assert [r["rank"] for r in records] == list(range(1, len(records) + 1))
    assert all(r["evidence"] and {"code", "weight", "detail"} <= set(r["evidence"][0])
               for r in records)


@pytest.mark.parametrize("value", ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)",
                                   "\tcmd", "\rcmd"])
def test_csv_cells_cannot_start_a_formula(tmp_path, value):
    d = dialogue(value, [("", value, {"hotel-name": "a"}, {"hotel-name": "a"})])
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [d]))
    sources = [source_from_predictions(load_predictions(
        write_jsonl(tmp_path / "p.jsonl", predictions("sys", {value: [{"hotel-name": value}]})),
        dialogues))]
    found = find_candidates(dialogues, sources, gold="2.1")
    path = tmp_path / "c.csv"
    write_candidates(found, path)
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and rows[0]["predicted"] == "'" + value
    assert rows[0]["dialogue_id"] == "'" + value
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert float(rows[0]["score"]) > 0  # numbers stay numbers
    assert csv_cell(0.5) == 0.5 and csv_cell("plain") == "plain"


# --------------------------------------------------------------------------- judge runs


def write_run(folder: Path, rows: list[dict], dialogues_path: Path | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = {"system": folder.name}
    if dialogues_path is not None:
        data["dialogues"] = str(dialogues_path)
    (folder / "summary.json").write_text(json.dumps({"data": data}))
    return folder


def judged(dialogue_id: str, turn: int, pred: dict, *, verdict: bool = True,
           incorrect: list | None = None, missed: dict | None = None, **extra) -> dict:
    trace = [{"step": "completeness", "slot": s, "value": v, "reason": "user value missing"}
             for s, v in (missed or {}).items()]
    return {"dialogue_id": dialogue_id, "turn_index": turn, "verdict": verdict,
            "rule": {"2.1": False}, "pred_turn_state": pred, "incorrect": incorrect or [],
            "missed": list(missed or {}), "trace": trace, "calls": [], **extra}


def test_judge_runs_add_their_evidence(tmp_path, data):
    rows_a = [judged("D1", 0, {"hotel-area": "north"}),
              judged("D1", 1, {"hotel-parking": "yes"}, verdict=False,
                     incorrect=["hotel-parking"]),
              judged("D1", 2, {"hotel-name": "acorn guest house"}),
              judged("D2", 0, {"hotel-pricerange": "cheap"}, verdict=False,
                     missed={"hotel-area": "dontcare"}),
              # a rule filter dropped the value: not in the judge's correct state, not flagged
              judged("D2", 1, {"taxi-leaveat": "19:00"}, verdict=False,
                     state={"correct": {"hotel-pricerange": "cheap"}},
                     trace=[{"step": "prediction", "slot": "taxi-leaveat", "value": "19:00",
                             "decision": "dropped", "reason": "value rule: not a time"}])]
    run = write_run(tmp_path / "run-a", rows_a, data["dialogues_path"])
    source = source_from_run(load_run(run))
    assert source.states["d1"][2] == GOOD["D1"][2]  # turn states integrate to the states
    found = by_place(find_candidates(data["dialogues"], [source], gold="2.1",
                                     schema=data["schema"]))
    assert "judge_accepts" in codes(found[("D1", 0, "hotel-area")])
    assert "judge_rejects" in codes(found[("D1", 1, "hotel-parking")])
    # the judge itself says "cheap" is fine and names nothing of 2.1's "moderate" as missed
    assert "judge_accepts" in codes(found[("D2", 0, "hotel-pricerange")])
    dropped = found[("D2", 1, "taxi-leaveat")]
    assert "judge_rejects" in codes(dropped) and "judge_accepts" not in codes(dropped)
    assert "value rule: not a time" in next(e.detail for e in dropped.evidence
                                            if e.code == "judge_rejects")
    # loading by path: the run's recorded dialogues file is found, names stay unique
    twin = write_run(tmp_path / "run-b", rows_a, data["dialogues_path"])
    inputs = load_audit_inputs([run, twin, data["paths"][2]], schema=data["schema_path"])
    assert [s.name for s in inputs.sources] == ["run-a", "run-b", "odd"]
    assert [s.is_run for s in inputs.sources] == [True, True, False]
    assert len(inputs.runs) == 2 and inputs.schema is not None


def test_judge_naming_the_gold_value_as_missed_speaks_for_the_gold(tmp_path, data):
    rows = [judged("D2", 0, {}, verdict=False, missed={"hotel-pricerange": "moderate"}),
            judged("D2", 1, {})]
    d2 = load_dialogues(write_jsonl(tmp_path / "d2.jsonl", [D2]))
    found = by_place(find_candidates(d2, [source_from_run(load_run(
        write_run(tmp_path / "run", rows)))], gold="2.1", schema=data["schema"]))
    assert "judge_misses_gold" in codes(found[("D2", 0, "hotel-pricerange")])


# --------------------------------------------------------------------------- helpers


def test_value_helpers():
    assert squeeze("The Gonville  Hotel") == squeeze("gonville hotel")
    assert squeeze("7pm") == squeeze("19:00")
    assert mentioned("pizza hut fenditton", "to pizza hut fen ditton please")
    assert mentioned("north", "in the north .") and not mentioned("north", "northern")
    assert not mentioned("2", "there are 12 of them") and not mentioned("dontcare", "dontcare")
    assert FIXTURES.is_dir()


def test_shared_data_ranking_finds_corrections():
    folder = shared_path("multiwoz")
    schema = load_schema(folder / "schema.json")
    dialogues = load_dialogues(folder / "dialogues.jsonl.gz").subset(
        read_id_list(folder / "sampled_dialogue_ids.txt"))
    sources = [source_from_predictions(load_predictions(
        folder / "predictions" / f"{name}.jsonl.gz", dialogues, schema))
        for name in ("original", "da", "da-p")]
    found = find_candidates(dialogues, sources, gold="2.1", schema=schema)
    # truth: 2.4's turn-level value differs from 2.1's (the bench's definition)
    from judge.data import turn_state

    truth = set()
    for d in dialogues.dialogues:
        before = {"2.1": {}, "2.4": {}}
        for turn in d.turns:
            change = {}
            for v in before:
                change[v] = turn_state(before[v], turn.gold_states[v], include_removals=True)
                before[v] = turn.gold_states[v]
            truth |= {(d.dialogue_id, turn.turn_index, s) for s in set(change["2.1"])
                      | set(change["2.4"]) if change["2.1"].get(s) != change["2.4"].get(s)}
    hits = [(c.dialogue_id, c.turn_index, c.slot) in truth for c in found]
    assert sum(hits[:25]) >= 20  # measured: 22 of 25 on these 100 dialogues
    assert len({(c.dialogue_id, c.turn_index, c.slot) for c in found} & truth) >= 0.7 * len(truth)


def test_the_audit_page_and_the_ranking_compare_values_with_the_same_functions():
    """One definition of value matching (judge/analysis/_values.py), not a copy per module."""
    from judge.analysis import _audit, _candidates, _values

    assert _audit.rule_equal is _candidates.rule_equal is _values.rule_equal
    assert _audit.mentioned is _candidates.mentioned is _values.mentioned
    assert _audit.surface_form is _values.surface_form
    assert squeeze("The Gonville  Hotel") == "gonvillehotel" == \
        _values.surface_form("the gonville hotel")


def test_strict_mention_keeps_the_audit_page_s_rules():
    """Not loose: guesthouse spellings stand for each other, nothing is squeezed, and
    ``dontcare`` is looked for like any other word."""
    assert mentioned("acorn guesthouse", "the acorn guest house is fine", loose=False)
    assert not mentioned("pizza hut fenditton", "pizza hut fen ditton", loose=False)
    assert mentioned("pizza hut fenditton", "pizza hut fen ditton")
    assert mentioned("dontcare", "i dontcare", loose=False)
    assert not mentioned("dontcare", "i dontcare")
