"""``convert`` and the schema formats called directly on small files written here: what each
input kind produces, how version labels are handed out, how renamed slots add up, which
combinations are refused and with what message, and the SGD and ConvLab schema readers and
writers field by field. Written where mutation testing found changed lines no test noticed
(bench/mutation.py data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge import load_dialogues, load_schema
from judge._errors import DataMismatchError, OptionError
from judge.data import (
    Context,
    convert,
    detect_kind,
    merge_gold,
    open_source,
    write_conversion,
)
from judge.data._convert import _convlab, _sgd

from ..conftest import FIXTURES, write_jsonl

F = FIXTURES / "formats"
SCHEMA = FIXTURES / "schema_small.json"
DATA_JSON = F / "multiwoz21_data.json"  # MUL9001, SNG9002, PMUL9003; no version of its own


@pytest.fixture(scope="module")
def schema():
    return load_schema(SCHEMA)


def _alias_dialogues(path: Path, key: str, day: str) -> Path:
    """One dialogue of two turns, each gold state naming the book day by its alias."""
    return write_jsonl(path, [{"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "user": "u", "system": "", key: {"hotel-bookday": day}},
        {"turn_index": 1, "user": "v", "system": "s",
         key: {"hotel-bookday": day, "hotel-area": "north"}}]}])


# --- dialogues -------------------------------------------------------------------------------

def test_gold_versions_of_several_files_merge_and_renames_add_up(tmp_path, schema) -> None:
    first = _alias_dialogues(tmp_path / "a.jsonl", "gold_state_21", "monday")
    second = _alias_dialogues(tmp_path / "b.jsonl", "gold_state_24", "tuesday")
    result = convert([first, second], schema=schema)
    assert (result.kind, result.formats, result.count) == ("dialogues", ["native", "native"], 1)
    assert result.target.name == "native"
    # two turns per file name the alias: 2 + 2
    assert result.renamed == {"hotel-bookday -> hotel-book day": 4}
    (record,) = result.value
    assert record["turns"][1]["gold_state_21"] == {"hotel-book day": "monday",
                                                   "hotel-area": "north"}
    assert record["turns"][1]["gold_state_24"] == {"hotel-book day": "tuesday",
                                                   "hotel-area": "north"}
    kept = convert([first], schema=None)
    assert kept.renamed == {} and "hotel-bookday" in kept.value[0]["turns"][0]["gold_state_21"]


def test_version_labels_one_for_all_or_one_each(tmp_path) -> None:
    data = tmp_path / "data.json"  # a name that tells no version: the version is "gold"
    data.write_bytes(DATA_JSON.read_bytes())
    both = convert([data, data], versions=["2.1", "2.4"])
    assert both.formats == ["multiwoz", "multiwoz"] and both.count == 3
    turn = both.value[0]["turns"][0]
    assert turn["gold_state_21"] == turn["gold_state_24"] == {
        "hotel-area": "north", "hotel-pricerange": "cheap", "hotel-type": "guest house"}
    # one label is every input's: two files then carry the same version
    with pytest.raises(OptionError, match=r"both carry version\(s\) 2\.1; label them"):
        convert([data, data, data], versions=["2.1"])
    # no label: both are "gold"
    with pytest.raises(OptionError, match=r"both carry version\(s\) gold; label them"):
        convert([data, data])
    with pytest.raises(OptionError, match="--version gives 3 labels for 2 inputs"):
        convert([data, data], versions=["2.1", "2.2", "2.4"])
    single = convert([data], versions=["2.2"])
    assert list(single.value[0]["turns"][0]) == ["turn_index", "system", "user",
                                                 "gold_state_22"]
    # the file's own name tells 2.1 when no label is given
    assert "gold_state_21" in convert([DATA_JSON]).value[0]["turns"][0]


def test_an_id_list_keeps_its_dialogues(schema) -> None:
    dialogues = convert([DATA_JSON], ids=F / "testListFile.json")
    assert [r["dialogue_id"] for r in dialogues.value] == ["MUL9001.json", "SNG9002.json"]
    assert dialogues.count == 2
    predictions = convert([F / "expected_predictions.jsonl"], schema=schema,
                          ids=F / "testListFile.json")
    assert [r["dialogue_id"] for r in predictions.value] == ["MUL9001.json", "SNG9002.json"]
    assert predictions.count == 2 and predictions.formats == ["native"]


def test_merge_gold_names_what_does_not_line_up(tmp_path) -> None:
    left = load_dialogues(_alias_dialogues(tmp_path / "a.jsonl", "gold_state_21", "mon"))
    short = write_jsonl(tmp_path / "short.jsonl", [{"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "user": "u", "system": "", "gold_state_24": {}}]}])
    with pytest.raises(DataMismatchError) as caught:
        merge_gold([left, load_dialogues(short)])
    assert caught.value.path == str(short)
    assert "dialogue 'D1' has 1 turns here but 2 in" in str(caught.value)
    other = write_jsonl(tmp_path / "other.jsonl", [{"dialogue_id": "D2", "turns": [
        {"turn_index": 0, "user": "u", "system": "", "gold_state_24": {}}]}])
    with pytest.raises(DataMismatchError, match="dialogue 'D1' is missing") as missing:
        merge_gold([left, load_dialogues(other)])
    assert missing.value.path == str(other)
    twice = load_dialogues(_alias_dialogues(tmp_path / "c.jsonl", "gold_state_21", "x"))
    with pytest.raises(OptionError, match=r"carry version\(s\) 2\.1;"):
        merge_gold([left, twice])


# --- predictions -----------------------------------------------------------------------------

def test_predictions_without_dialogues_are_completed_and_renamed(tmp_path, schema) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "pred_state": {"hotel-bookday": "monday"}},
        {"turn_index": 1, "pred_state": {"hotel-bookday": "monday", "hotel-area": "x"}}]}])
    result = convert([path], schema=schema)
    assert (result.kind, result.formats, result.count) == ("predictions", ["native"], 1)
    assert result.renamed == {"hotel-bookday -> hotel-book day": 2}
    turns = result.value[0]["turns"]
    assert turns[1]["pred_state"] == {"hotel-book day": "monday", "hotel-area": "x"}
    assert convert([path]).renamed == {}


def test_predictions_checked_against_dialogues_into_another_format(schema) -> None:
    dialogues = load_dialogues(F / "expected_dialogues.jsonl", schema=schema)
    result = convert([F / "expected_predictions.jsonl"], to="trade", schema=schema,
                     dialogues=dialogues)
    assert result.target.name == "trade" and result.count == 2
    # TRADE's dump holds gold beside the prediction: it comes from the dialogues given
    first = result.value["MUL9001.json"]["0"]
    assert sorted(first["turn_belief"]) == ["hotel-area-north", "hotel-pricerange-cheap",
                                            "hotel-type-guest house"]
    assert sorted(first["pred_bs_ptr"]) == sorted(first["turn_belief"])


def test_refused_combinations(schema) -> None:
    with pytest.raises(OptionError, match="convert needs at least one input file"):
        convert([])
    with pytest.raises(OptionError, match="format mwzeval cannot hold dialogues"):
        convert([DATA_JSON], to="mwzeval")
    with pytest.raises(OptionError, match="format sgd cannot hold schema"):
        convert([SCHEMA], to="sgd")
    with pytest.raises(OptionError,
                       match=r"one predictions input at a time \(several inputs merge"):
        convert([F / "expected_predictions.jsonl"] * 2)
    with pytest.raises(OptionError, match="one schema input at a time"):
        convert([SCHEMA, SCHEMA])


def test_write_conversion_lines_or_one_document(tmp_path, schema) -> None:
    native = convert([F / "expected_predictions.jsonl"], schema=schema)
    write_conversion(native, tmp_path / "p.jsonl")
    lines = (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["dialogue_id"] for line in lines] == ["MUL9001.json",
                                                                   "SNG9002.json"]
    services = convert([SCHEMA], to="sgd-schema")
    write_conversion(services, tmp_path / "s.json")
    written = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert [s["service_name"] for s in written] == ["hotel", "train", "restaurant",
                                                    "attraction", "taxi"]


# --- schemas ---------------------------------------------------------------------------------

def test_a_native_schema_converts_to_itself_without_empty_fields() -> None:
    result = convert([SCHEMA])
    assert (result.kind, result.formats, result.count) == ("schema", ["native-schema"], 30)
    assert result.target.name == "native-schema"
    assert result.value["name"] == "test schema (30 slots, MultiWOZ-shaped)"
    slot = result.value["domains"][0]["slots"][0]
    assert slot["name"] == "hotel-pricerange" and "value_format" not in slot
    assert slot["possible_values"] == ["cheap", "moderate", "expensive"]
    assert detect_kind(SCHEMA) == "schema"
    assert detect_kind(F / "expected_predictions.jsonl") == "predictions"
    assert detect_kind(DATA_JSON) == "dialogues"


SGD_SCHEMA = [
    {"service_name": "Restaurants_1", "description": "Find restaurants",
     "slots": [{"name": "city", "description": "City", "is_categorical": False},
               {"name": "price_range", "description": "Price", "is_categorical": True,
                "possible_values": ["cheap", 2]}],
     "intents": [{"name": "FindRestaurants"}]},
    {"service_name": "Restaurants_2", "slots": [{"name": "city"}]},
    {"service_name": "Buses_1", "slots": [{"name": "bus-leaving_time", "description": "L"}]},
]


def test_sgd_schema_read_field_by_field(tmp_path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SGD_SCHEMA), encoding="utf-8")
    record = _sgd.read_schema(open_source(path), Context())
    assert record["name"] == "converted from schema.json"
    assert record["multi_value_separator"] == "|"
    # two numbered services of one name keep their numbers; a single one drops it
    assert [d["domain"] for d in record["domains"]] == ["restaurants_1", "restaurants_2",
                                                        "buses"]
    first = record["domains"][0]
    assert first == {"domain": "restaurants_1", "service_name": "Restaurants_1",
                     "description": "Find restaurants",
                     "slots": [{"name": "restaurants_1-city", "domain": "restaurants_1",
                                "slot": "city", "description": "City",
                                "is_categorical": False},
                               {"name": "restaurants_1-price_range",
                                "domain": "restaurants_1", "slot": "price_range",
                                "description": "Price", "is_categorical": True,
                                "possible_values": ["cheap", "2"]}],
                     "intents": [{"name": "FindRestaurants"}]}
    assert record["domains"][1] == {
        "domain": "restaurants_2", "service_name": "Restaurants_2", "description": "",
        "slots": [{"name": "restaurants_2-city", "domain": "restaurants_2", "slot": "city",
                   "description": "", "is_categorical": False}]}
    # a name that already carries its domain (MultiWOZ 2.2) is kept as written
    assert record["domains"][2]["slots"][0]["name"] == "bus-leaving_time"
    assert record["domains"][2]["slots"][0]["slot"] == "leaving_time"


def test_sgd_schema_refuses_a_service_or_slot_without_its_fields(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"service_name": "A_1", "slots": [{"name": "x"}, {}]}]),
                    encoding="utf-8")
    with pytest.raises(Exception, match="expected a slot with a 'name'") as caught:
        _sgd.read_schema(open_source(path), Context())
    assert caught.value.field == "[0].slots[1]"
    path.write_text(json.dumps([{"service_name": "A_1", "slots": []}, {"service_name": "B"}]),
                    encoding="utf-8")
    with pytest.raises(Exception, match="expected a service with a 'slots' list") as service:
        _sgd.read_schema(open_source(path), Context())
    assert service.value.field == "[1]"


def test_sgd_schema_written_field_by_field(schema) -> None:
    record = {"domains": [
        {"domain": "hotel", "description": "Hotels", "slots": [
            {"name": "hotel-area", "description": "Area", "is_categorical": True,
             "possible_values": ["north"]},
            {"name": "hotel-name"}]},
        {"domain": "bus", "service_name": "Bus_3", "intents": [{"name": "Go"}],
         "slots": []}]}
    assert _sgd.write_schema(record, Context()) == [
        {"service_name": "hotel", "description": "Hotels", "intents": [], "slots": [
            {"name": "area", "description": "Area", "is_categorical": True,
             "possible_values": ["north"]},
            {"name": "name", "description": "", "is_categorical": False,
             "possible_values": []}]},
        {"service_name": "Bus_3", "description": "", "slots": [],
         "intents": [{"name": "Go"}]}]
    # MultiWOZ 2.2's schema keeps the domain in each slot's name
    assert _sgd.write_schema(record, Context(), sgd=False)[0]["slots"][0]["name"] == (
        "hotel-area")


def test_convlab_ontology_read_and_written(tmp_path) -> None:
    ontology = {"domains": {
        "hotel": {"description": "Hotels", "slots": {
            "area": {"description": "Area", "is_categorical": True,
                     "possible_values": ["north", 3]},
            "name": {"description": "Name", "is_categorical": False,
                     "possible_values": ["ignored"]},
            "odd": "not an object"}},
        "general": {"description": "No slots", "slots": {}}}}
    path = tmp_path / "ontology.json"
    path.write_text(json.dumps(ontology), encoding="utf-8")
    record = _convlab.read_schema(open_source(path), Context())
    assert record == {"name": "converted from ontology.json", "multi_value_separator": "|",
                      "domains": [{"domain": "hotel", "description": "Hotels", "slots": [
                          {"name": "hotel-area", "domain": "hotel", "slot": "area",
                           "description": "Area", "is_categorical": True,
                           "possible_values": ["north", "3"]},
                          {"name": "hotel-name", "domain": "hotel", "slot": "name",
                           "description": "Name", "is_categorical": False},
                          {"name": "hotel-odd", "domain": "hotel", "slot": "odd",
                           "description": "", "is_categorical": False}]}]}
    assert _convlab.write_schema(record, Context()) == {
        "domains": {"hotel": {"description": "Hotels", "slots": {
            "area": {"description": "Area", "is_categorical": True,
                     "possible_values": ["north", "3"]},
            "name": {"description": "Name", "is_categorical": False, "possible_values": []},
            "odd": {"description": "", "is_categorical": False, "possible_values": []}}}},
        "intents": {}, "state": {"hotel": {"area": "", "name": "", "odd": ""}},
        "dialogue_acts": {"categorical": [], "non-categorical": [], "binary": []}}
    path.write_text(json.dumps({"domains": {"hotel": {"slots": []}}}), encoding="utf-8")
    with pytest.raises(Exception, match="expected 'slots' as an object") as caught:
        _convlab.read_schema(open_source(path), Context())
    assert caught.value.field == "domains.hotel"
