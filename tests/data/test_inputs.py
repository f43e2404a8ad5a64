"""Loading and validation: every bad input gets a message naming file, line and field."""

from __future__ import annotations

import gzip
import json

import pytest

from judge import InputError, load_dialogues, load_predictions, load_schema
from judge.cli import main
from judge.data import read_id_list
from judge.errors import DataMismatchError, OptionError

from ..conftest import FIXTURES, assert_located, write_jsonl

DIALOGUE = {"dialogue_id": "SNG0001.json", "turns": [
    {"turn_index": 0, "system": "", "user": "a cheap hotel please",
     "gold_state_21": {"hotel-pricerange": "cheap"},
     "gold_state_24": {"hotel-pricerange": "cheap"}},
    {"turn_index": 1, "system": "ok", "user": "in the north",
     "gold_state_21": {"hotel-area": "north", "hotel-pricerange": "cheap"},
     "gold_state_24": {"hotel-area": "north", "hotel-pricerange": "cheap"}}]}
PRED = {"dialogue_id": "SNG0001.json", "system_name": "sys", "turns": [
    {"turn_index": 0, "pred_state": {"hotel-pricerange": "cheap"}},
    {"turn_index": 1, "pred_state": {"hotel-area": "north", "hotel-pricerange": "cheap"}}]}


@pytest.fixture
def files(tmp_path):
    d = write_jsonl(tmp_path / "d.jsonl", [DIALOGUE])
    return tmp_path, d


def _pred_file(tmp_path, record, name="p.jsonl"):
    return write_jsonl(tmp_path / name, [record])


def test_loads_versions_and_gzip(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps(DIALOGUE) + "\n\n")
    dialogues = load_dialogues(path)
    assert dialogues.versions == ("2.1", "2.4")
    assert dialogues.resolve_version("24") == "2.4"
    assert dialogues.resolve_version(None) == "2.1"
    assert dialogues.get("sng0001") is dialogues.dialogues[0]  # id spellings join


def test_single_unversioned_gold_state(tmp_path):
    record = {"dialogue_id": "1_0001", "turns": [
        {"turn_index": 0, "user": "hi", "gold_state": {"payment-amount": "$5|five dollars"}}]}
    dialogues = load_dialogues(write_jsonl(tmp_path / "sgd.jsonl", [record]))
    assert dialogues.versions == ("gold",)


def test_malformed_json_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(DIALOGUE) + "\n{not json\n")
    with pytest.raises(InputError, match="invalid JSON") as err:
        load_dialogues(path)
    assert_located(err.value, path, 2, None)


def test_bad_value_type_names_field(files):
    tmp_path, d = files
    bad = json.loads(json.dumps(PRED))
    bad["turns"][1]["pred_state"]["hotel-stars"] = 4
    with pytest.raises(InputError, match="valid string") as err:
        load_predictions(_pred_file(tmp_path, bad), load_dialogues(d))
    assert_located(err.value, tmp_path / "p.jsonl", 1, "turns[1].pred_state.hotel-stars")


def test_missing_required_field(files):
    tmp_path, d = files
    bad = {"turns": PRED["turns"]}
    with pytest.raises(InputError, match="Field required") as err:
        load_predictions(_pred_file(tmp_path, bad), load_dialogues(d))
    assert_located(err.value, tmp_path / "p.jsonl", 1, "dialogue_id")


def test_unknown_dialogue_id(files):
    tmp_path, d = files
    with pytest.raises(DataMismatchError, match="unknown dialogue id 'XYZ'") as err:
        load_predictions(_pred_file(tmp_path, {**PRED, "dialogue_id": "XYZ"}), load_dialogues(d))
    assert_located(err.value, tmp_path / "p.jsonl", 1, "dialogue_id")


def test_turn_count_mismatch(files):
    tmp_path, d = files
    short = {**PRED, "turns": PRED["turns"][:1]}
    with pytest.raises(DataMismatchError, match="1 predicted turns but dialogue") as err:
        load_predictions(_pred_file(tmp_path, short), load_dialogues(d))
    assert_located(err.value, tmp_path / "p.jsonl", 1, "turns")


