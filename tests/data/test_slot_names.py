"""Predicted slot names outside the schema: named with their turn counts and the closest
schema slot, by the library and by every command that reads predictions (a warning, never a
refusal unless ``validate --strict`` asks for it)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from judge.cli import main
from judge.data import (
    closest_slot,
    describe_out_of_schema,
    load_schema,
    out_of_schema_slots,
    predicted_slot_names,
)
from tests.conftest import EXAMPLES, predictions_with_slot_errors


def _typo_predictions(tmp_path):
    """The example predictions with ``hotel-pricerange`` misspelt ``hotel-pricerang`` and one
    turn's ``train-leaveat`` named ``train-book time`` (a slot the schema lacks)."""
    lines = (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8")
    assert "hotel-pricerange" in lines
    path = predictions_with_slot_errors(tmp_path / "typo.jsonl")
    turns = sum(1 for line in lines.splitlines() for turn in json.loads(line)["turns"]
                if "hotel-pricerange" in (turn.get("pred_state") or {}))
    return path, turns


def test_names_counts_and_the_closest_schema_slot(tmp_path):
    schema = load_schema(EXAMPLES / "schema.json")
    assert closest_slot("hotel-pricerang", schema) == "hotel-pricerange"
    assert closest_slot("Hotel-Area", schema) == "hotel-area"
    assert closest_slot("zzzzzz", schema) is None  # nothing close: no suggestion at all
    path, turns = _typo_predictions(tmp_path)
    counts = predicted_slot_names(path)
    outside = out_of_schema_slots(counts, schema)
    assert [(s.name, s.turns, s.suggestion) for s in outside] == [
        ("hotel-pricerang", turns, "hotel-pricerange"), ("train-book time", 1,
                                                         "restaurant-book time")]
    sentence = describe_out_of_schema(outside)
    assert sentence.startswith("2 predicted slot names outside the schema: hotel-pricerang (")
    assert f"({turns} turns; closest schema slot: hotel-pricerange)" in sentence
    assert "train-book time (1 turn;" in sentence  # singular for one
    # another spelling that the loaders rename to a schema slot is not outside it
    assert out_of_schema_slots(Counter({"hotel-price range": 2}), schema) == []
    assert describe_out_of_schema([]) is None


def test_validate_warns_with_a_schema_and_fails_only_when_strict(tmp_path, capsys):
    path, turns = _typo_predictions(tmp_path)
    assert main(["validate", "predictions", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal width
    assert "valid predictions file" in out and "add --schema S" in out
    schema = str(EXAMPLES / "schema.json")
    assert main(["validate", "predictions", str(path), "--schema", schema]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "hotel-pricerang" in err and "hotel-pricerange" in err
    assert f"{turns} turns" in err
    assert main(["validate", "predictions", str(path), "--schema", schema, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "hotel-pricerang" in err and "1 problem in" in err
    assert main(["validate", "dialogues", str(EXAMPLES / "dialogues.jsonl"),
                 "--schema", schema]) == 2  # a schema only checks predictions: said, not ignored
    assert "does not apply" in capsys.readouterr().err


def test_evaluate_and_metrics_name_the_slots_without_changing_the_exit_status(tmp_path,
                                                                               capsys):
    path, _ = _typo_predictions(tmp_path)
    data = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(path)]
    assert main(["evaluate", *data, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "hotel-pricerang" in err and "closest schema slot: hotel-pricerange" in err
    assert main(["metrics", *data]) == 0
    captured = capsys.readouterr()
    assert "hotel-pricerang" in captured.out  # in its report, once
    assert "hotel-pricerang" not in captured.err


@pytest.mark.parametrize("name", ["predictions.jsonl", "predictions-weak.jsonl"])
def test_the_example_predictions_use_only_schema_slots(name):
    """The project's own examples model what a user should send: every predicted slot name is
    one the example schema knows (an earlier example predicted ``train-book time``)."""
    schema = load_schema(EXAMPLES / "schema.json")
    counts = predicted_slot_names(EXAMPLES / name)
    assert counts and out_of_schema_slots(counts, schema) == []


def _rewritten(tmp_path, name, change):
    """The example predictions with ``change(record)`` applied to each record."""
    records = [json.loads(line) for line in
               (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    for record in records:
        change(record)
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _plant_in_first_turn_state(record):
    record["turns"][0]["pred_turn_state"]["hotel-pricerang"] = "cheap"


def _turn_states_only(record):
    for turn in record["turns"]:
        turn.pop("pred_state", None)
    _plant_in_first_turn_state(record)


@pytest.mark.parametrize("change", [_turn_states_only, _plant_in_first_turn_state],
                         ids=["turn-states-only", "only-in-pred_turn_state"])
def test_validate_finds_names_outside_the_schema_in_turn_states(change, tmp_path, capsys):
    """A file of turn states only, and a name that only ``pred_turn_state`` holds (what the
    judge reads): validate names them, as metrics does, with the same turn count."""
    path = _rewritten(tmp_path, "turns.jsonl", change)
    schema = str(EXAMPLES / "schema.json")
    assert main(["validate", "predictions", str(path), "--schema", schema, "--strict"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "hotel-pricerang (" in err and "closest schema slot: hotel-pricerange" in err
    turns = int(err.split("hotel-pricerang (")[1].split(" turn")[0])
    assert turns >= 1
    assert main(["metrics", "--schema", schema, "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                 "--predictions", str(path), "--gold", "2.4"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"1 predicted slot name outside the schema in {turns} turns" in out
