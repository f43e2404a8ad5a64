"""Corrections of a gold annotation: the file, its checks, applying it, and the corrected gold
on every command that takes ``--gold``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from judge import load_dialogues, load_schema
from judge._errors import DataMismatchError, InputError, OptionError
from judge.cli import main
from judge.data import (
    CorrectionConflicts,
    apply_corrections,
    apply_turn_state,
    json_schema,
    read_corrections,
    validate_file,
)

from ..conftest import EXAMPLES, shared_path, write_jsonl

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "schema_small.json"

# A hand-made dialogue (fixture): 2.1 misses the hotel name at turn 1 and keeps missing it,
# and gets the area wrong from turn 0 until the user repeats it at turn 3.
STATES_21 = [{"hotel-area": "west", "hotel-pricerange": "cheap"},
             {"hotel-area": "west", "hotel-pricerange": "cheap"},
             {"hotel-area": "west", "hotel-pricerange": "cheap"},
             {"hotel-area": "east", "hotel-pricerange": "cheap", "hotel-name": "acorn house"}]
STATES_24 = [{"hotel-area": "east", "hotel-pricerange": "cheap"},
             {"hotel-area": "east", "hotel-pricerange": "cheap", "hotel-name": "acorn house"},
             {"hotel-area": "east", "hotel-pricerange": "cheap", "hotel-name": "acorn house"},
             {"hotel-area": "east", "hotel-pricerange": "cheap", "hotel-name": "acorn house"}]


def _turn_states(states: list[dict[str, str]]) -> list[dict[str, str]]:
    out, previous = [], {}
    for state in states:
        update = {k: v for k, v in state.items() if previous.get(k) != v}
        update.update({k: "none" for k in previous if k not in state})
        out.append(update)
        previous = state
    return out


def _dialogues(tmp_path: Path) -> Path:
    turns = []
    for index, (s21, s24, t21, t24) in enumerate(zip(
            STATES_21, STATES_24, _turn_states(STATES_21), _turn_states(STATES_24),
            strict=True)):
        turns.append({"turn_index": index, "system": "ok .", "user": f"turn {index} .",
                      "gold_state_21": s21, "gold_state_24": s24,
                      "gold_turn_state_21": t21, "gold_turn_state_24": t24})
    other = {"dialogue_id": "FIX002.json", "domains": ["hotel"], "turns": [
        {"turn_index": 0, "system": "", "user": "a hotel in the north .",
         "gold_state_21": {"hotel-area": "north"}, "gold_state_24": {"hotel-area": "north"}}]}
    return write_jsonl(tmp_path / "dialogues.jsonl",
                       [{"dialogue_id": "FIX001.json", "domains": ["hotel"], "turns": turns},
                        other])


def _correction(**fields):
    record = {"dialogue_id": "FIX001.json", "turn_index": 0, "slot": "hotel-area",
              "value": "east", "gold": "2.1", "reviewer": "ann",
              "time": "2026-11-28T10:00:00Z"}
    record.update(fields)
    return record


def _corrections(tmp_path: Path, *records: dict, name: str = "corrections.jsonl") -> Path:
    return write_jsonl(tmp_path / name, list(records))


def _apply(tmp_path: Path, *records: dict, **kwargs):
    dialogues = load_dialogues(_dialogues(tmp_path))
    located = read_corrections([_corrections(tmp_path, *records)])
    return apply_corrections(dialogues, "2.1", located, **kwargs)


def _states(result, dialogue: str = "FIX001.json") -> list[dict[str, str]]:
    found = result.dialogues.get(dialogue)
    return [turn.gold_states[result.name] for turn in found.turns]


def _consistent(result, dialogue: str = "FIX001.json") -> bool:
    found = result.dialogues.get(dialogue)
    previous: dict[str, str] = {}
    for turn in found.turns:
        if apply_turn_state(previous, turn.gold_turn_states[result.name]) != \
                turn.gold_states[result.name]:
            return False
        previous = turn.gold_states[result.name]
    return True


# --- applying ---------------------------------------------------------------------------------

def test_a_correction_carries_while_the_annotation_keeps_the_wrong_value(tmp_path):
    result = _apply(tmp_path, _correction(was="west"))
    assert [s["hotel-area"] for s in _states(result)] == ["east"] * 4
    assert result.changed_turns == 3 and result.applied == 1
    assert _consistent(result)
    # the other versions are left as they were
    original = result.dialogues.get("FIX001.json").turns
    assert [t.gold_states["2.1"]["hotel-area"] for t in original] == ["west"] * 3 + ["east"]
    assert original[1].gold_states["2.4"] == STATES_24[1]


def test_a_missing_value_is_added_and_carried_until_the_annotation_has_one(tmp_path):
    result = _apply(tmp_path, _correction(turn_index=1, slot="hotel-name", value="acorn house",
                                          was=None))
    assert [s.get("hotel-name") for s in _states(result)] == [
        None, "acorn house", "acorn house", "acorn house"]
    turn_states = [t.gold_turn_states[result.name]
                   for t in result.dialogues.get("FIX001.json").turns]
    assert turn_states[1] == {"hotel-name": "acorn house"}
    assert "hotel-name" not in turn_states[3]  # no longer a change at turn 3
    assert _consistent(result)


def test_through_turn_limits_the_turns_covered(tmp_path):
    result = _apply(tmp_path, _correction(through_turn=1))
    assert [s["hotel-area"] for s in _states(result)] == ["east", "east", "west", "east"]
    turn_states = [t.gold_turn_states[result.name]
                   for t in result.dialogues.get("FIX001.json").turns]
    assert turn_states[2]["hotel-area"] == "west"
    assert _consistent(result)


def test_null_or_none_removes_a_value(tmp_path):
    for value in (None, "none"):
        result = _apply(tmp_path, _correction(turn_index=3, slot="hotel-name", value=value))
        assert "hotel-name" not in _states(result)[3]
        assert _consistent(result)


def test_a_later_decision_about_the_slot_speaks_for_its_own_turns(tmp_path):
    result = _apply(tmp_path, _correction(), _correction(turn_index=2, value="centre",
                                                         reviewer="bob"))
    assert [s["hotel-area"] for s in _states(result)] == ["east", "east", "centre", "east"]


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"was": "south"}, "was", "stale correction"),
    ({"turn_index": 9}, "turn_index", "past the dialogue's last turn"),
    ({"through_turn": 7}, "through_turn", "past the dialogue's last turn"),
    ({"turn_index": 2, "through_turn": 1}, "through_turn", "before turn_index"),
])
def test_bad_corrections_name_file_line_and_field(tmp_path, fields, field, words):
    with pytest.raises(InputError) as caught:
        _apply(tmp_path, _correction(dialogue_id="FIX002.json", value="north", note="first"),
               _correction(**fields))
    assert caught.value.line == 2 and caught.value.field == field
    assert words in caught.value.reason
    assert caught.value.path.endswith("corrections.jsonl")


@pytest.mark.parametrize("was", [None, "none"])
def test_a_stale_correction_of_an_empty_slot_is_refused_once_the_slot_holds_a_value(
        tmp_path, was):
    """``was: null`` says the slot was empty when the reviewer looked; version 2.1 now holds
    "acorn house" for hotel-name at turn 3, so the correction is stale, not an overwrite."""
    with pytest.raises(InputError) as caught:
        _apply(tmp_path, _correction(turn_index=3, slot="hotel-name", value="acorn lodge",
                                     was=was))
    assert caught.value.line == 1 and caught.value.field == "was"
    assert "stale correction" in caught.value.reason
    assert "'acorn house'" in caught.value.reason
    # where the slot is still empty (turn 1 under 2.1) the same correction applies
    result = _apply(tmp_path, _correction(turn_index=1, slot="hotel-name", value="acorn house",
                                          was=was))
    assert [s.get("hotel-name") for s in _states(result)] == [None] + ["acorn house"] * 3


def test_an_unknown_dialogue_is_named_with_its_line(tmp_path):
    with pytest.raises(DataMismatchError) as caught:
        _apply(tmp_path, _correction(dialogue_id="NOPE.json"))
    assert caught.value.line == 1 and "NOPE.json" in str(caught.value)


def test_an_unknown_slot_names_the_closest_schema_slot(tmp_path):
    with pytest.raises(InputError) as caught:
        _apply(tmp_path, _correction(slot="hotel-aera"), schema=load_schema(SCHEMA))
    assert caught.value.field == "slot" and "'hotel-area'" in caught.value.reason


def test_disagreeing_reviewers_are_refused_with_the_list_of_conflicts(tmp_path):
    with pytest.raises(CorrectionConflicts) as caught:
        _apply(tmp_path, _correction(), _correction(value="centre", reviewer="bob"))
    assert len(caught.value.conflicts) == 1
    message = str(caught.value)
    assert "FIX001.json turn 0 hotel-area" in message
    assert "'east' by ann" in message and "'centre' by bob" in message
    assert "corrections.jsonl:1" in message and "corrections.jsonl:2" in message


def test_a_rejection_against_an_acceptance_is_a_conflict_an_adjudication_settles(tmp_path):
    accept, reject = _correction(), _correction(value="west", reviewer="bob")
    with pytest.raises(CorrectionConflicts):
        _apply(tmp_path, accept, reject)
    settled = _apply(tmp_path, accept, reject,
                     _correction(value="west", reviewer="carol", adjudicated=True))
    assert [s["hotel-area"] for s in _states(settled)] == ["west"] * 3 + ["east"]
    assert settled.changed_turns == 0


def test_reviewers_who_agree_are_no_conflict(tmp_path):
    result = _apply(tmp_path, _correction(),
                    _correction(reviewer="bob", time="2026-11-29T09:00:00+01:00"))
    assert _states(result)[0]["hotel-area"] == "east"


def test_the_name_digests_what_is_decided_not_who_decided(tmp_path):
    one = _apply(tmp_path, _correction())
    other = _apply(tmp_path, _correction(reviewer="zed", time="2027-01-01T00:00:00Z",
                                         note="same fix"))
    different = _apply(tmp_path, _correction(value="centre"))
    assert one.name == other.name and one.name.startswith("2.1+corr:")
    assert different.name != one.name


def test_corrections_of_another_version_are_left_aside_and_counted(tmp_path):
    result = _apply(tmp_path, _correction(), _correction(gold="2.4", value="north"))
    assert result.other_versions == 1
    assert _states(result)[0]["hotel-area"] == "east"
    with pytest.raises(OptionError, match=r"none of the corrections is for version 2\.1"):
        _apply(tmp_path, _correction(gold="2.4"))


# --- the file and its schema ------------------------------------------------------------------

def test_the_published_schema_and_the_reader_agree(tmp_path):
    schema = json_schema("corrections")
    good = _correction(through_turn=2, was="west", note="n", candidate="c1", adjudicated=False)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()
                                    ).validate(good)
    path = _corrections(tmp_path, good, {"dialogue_id": "FIX001.json", "turn_index": -1})
    problems = validate_file("corrections", path)
    assert problems and all(p.line == 2 for p in problems)
    fields = {p.field for p in problems}
    assert "turn_index" in fields
    with pytest.raises(InputError) as caught:
        read_corrections([path])
    assert caught.value.line == 2


def test_validate_corrections_with_a_schema_names_the_closest_slot(tmp_path, capsys):
    path = _corrections(tmp_path, _correction(), _correction(slot="hotel-prise range"))
    assert main(["validate", "corrections", str(path)]) == 0
    assert main(["validate", "corrections", str(path), "--schema", str(SCHEMA)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: field 'slot'" in err and "hotel-pricerange" in err


# --- the commands -----------------------------------------------------------------------------

def test_corrections_apply_writes_a_consistent_version_beside_the_others(tmp_path, capsys):
    dialogues = _dialogues(tmp_path)
    corrections = _corrections(tmp_path, _correction(),
                               _correction(turn_index=1, slot="hotel-name",
                                           value="acorn house"))
    out = tmp_path / "fixed.jsonl"
    assert main(["corrections", "apply", "--dialogues", str(dialogues), "--gold", "2.1",
                 "--corrections", str(corrections), "--as", "21fix", "--out", str(out)]) == 0
    assert "version 21fix = 2.1 with 2 corrections" in capsys.readouterr().out
    record = json.loads(out.read_text().splitlines()[0])
    assert [t["gold_state_21fix"] for t in record["turns"]] == STATES_24
    assert [t["gold_state_21"] for t in record["turns"]] == STATES_21
    reread = load_dialogues(out)
    assert "21fix" in reread.versions
    for dialogue in reread.dialogues:  # the written turn states lead to the written states
        previous: dict[str, str] = {}
        for turn in dialogue.turns:
            if "21fix" in turn.gold_turn_states:
                assert apply_turn_state(previous, turn.gold_turn_states["21fix"]) == \
                    turn.gold_states["21fix"]
            previous = turn.gold_states["21fix"]


def test_corrections_apply_refuses_conflicts_with_exit_2(tmp_path, capsys):
    dialogues = _dialogues(tmp_path)
    first = _corrections(tmp_path, _correction(), name="ann.jsonl")
    second = _corrections(tmp_path, _correction(value="centre", reviewer="bob"),
                          name="bob.jsonl")
    out = tmp_path / "fixed.jsonl"
    code = main(["corrections", "apply", "--dialogues", str(dialogues), "--gold", "2.1",
                 "--corrections", str(first), str(second), "--as", "21fix", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "ann.jsonl:1" in err and "bob.jsonl:1" in err and "Traceback" not in err


def _predictions(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "predictions.jsonl", [
        {"dialogue_id": "FIX001.json", "turns": [
            {"turn_index": i, "pred_state": state} for i, state in enumerate(STATES_24)]},
        {"dialogue_id": "FIX002.json", "turns": [
            {"turn_index": 0, "pred_state": {"hotel-area": "north"}}]}])


def test_metrics_score_against_the_corrected_gold_and_name_it(tmp_path):
    data = ["--schema", str(SCHEMA), "--dialogues", str(_dialogues(tmp_path)),
            "--predictions", str(_predictions(tmp_path)), "--gold", "2.1"]
    corrections = _corrections(tmp_path, _correction(),
                               _correction(turn_index=1, slot="hotel-name", value="acorn house"))
    assert main(["metrics", *data, "--json", str(tmp_path / "plain.json")]) == 0
    assert main(["metrics", *data, "--corrections", str(corrections),
                 "--json", str(tmp_path / "fixed.json")]) == 0
    plain = json.loads((tmp_path / "plain.json").read_text())
    fixed = json.loads((tmp_path / "fixed.json").read_text())
    assert plain["systems"][0]["metrics"]["jga"] == pytest.approx(40.0)  # 2 of 5 turns
    assert fixed["systems"][0]["metrics"]["jga"] == pytest.approx(100.0)
    assert plain["options"]["gold"] == "2.1"
    assert fixed["options"]["gold"].startswith("2.1+corr:")
    assert fixed["options"]["gold"] in fixed["data"]["versions"]


def test_report_shows_original_and_corrected_side_by_side_with_the_change(tmp_path, capsys):
    corrections = _corrections(tmp_path, _correction(),
                               _correction(turn_index=1, slot="hotel-name", value="acorn house"))
    code = main(["report", "--schema", str(SCHEMA), "--dialogues", str(_dialogues(tmp_path)),
                 "--predictions", str(_predictions(tmp_path)), "--gold", "2.1",
                 "--corrections", str(corrections), "--format", "csv"])
    out = capsys.readouterr().out
    assert code == 0
    main_table, change_table = out.split("\n\n")
    versions = [line.split(",")[1] for line in main_table.splitlines()[1:]]
    assert versions[0] == "2.1" and versions[1].startswith("2.1+corr:")
    header, row = change_table.splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(cells["JGA"]) == pytest.approx(40.0)
    assert float(cells["JGA corr."]) == pytest.approx(100.0)
    assert float(cells["Δ JGA"]) == pytest.approx(60.0)
    assert int(cells["turns changed"]) == 3


def test_audit_ranks_against_the_corrected_gold(tmp_path):
    dialogues, predictions = _dialogues(tmp_path), _predictions(tmp_path)
    corrections = _corrections(tmp_path, _correction(),
                               _correction(turn_index=1, slot="hotel-name", value="acorn house"))
    args = ["audit", str(predictions), "--dialogues", str(dialogues), "--schema", str(SCHEMA),
            "--gold", "2.1"]
    assert main([*args, "--candidates", str(tmp_path / "before.jsonl")]) == 0
    assert main([*args, "--corrections", str(corrections),
                 "--candidates", str(tmp_path / "after.jsonl")]) == 0
    before = (tmp_path / "before.jsonl").read_text().splitlines()
    after = (tmp_path / "after.jsonl").read_text().splitlines()
    assert len(before) > 0 and after == []  # every disagreement was an annotation error


def test_an_empty_corrections_file_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code = main(["metrics", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions",
                 str(EXAMPLES / "predictions.jsonl"), "--corrections", str(empty)])
    assert code == 2 and "no corrections" in capsys.readouterr().err


# --- the shared MultiWOZ data: 2.1 + every difference = 2.4 ------------------------------------

def test_every_21_to_24_difference_as_a_correction_reproduces_24(tmp_path):
    source = shared_path("multiwoz", "dialogues.jsonl.gz")
    dialogues = load_dialogues(source)
    records = []
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        for line in handle:
            dialogue = json.loads(line)
            for turn in dialogue["turns"]:
                old, new = turn["gold_state_21"], turn["gold_state_24"]
                for slot in sorted(set(old) | set(new)):
                    if old.get(slot) != new.get(slot):
                        records.append(_correction(
                            dialogue_id=dialogue["dialogue_id"], turn_index=turn["turn_index"],
                            slot=slot, value=new.get(slot), through_turn=turn["turn_index"],
                            was=old.get(slot)))
    located = read_corrections([write_jsonl(tmp_path / "all.jsonl", records)])
    result = apply_corrections(dialogues, "2.1", located)
    turns = [(t.gold_states[result.name], t.gold_states["2.4"])
             for d in result.dialogues.dialogues for t in d.turns]
    same = sum(fixed == target for fixed, target in turns)
    assert same / len(turns) >= 0.999, f"{same} of {len(turns)} turns reproduce 2.4"
    for dialogue in result.dialogues.dialogues:
        previous: dict[str, str] = {}
        for turn in dialogue.turns:
            assert apply_turn_state(previous, turn.gold_turn_states[result.name]) == \
                turn.gold_states[result.name]
            previous = turn.gold_states[result.name]


def test_report_interval_of_the_jga_change_is_clustered_by_dialogue(tmp_path, capsys):
    """Five dialogues whose 2.1 gold turns wrong (west for east) from turn k to the end;
    corrections put it right, so every changed turn of a dialogue moves together. The Δ JGA
    interval must treat a dialogue as one unit: computed by hand below, it is about twice as
    wide as a (wrong) interval over the 17 turns as if they were independent."""
    shape = {"D1.json": (4, 0), "D2.json": (3, 3), "D3.json": (5, 2), "D4.json": (2, 2),
             "D5.json": (3, 1)}  # dialogue: (turns, first wrong turn)
    dialogues, predictions, corrections = [], [], []
    for name, (n, k) in shape.items():
        turns = [{"turn_index": i, "system": "ok .", "user": f"turn {i} .",
                  "gold_state_21": {"hotel-area": "west" if i >= k else "east"},
                  "gold_state_24": {"hotel-area": "east"}} for i in range(n)]
        dialogues.append({"dialogue_id": name, "domains": ["hotel"], "turns": turns})
        predictions.append({"dialogue_id": name, "turns": [
            {"turn_index": i, "pred_state": {"hotel-area": "east"}} for i in range(n)]})
        if k < n:
            corrections.append(_correction(dialogue_id=name, turn_index=k, was="west"))
    code = main(["report", "--schema", str(SCHEMA),
                 "--dialogues", str(write_jsonl(tmp_path / "d.jsonl", dialogues)),
                 "--predictions", str(write_jsonl(tmp_path / "p.jsonl", predictions)),
                 "--gold", "2.1", "--format", "csv",
                 "--corrections", str(_corrections(tmp_path, *corrections))])
    assert code == 0
    header, row = capsys.readouterr().out.split("\n\n")[1].splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(","), strict=True))
    # by hand: per dialogue, turns n and turns put right c; cluster totals 100·c
    n = np.array([4, 3, 5, 2, 3], dtype=float)
    c = np.array([4, 0, 3, 0, 2], dtype=float)
    delta = 100 * c.sum() / n.sum()  # 900 / 17
    residual = 100 * c - delta * n
    se = np.sqrt(5 / 4 * (residual ** 2).sum()) / n.sum()
    half = 2.7764451051977934 * se  # t(0.975, 4 df)
    assert int(cells["turns changed"]) == 9
    assert float(cells["Δ JGA"]) == pytest.approx(delta, abs=1e-3)
    assert float(cells["Δ low"]) == pytest.approx(delta - half, abs=1e-3)
    assert float(cells["Δ high"]) == pytest.approx(delta + half, abs=1e-3)
    # the turn-level interval (17 independent 0/100 changes) is far narrower
    per_turn = np.repeat([100.0, 0.0], [9, 8])
    turn_half = 2.1199052992212546 * per_turn.std(ddof=1) / np.sqrt(17)  # t(0.975, 16 df)
    assert half > 1.5 * turn_half


def test_apply_each_corrects_every_named_version_and_scored_version_picks_one(tmp_path):
    """The one path of the CLI, the analyses and both service runners: a corrected version per
    version the corrections name, then the one a score of one version uses."""
    from judge.data import apply_each, only_version, scored_version

    dialogues = load_dialogues(_dialogues(tmp_path))
    located = read_corrections([_corrections(
        tmp_path, _correction(), _correction(gold="2.4", turn_index=1, slot="hotel-name",
                                             value="acorn lodge"))])
    fixed, corrected = apply_each(dialogues, located)
    assert [c.base for c in corrected] == ["2.1", "2.4"]
    assert fixed.versions[-2:] == tuple(c.name for c in corrected)
    assert fixed.get("FIX001.json").turns[0].gold_states[corrected[0].name]["hotel-area"] == \
        "east"
    assert fixed.get("FIX001.json").turns[1].gold_states[corrected[1].name]["hotel-name"] == \
        "acorn lodge"
    assert corrected[0].summary() == {
        "base": "2.1", "name": corrected[0].name, "digest": corrected[0].digest,
        "applied": 1, "changed_turns": corrected[0].changed_turns,
        "changed_slots": corrected[0].changed_slots}
    only, (one,) = apply_each(dialogues, located, versions=["2.4"])
    assert one.name == corrected[1].name and corrected[0].name not in only.versions
    assert scored_version(fixed, corrected, "2.4", option="--gold") is corrected[1]
    assert scored_version(fixed, corrected, corrected[0].name, option="--gold") is corrected[0]
    with pytest.raises(OptionError, match=(r"^the corrections correct several versions "
                                           r"\(2\.1, 2\.4\): say which with options\.gold$")):
        scored_version(fixed, corrected, None, option="options.gold")
    assert scored_version(fixed, corrected[:1], None, option="--gold") is corrected[0]
    with pytest.raises(OptionError, match=r"^the corrections correct 2\.1, not --gold '2\.4'$"):
        scored_version(fixed, corrected[:1], "2.4", option="--gold")
    with pytest.raises(OptionError, match=(r"^the corrections correct several versions "
                                           r"\(2\.1, 2\.4\): say which with --gold$")):
        only_version(located, option="--gold")
    assert only_version(located[:1], option="--gold") == "2.1"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert read_corrections([empty]) == []
    with pytest.raises(InputError, match="no corrections in the file"):
        read_corrections([empty], each_nonempty=True)