def test_turn_index_out_of_order(tmp_path):
    bad = json.loads(json.dumps(DIALOGUE))
    bad["turns"][1]["turn_index"] = 5
    with pytest.raises(InputError, match="out of order") as err:
        load_dialogues(write_jsonl(tmp_path / "d.jsonl", [bad]))
    assert_located(err.value, tmp_path / "d.jsonl", 1, "turns[1].turn_index")


def test_duplicate_dialogue_id(tmp_path):
    with pytest.raises(InputError, match="duplicate dialogue id") as err:
        load_dialogues(write_jsonl(tmp_path / "d.jsonl", [DIALOGUE, DIALOGUE]))
    assert_located(err.value, tmp_path / "d.jsonl", 2, "dialogue_id")


def test_inconsistent_gold_versions(tmp_path):
    bad = json.loads(json.dumps(DIALOGUE))
    del bad["turns"][1]["gold_state_24"]
    with pytest.raises(InputError, match="gold versions") as err:
        load_dialogues(write_jsonl(tmp_path / "d.jsonl", [bad]))
    assert_located(err.value, tmp_path / "d.jsonl", 1, "turns[1].gold_state")


def test_missing_predictions_for_a_dialogue(tmp_path):
    other = {**DIALOGUE, "dialogue_id": "SNG0002.json"}
    d = write_jsonl(tmp_path / "d.jsonl", [DIALOGUE, other])
    with pytest.raises(DataMismatchError, match="cover 1 of 2 dialogues; missing SNG0002") as err:
        load_predictions(_pred_file(tmp_path, PRED), load_dialogues(d))
    assert_located(err.value, tmp_path / "p.jsonl", None, None)  # the whole file falls short


def test_unknown_annotation_version(files):
    _, d = files
    with pytest.raises(OptionError, match=r"unknown annotation version '2.2'.*2\.1, 2\.4"):
        load_dialogues(d).resolve_version("2.2")


def test_hypothesis_score_out_of_range(files):
    tmp_path, d = files
    bad = json.loads(json.dumps(PRED))
    bad["turns"][0]["pred_hyps"] = {"hotel-pricerange": [["cheap", 1.5]]}
    with pytest.raises(InputError) as err:
        load_predictions(_pred_file(tmp_path, bad), load_dialogues(d))
    assert_located(err.value, tmp_path / "p.jsonl", 1, "turns[0].pred_hyps.hotel-pricerange[0]")


def test_pred_state_derived_from_turn_output_when_absent(files):
    tmp_path, d = files
    record = {"dialogue_id": "SNG0001.json", "turns": [
        {"turn_index": 0, "pred_turn_state": {"hotel-pricerange": "cheap"}},
        {"turn_index": 1, "pred_turn_state": {"hotel-area": "north", "hotel-name": "none"}}]}
    preds = load_predictions(_pred_file(tmp_path, record), load_dialogues(d))
    turns = preds.dialogues["sng0001"].turns
    assert turns[1].pred_state == {"hotel-pricerange": "cheap", "hotel-area": "north"}


def test_out_of_schema_slots_are_counted_not_fatal(files):
    tmp_path, d = files
    record = json.loads(json.dumps(PRED))
    record["turns"][1]["pred_state"]["taxi-day"] = "monday"
    preds = load_predictions(_pred_file(tmp_path, record), load_dialogues(d),
                             load_schema(FIXTURES / "schema_small.json"))
    assert preds.out_of_schema == {"taxi-day": 1}


def test_schema_errors(tmp_path):
    (tmp_path / "s.json").write_text('{"domains": [{"domain": "x", "slots": [{"name": 3}]}]}')
    with pytest.raises(InputError) as err:
        load_schema(tmp_path / "s.json")
    assert_located(err.value, tmp_path / "s.json", None, "domains[0].slots[0].name")
    (tmp_path / "broken.json").write_text('{"domains": [\n  }')
    with pytest.raises(InputError, match="invalid JSON") as err:
        load_schema(tmp_path / "broken.json")
    assert_located(err.value, tmp_path / "broken.json", 2, None)


