"""Every converter on its fixture: reads what the format's documentation describes, and
round-trips (format → native → format → native gives the same records); on the shared data,
native → format → native is lossless for the states."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from judge import InputError, load_dialogues, load_predictions, load_schema
from judge.data import Context, convert, get_format, merge_gold, write_format

from ..conftest import FIXTURES, shared_path

F = FIXTURES / "formats"
SCHEMA = FIXTURES / "schema_small.json"


def _gold(dialogue_set, version=None):
    version = version or dialogue_set.versions[0]
    return [[t.gold_states[version] for t in d.turns] for d in dialogue_set.dialogues]


def _pred(prediction_set, dialogue_set):
    return [[t.pred_state for t in prediction_set.for_dialogue(d).turns]
            for d in dialogue_set.dialogues]


@pytest.fixture(scope="module")
def schema():
    return load_schema(SCHEMA)


@pytest.fixture(scope="module")
def expected(schema):
    return load_dialogues(F / "expected_dialogues.jsonl", schema=schema)


DIALOGUE_FIXTURES = [
    ("multiwoz21_data.json", "multiwoz"),
    ("multiwoz22_dialogues.json", "multiwoz22"),
    ("convlab_dialogues.json", "convlab"),
    ("trade_all_prediction.json", "trade"),
    ("somdst_preds_0.json", "somdst"),
    ("trippy_pred_res.test.json", "trippy"),
    ("turns_dialogues.jsonl", "turns"),
]
PREDICTION_FIXTURES = [
    ("mwzeval_predictions.json", "mwzeval"),
    ("convlab_predictions.json", "convlab-predictions"),
    ("trade_all_prediction.json", "trade"),
    ("somdst_preds_0.json", "somdst"),
    ("trippy_pred_res.test.json", "trippy"),
    ("turns_predictions.jsonl", "turns"),
    ("expected_predictions.jsonl", "native"),
]


@pytest.mark.parametrize(("name", "fmt"), DIALOGUE_FIXTURES)
def test_dialogue_fixture_reads_as_documented(name, fmt, schema, expected):
    loaded = load_dialogues(F / name, schema=schema, version="2.1")
    assert loaded.source_format == fmt
    got, want = _gold(loaded), _gold(expected)
    if fmt == "multiwoz22":  # 2.2 lists two spellings of one value: they become alternatives
        assert got[0][2]["taxi-destination"] == "saint johns college|saint john's college"
        got[0][2]["taxi-destination"] = "saint johns college"
    loaded_ids = [d.dialogue_id for d in loaded.dialogues][:2]
    assert loaded_ids == ["MUL9001.json", "SNG9002.json"]
    assert got[:2] == want
    if loaded.dialogues[0].turns[0].user:  # formats with text keep it
        assert [t.user for t in loaded.dialogues[0].turns] == [
            t.user for t in expected.dialogues[0].turns]


@pytest.mark.parametrize(("name", "fmt"), PREDICTION_FIXTURES)
def test_prediction_fixture_reads_as_documented(name, fmt, schema, expected):
    loaded = load_predictions(F / name, expected, schema)
    assert loaded.source_format == fmt
    native = load_predictions(F / "expected_predictions.jsonl", expected, schema)
    assert _pred(loaded, expected) == _pred(native, expected)
    assert not loaded.out_of_schema


def test_multiwoz_data_json_details(schema):
    loaded = load_dialogues(F / "multiwoz21_data.json", schema=schema)
    assert loaded.versions == ("2.1",)  # from the file name
    first = loaded.dialogues[0]
    assert first.turns[1].system == "Acorn Guest House fits. Shall I book it?"
    assert first.final_system == "Your taxi is booked."  # the closing system utterance is kept
    # "dont care" spellings become dontcare; "not mentioned" and "" are no value
    assert loaded.dialogues[1].turns[1].gold_states["2.1"]["train-leaveat"] == "dontcare"
    test_ids = load_dialogues(F / "multiwoz21_data.json", version="2.4").subset(
        ["MUL9001.json", "SNG9002.json"])
    assert test_ids.versions == ("2.4",) and len(test_ids) == 2


def test_multiwoz22_spans_and_names(schema):
    loaded = load_dialogues(F / "multiwoz22_dialogues.json", schema=schema)
    turn = loaded.dialogues[0].turns[2]
    assert turn.spans[-2] == {"speaker": "user", "slot": "taxi-departure",
                              "value": ["acorn guest house"], "copy_from": "hotel-name"}
    assert turn.spans[-1]["value"] == "Saint John's College"
    assert loaded.dialogues[0].turns[1].spans[0] == {
        "speaker": "system", "slot": "hotel-name", "start": 0, "end": 17,
        "value": "Acorn Guest House"}
    # 2.2 names are counted and reported, and map to the schema's names everywhere
    assert loaded.renamed["hotel-bookday -> hotel-book day"] == 2


def test_sgd_dialogues_schema_and_predictions():
    schema = load_schema(F / "sgd_schema.json")
    assert schema.source_format == "sgd-schema"
    assert schema.domain_names == ("libraries", "ferries")
    assert schema.slots["ferries-passengers"].possible_values == ["1", "2", "3", "4"]
    assert schema.domains[0].intents[0]["name"] == "FindLibrary"
    dialogues = load_dialogues(F / "sgd_dialogues.json", schema=schema)
    first, second = dialogues.dialogues
    assert first.turns[2].gold_states["gold"]["libraries-date"] == "tomorrow|March 3rd"
    assert first.turns[1].spans[0] == {"speaker": "system", "slot": "libraries-library_name",
                                       "start": 0, "end": 19, "value": "Willow Glen Library"}
    assert first.turns[1].active_intent == "ReserveRoom"
    # a turn framing only Ferries_1 keeps the library's state (SGD annotates per service)
    assert second.turns[1].gold_states["gold"]["libraries-city"] == "Oakland"
    predictions = load_predictions(F / "sgd_predictions.json", dialogues, schema)
    assert predictions.for_dialogue(second).turns[2].pred_state["ferries-destination"] == (
        "San Fransisco")  # a prediction keeps its first value


def test_sgd_span_outside_utterance_is_named(tmp_path):
    data = json.loads((F / "sgd_dialogues.json").read_text())
    data[0]["turns"][0]["frames"][0]["slots"][0]["exclusive_end"] = 99
    bad = tmp_path / "dialogues.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load_dialogues(bad)
    assert err.value.field == "[0].turns[0].frames[0].slots[0]"
    assert "outside the utterance" in str(err.value)


@pytest.mark.parametrize("name", ["sgd_schema.json", "multiwoz22_schema.json",
                                  "convlab_ontology.json"])
def test_schema_files_convert(name):
    schema = load_schema(F / name)
    assert schema.source_format != "native-schema"
    assert all("-" in slot for slot in schema.slot_names)


def test_convlab_samples_follow_the_dialogues_in_order(schema, expected):
    loaded = load_predictions(F / "convlab_predictions.json", expected, schema)
    assert [d.dialogue_id for d in loaded.dialogues.values()] == ["MUL9001.json",
                                                                 "SNG9002.json"]
    with pytest.raises(InputError, match="follow it in order"):
        load_predictions(F / "convlab_predictions.json", expected.subset(["MUL9001.json"]),
                         schema)


# --- round trips ----------------------------------------------------------------------------


def _roundtrip(kind, records, fmt_name, tmp_path, *, schema, gold=None, suffix=".json"):
    fmt = get_format(fmt_name)
    value = fmt.writers[kind](records, Context(schema=schema), gold=gold)
    path = tmp_path / f"{fmt_name}{'.jsonl' if fmt.layout == 'jsonl' else suffix}"
    write_format(value, fmt, path)
    return path


DIALOGUE_TARGETS = ["native", "multiwoz", "multiwoz22", "sgd", "convlab", "turns"]
PREDICTION_TARGETS = ["native", "mwzeval", "convlab-predictions", "trade", "somdst", "trippy",
                      "turns", "sgd", "multiwoz22"]


@pytest.mark.parametrize(("name", "_fmt"), DIALOGUE_FIXTURES)
@pytest.mark.parametrize("target", DIALOGUE_TARGETS)
def test_dialogues_roundtrip(name, _fmt, target, schema, tmp_path):
    first = load_dialogues(F / name, schema=schema, version="2.1")
    records = [d.to_record() for d in first.dialogues]
    path = _roundtrip("dialogues", records, target, tmp_path, schema=schema)
    again = load_dialogues(path, schema=schema, version="2.1")
    assert again.source_format == ("native" if target == "native" else target)
    assert _gold(again) == _gold(first)
    assert [[t.user for t in d.turns] for d in again.dialogues] == [
        [t.user for t in d.turns] for d in first.dialogues]
    if target in ("native", "multiwoz22", "sgd"):  # these keep spans and closing utterances
        def kept(record):
            return (record.get("final_system"),
                    [sorted(map(json.dumps, t.get("spans", []))) for t in record["turns"]])

        assert [kept(d.to_record()) for d in again.dialogues] == [kept(r) for r in records]


@pytest.mark.parametrize(("name", "_fmt"), PREDICTION_FIXTURES)
@pytest.mark.parametrize("target", PREDICTION_TARGETS)
def test_predictions_roundtrip(name, _fmt, target, schema, expected, tmp_path):
    first = load_predictions(F / name, expected, schema)
    records = [first.for_dialogue(d).to_record() for d in expected.dialogues]
    gold = [d.to_record() for d in expected.dialogues]
    path = _roundtrip("predictions", records, target, tmp_path, schema=schema, gold=gold)
    again = load_predictions(path, expected, schema)
    assert _pred(again, expected) == _pred(first, expected)


def test_multiwoz22_roundtrip_keeps_everything(schema, tmp_path):
    first = load_dialogues(F / "multiwoz22_dialogues.json")
    records = [d.to_record() for d in first.dialogues]
    path = _roundtrip("dialogues", records, "multiwoz22", tmp_path, schema=None)
    assert [d.to_record() for d in load_dialogues(path).dialogues] == records


def test_sgd_roundtrip_keeps_everything(tmp_path):
    schema = load_schema(F / "sgd_schema.json")
    first = load_dialogues(F / "sgd_dialogues.json", schema=schema)
    records = [d.to_record() for d in first.dialogues]
    path = _roundtrip("dialogues", records, "sgd", tmp_path, schema=schema)
    again = load_dialogues(path, schema=schema)
    assert [d.to_record() for d in again.dialogues] == records
    schema_path = _roundtrip("schema", schema.model_dump(mode="json"), "sgd-schema", tmp_path,
                             schema=schema)
    assert load_schema(schema_path).slot_names == schema.slot_names


def test_convert_merges_versions(schema, tmp_path):
    result = convert([F / "multiwoz21_data.json", F / "multiwoz22_dialogues.json"],
                     versions=["2.1", "2.2"], schema=schema, ids=F / "testListFile.json")
    assert result.kind == "dialogues" and result.count == 2
    assert result.formats == ["multiwoz", "multiwoz22"]
    out = tmp_path / "both.jsonl"
    write_format(result.value, result.target, out)
    both = load_dialogues(out)
    assert both.versions == ("2.1", "2.2")
    sets = [load_dialogues(F / "expected_dialogues.jsonl"),
            load_dialogues(F / "expected_dialogues.jsonl")]
    with pytest.raises(Exception, match="both carry version"):
        merge_gold(sets)


# --- the shared data -------------------------------------------------------------------------


def _shared():
    schema = load_schema(shared_path("multiwoz", "schema.json"))
    dialogues = load_dialogues(shared_path("multiwoz", "dialogues.jsonl.gz"), schema=schema)
    ids = shared_path("multiwoz", "sampled_dialogue_ids.txt").read_text().split()[:40]
    return schema, dialogues.subset(ids)


@pytest.mark.parametrize("target", ["multiwoz", "multiwoz22", "convlab", "turns"])
def test_shared_dialogues_roundtrip(target, tmp_path):
    schema, dialogues = _shared()
    records = [d.to_record() for d in dialogues.dialogues]
    for version in dialogues.versions:
        path = _roundtrip("dialogues", [_one_version(r, version) for r in records], target,
                          tmp_path, schema=schema)
        again = load_dialogues(path, schema=schema, version=version)
        assert _gold(again) == _gold(dialogues, version)


def _one_version(record, version):
    key = "gold_state_" + version.replace(".", "")
    out = dict(record)
    out["turns"] = [{k: v for k, v in t.items() if not k.startswith("gold_") or k == key}
                    for t in record["turns"]]
    return out


@pytest.mark.parametrize("target", ["mwzeval", "trade", "somdst", "trippy", "convlab-predictions",
                                    "multiwoz22"])
def test_shared_predictions_roundtrip(target, tmp_path):
    schema, dialogues = _shared()
    predictions = load_predictions(shared_path("multiwoz", "predictions", "da.jsonl.gz"),
                                   dialogues, schema)
    records = [predictions.for_dialogue(d).to_record() for d in dialogues.dialogues]
    path = _roundtrip("predictions", records, target, tmp_path, schema=schema,
                      gold=[d.to_record() for d in dialogues.dialogues])
    again = load_predictions(path, dialogues, schema)
    before = _pred(predictions, dialogues)
    if target == "trippy":
        # TripPy lists a value for every schema slot: out-of-schema names drop out
        before = [[{s: v for s, v in st.items() if s in schema.slots} for st in d]
                  for d in before]
    assert _pred(again, dialogues) == before


def test_shared_sgd_example_roundtrip(tmp_path):
    schema = load_schema(shared_path("sgd_example", "schema.json"))
    dialogues = load_dialogues(shared_path("sgd_example", "dialogues.jsonl.gz"), schema=schema)
    records = [d.to_record() for d in dialogues.dialogues]
    path = _roundtrip("dialogues", records, "sgd", tmp_path, schema=schema)
    again = load_dialogues(path, schema=schema)
    assert _gold(again) == _gold(dialogues)
    schema_path = _roundtrip("schema", schema.model_dump(mode="json"), "sgd-schema", tmp_path,
                             schema=schema)
    assert load_schema(schema_path).slot_names == schema.slot_names
    with gzip.open(shared_path("sgd_example", "dialogues.jsonl.gz"), "rt") as handle:
        assert sum(1 for _ in handle) == len(again)


def test_stderr_note_and_schema_names(tmp_path, capsys):
    from judge.cli import main

    out = tmp_path / "m.json"
    code = main(["metrics", "--schema", str(SCHEMA), "--dialogues",
                 str(F / "convlab_dialogues.json"), "--predictions",
                 str(F / "mwzeval_predictions.json"), "--json", str(out)])
    assert code == 0
    err = capsys.readouterr().err
    assert "read " + str(F / "mwzeval_predictions.json") + " as mwzeval" in err
    assert "converted on the fly" in err
    assert "slot names renamed to the schema's (hotel-price range -> hotel-pricerange" in err
    report = json.loads(out.read_text())
    assert report["systems"][0]["inputs"]["out_of_schema_slots"] == {}
    assert Path(out).exists()
