"""Rule sets: the shipped MultiWOZ file, loading errors, key canonicalisation, value rules."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from judge import InputError
from judge.data import Schema
from judge.errors import OptionError
from judge.method._rules import (
    canonical_key,
    check_value,
    default_rules,
    load_rules,
    packaged_rules_path,
    rules_json_schema,
)

from ..conftest import assert_located


def write_rules(tmp_path: Path, data: object, name: str = "custom.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def tiny_schema() -> Schema:
    return Schema.model_validate({"name": "tiny", "domains": [
        {"domain": "flight", "slots": [
            {"name": "flight-seats"},
            {"name": "flight-class", "is_categorical": True,
             "possible_values": ["economy", "business"]},
        ]},
    ]})


# --- the shipped file ---------------------------------------------------------------------------


def test_shipped_rules_validate_against_the_json_schema():
    schema = rules_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    data = json.loads(packaged_rules_path().read_text("utf-8"))
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(data))
    assert errors == []


def test_shipped_rules_content(rules):
    assert rules.name == "multiwoz"
    assert rules.slot_aliases["hotel-price range"] == "hotel-pricerange"
    assert rules.slot_aliases["train-arrive by"] == "train-arriveby"
    numeric = [r for r in rules.value_rules if r.kind == "numeric"]
    by_slot = {slot: (r.minimum, r.maximum) for r in numeric for slot in r.slots}
    assert by_slot == {
        "hotel-book people": (1, 19), "restaurant-book people": (1, 19),
        "train-book people": (1, 19), "hotel-book stay": (1, 19), "hotel-stars": (1, 5),
    }
    categorical = [r for r in rules.value_rules if r.kind == "categorical"]
    assert len(categorical) == 1
    assert categorical[0].enabled is False
    assert "gold" in categorical[0].note


def test_shipped_alias_targets_exist_in_real_schema_shape(mini_schema, rules):
    assert rules.referenced_slots <= set(mini_schema.slots)


# --- load errors --------------------------------------------------------------------------------


def test_load_error_names_file_and_field(tmp_path):
    path = write_rules(tmp_path, {"name": "x", "value_rules": [
        {"kind": "numeric", "slots": ["a-b"], "min": "one", "max": 3}]})
    with pytest.raises(InputError) as info:
        load_rules(path)
    assert_located(info.value, path, None, "value_rules[0].min")  # one JSON document


def test_load_error_unknown_rule_kind(tmp_path):
    path = write_rules(tmp_path, {"name": "x", "value_rules": [{"kind": "regex"}]})
    with pytest.raises(InputError) as info:
        load_rules(path)
    assert_located(info.value, path, None, "value_rules[0].kind")


def test_load_error_missing_numeric_bounds(tmp_path):
    path = write_rules(tmp_path, {"name": "x", "value_rules": [
        {"kind": "numeric", "slots": ["a-b"], "min": 1}]})
    with pytest.raises(InputError, match="'max' is a required property") as info:
        load_rules(path)
    assert_located(info.value, path, None, "value_rules[0]")


def test_load_error_alias_target_not_string(tmp_path):
    path = write_rules(tmp_path, {"name": "x", "slot_aliases": {"a-b c": 3},
                                  "value_rules": []})
    with pytest.raises(InputError) as info:
        load_rules(path)
    assert_located(info.value, path, None, "slot_aliases.a-b c")


def test_load_error_min_above_max(tmp_path):
    path = write_rules(tmp_path, {"name": "x", "value_rules": [
        {"kind": "numeric", "slots": ["a-b"], "min": 5, "max": 1}]})
    with pytest.raises(InputError) as info:
        load_rules(path)
    assert_located(info.value, path, None, "value_rules[0].min")


def test_load_error_bad_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n "value_rules": [}', encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_rules(bad)
    assert_located(info.value, bad, 2, None)
    with pytest.raises(InputError, match="not found") as info:
        load_rules(tmp_path / "absent.json")
    assert_located(info.value, tmp_path / "absent.json", None, None)


def test_load_normalises_alias_keys(tmp_path):
    path = write_rules(tmp_path, {"name": "x", "slot_aliases": {"Hotel - Cost_Band":
                                                                "hotel-pricerange"},
                                  "value_rules": []})
    assert load_rules(path).slot_aliases == {"hotel-cost band": "hotel-pricerange"}


# --- canonical_key ------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), [
    ("Hotel-Price Range", "hotel-pricerange"),
    ("restaurant-book_day", "restaurant-book day"),
    ("Train - leave at", "train-leaveat"),
    ("hotel-bookday", "hotel-book day"),
    ("HOTEL-AREA", "hotel-area"),
    ("  taxi-arrive   by ", "taxi-arriveby"),
    ("hotel-book_people", "hotel-book people"),
    ("hotel-phone", None),
    ("attraction-entrance fee", None),
    ("", None),
])
def test_canonical_key(mini_schema, rules, key, expected):
    assert canonical_key(key, mini_schema, rules) == expected


def test_canonical_key_uses_rule_aliases(tmp_path, mini_schema):
    path = write_rules(tmp_path, {"name": "x", "slot_aliases": {"hotel-cost": "hotel-pricerange"},
                                  "value_rules": []})
    custom = load_rules(path)
    assert canonical_key("Hotel-Cost", mini_schema, custom) == "hotel-pricerange"
    assert canonical_key("Hotel-Cost", mini_schema, default_rules(mini_schema)) is None


def test_canonical_key_space_insensitive_without_rules(mini_schema):
    empty = default_rules(tiny_schema())
    assert canonical_key("hotel-price range", mini_schema, empty) == "hotel-pricerange"
    assert canonical_key("train-leave at", mini_schema, empty) == "train-leaveat"


# --- check_value --------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "default_ok", "paper_ok"), [
    ("0", False, False),
    ("20", False, False),
    ("19", True, True),
    ("1", True, True),
    ("two", False, False),
    ("dontcare", True, False),
    ("none", True, False),
    (" 4 ", True, True),
])
def test_numeric_rule_people(mini_schema, rules, value, default_ok, paper_ok):
    for semantics, ok in (("default", default_ok), ("paper", paper_ok)):
        reason = check_value("hotel-book people", value, rules, mini_schema, semantics)
        assert (reason is None) is ok, (value, semantics, reason)


def test_numeric_rule_stars_and_reason_text(mini_schema, rules):
    assert check_value("hotel-stars", "5", rules, mini_schema, "default") is None
    reason = check_value("hotel-stars", "6", rules, mini_schema, "default")
    assert reason is not None
    assert "hotel-stars" in reason and "1..5" in reason
    # Slots without a rule accept anything.
    assert check_value("hotel-area", "6", rules, mini_schema, "paper") is None


def test_categorical_disabled_by_default(mini_schema, rules):
    assert check_value("hotel-pricerange", "high", rules, mini_schema, "default") is None


def test_categorical_enabled_in_custom_file(tmp_path, mini_schema):
    path = write_rules(tmp_path, {"name": "strict", "value_rules": [
        {"kind": "categorical", "enabled": True}]})
    strict = load_rules(path)
    reason = check_value("hotel-pricerange", "high", strict, mini_schema, "default")
    assert reason is not None and "possible values" in reason
    assert check_value("hotel-pricerange", "Cheap", strict, mini_schema, "default") is None
    assert check_value("hotel-pricerange", "dontcare", strict, mini_schema, "paper") is None
    assert check_value("hotel-pricerange", "none", strict, mini_schema, "default") is None
    # A slot without possible values cannot be checked.
    assert check_value("hotel-name", "anything", strict, mini_schema, "default") is None


def test_categorical_limited_to_listed_slots(tmp_path, mini_schema):
    path = write_rules(tmp_path, {"name": "strict", "value_rules": [
        {"kind": "categorical", "slots": ["hotel-parking"]}]})
    strict = load_rules(path)
    assert check_value("hotel-parking", "free", strict, mini_schema, "default") is not None
    assert check_value("hotel-pricerange", "high", strict, mini_schema, "default") is None


def test_check_value_rejects_unknown_semantics(mini_schema, rules):
    with pytest.raises(OptionError, match="semantics"):
        check_value("hotel-stars", "3", rules, mini_schema, "strict")


# --- default_rules ------------------------------------------------------------------------------


def test_default_rules_empty_for_other_schema():
    schema = tiny_schema()
    empty = default_rules(schema)
    assert empty.slot_aliases == {}
    assert empty.value_rules == ()
    assert check_value("flight-seats", "0", empty, schema, "paper") is None
    assert canonical_key("Flight - Seats", schema, empty) == "flight-seats"


def test_default_rules_for_multiwoz_schema(mini_schema):
    rules = default_rules(mini_schema)
    assert rules.name == "multiwoz"
    assert Path(rules.source).name == "multiwoz.json"