def test_missing_file():
    with pytest.raises(InputError, match="file not found") as err:
        load_dialogues("/nonexistent/d.jsonl")
    assert_located(err.value, "/nonexistent/d.jsonl", None, None)


def test_id_list_file(tmp_path):
    (tmp_path / "ids.txt").write_text("# sample\nSNG0001\n\n")
    assert read_id_list(tmp_path / "ids.txt") == ["SNG0001"]


# --- the same errors through the CLI: message, non-zero exit, no traceback ----------------------

def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_reports_bad_input_without_traceback(files, capsys):
    tmp_path, d = files
    bad = json.loads(json.dumps(PRED))
    bad["turns"][0]["pred_state"] = {"hotel-stars": 4}
    p = _pred_file(tmp_path, bad)
    code, _, err = _cli(capsys, "metrics", "--schema", str(FIXTURES / "schema_small.json"),
                        "--dialogues", str(d), "--predictions", str(p))
    assert code == 2
    assert f"{p}:1: field 'turns[0].pred_state.hotel-stars'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("extra", "message"), [
    (["--gold", "2.2"], "unknown annotation version '2.2'"),
    (["--match", "fuzzy"], "unknown matching policy 'fuzzy'"),
    (["--alpha", "3"], "--alpha: Input should be less than or equal to 1"),
])
def test_cli_bad_options(files, capsys, extra, message):
    tmp_path, d = files
    p = _pred_file(tmp_path, PRED)
    code, _, err = _cli(capsys, "metrics", "--schema", str(FIXTURES / "schema_small.json"),
                        "--dialogues", str(d), "--predictions", str(p), *extra)
    assert code == 2
    assert message in err


def test_cli_table_and_json(files, capsys):
    tmp_path, d = files
    p1 = _pred_file(tmp_path, PRED, "a.jsonl")
    worse = json.loads(json.dumps(PRED))
    worse["system_name"] = "worse"
    worse["turns"][1]["pred_state"] = {"hotel-pricerange": "cheap"}
    p2 = _pred_file(tmp_path, worse, "b.jsonl")
    out_json = tmp_path / "m.json"
    code, out, _ = _cli(capsys, "metrics", "--schema", str(FIXTURES / "schema_small.json"),
                        "--dialogues", str(d), "--predictions", str(p1), str(p2),
                        "--gold", "2.4", "--json", str(out_json))
    assert code == 0
    assert "sys" in out and "worse" in out and "JGA" in out
    data = json.loads(out_json.read_text())
    assert data["options"]["gold"] == "2.4"
    assert data["options"]["match"] == "exact"
    assert [s["name"] for s in data["systems"]] == ["sys", "worse"]
    assert data["systems"][0]["metrics"]["jga"] == 100.0
    assert data["systems"][1]["metrics"]["jga"] == 50.0
    assert set(data["systems"][0]["per_domain"]) >= {"hotel", "taxi"}


def test_subset_skips_predictions_of_excluded_dialogues_but_not_unknown_ones(tmp_path):
    other = {**DIALOGUE, "dialogue_id": "SNG0002.json"}
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [DIALOGUE, other]))
    subset = dialogues.subset(["SNG0002"])
    preds = [{**PRED, "dialogue_id": "SNG0002.json"}, PRED]
    loaded = load_predictions(write_jsonl(tmp_path / "p.jsonl", preds), subset)
    assert list(loaded.dialogues) == ["sng0002"]
    unknown = write_jsonl(tmp_path / "u.jsonl", [*preds, {**PRED, "dialogue_id": "X9"}])
    with pytest.raises(DataMismatchError, match="unknown dialogue id 'X9'") as err:
        load_predictions(unknown, subset)
    assert_located(err.value, unknown, 3, "dialogue_id")
