"""Sampling designs for estimates: simple random, domain strata, whole dialogues, no gold."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from judge import InputError
from judge.analysis import draw_sample, load_sample, write_sample
from judge.analysis._sampling import allocate, design_strata
from judge.errors import DataMismatchError, OptionError

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "judge" / "data" / "formats"
                     / "sample.schema.json").read_text(encoding="utf-8"))


def rows_without_gold() -> list[dict]:
    """A run of a new domain: judge verdicts, no RULE verdicts, no gold."""
    rows = []
    for d in range(40):
        domain = ["hotel", "train", "taxi"][d % 3] if d < 36 else None
        for turn in range(3):
            pred = {f"{domain}-area": "x"} if domain else {}
            rows.append({"dialogue_id": f"N{d:02d}", "turn_index": turn,
                         "verdict": (d + turn) % 4 != 0, "rule": {},
                         "pred_turn_state": pred, "gold_turn_state": {}})
    rows[5]["verdict"] = None  # an error row: outside the population
    return rows


ROWS = rows_without_gold()


def test_simple_random_sample_needs_no_gold():
    sample = draw_sample(ROWS, n=30, design="random", seed=1)
    assert len(sample.turns) == 30 and sample.population == len(ROWS) - 1
    assert {t.stratum for t in sample.turns} == {"all turns"}
    assert all(t.gold is None and t.judge is None and t.rule is None for t in sample.turns)
    assert all(t.weight == pytest.approx((len(ROWS) - 1) / 30) for t in sample.turns)
    assert all((t.dialogue_id, t.turn_index) != ("N01", 2) for t in sample.turns)
    assert draw_sample(ROWS, n=30, design="random", seed=1).turns == sample.turns


def test_domain_strata_are_proportional_with_two_at_least():
    sample = draw_sample(ROWS, n=12, design="domain", seed=0)
    strata = sample.strata()
    assert set(strata) == {"domain=hotel", "domain=train", "domain=taxi", "domain=none"}
    assert strata["domain=none"]["size"] == 12  # four dialogues without a predicted slot
    assert all(s["sample"] >= 2 for s in strata.values())
    assert sum(s["sample"] for s in strata.values()) == 12
    assert sample.turns[0].allocation == "proportional"


def test_allocation_floor_takes_from_the_largest():
    assert allocate({"a": 90, "b": 5, "c": 5}, 10, "proportional") == {"a": 9, "b": 1, "c": 0}
    assert allocate({"a": 90, "b": 5, "c": 5}, 10, "proportional", minimum=2) == {
        "a": 6, "b": 2, "c": 2}
    assert allocate({"a": 90, "b": 1}, 10, "proportional", minimum=2) == {"a": 9, "b": 1}


def test_whole_dialogues_are_drawn_with_every_turn():
    sample = draw_sample(ROWS, n=6, design="random", unit="dialogue", seed=3)
    dialogues = Counter(t.dialogue_id for t in sample.turns)
    assert len(dialogues) == 6 and set(dialogues.values()) == {3}
    assert "N01" not in dialogues  # it holds an error turn: not in the population
    assert sample.population == 39
    assert {t.stratum_sample for t in sample.turns} == {6}
    assert sample.describe()["drawn_units"] == 6 and sample.describe()["drawn_turns"] == 18


def test_design_files_round_trip_and_validate(tmp_path):
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for design, unit in (("random", "turn"), ("domain", "turn"), ("domain", "dialogue")):
        sample = draw_sample(ROWS, n=8, design=design, unit=unit, seed=2)
        path = tmp_path / f"{design}-{unit}.jsonl"
        write_sample(sample, path)
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert all(not list(validator.iter_errors(r)) for r in records)
        assert {(r["design"], r["unit"]) for r in records} == {(design, unit)}
        assert load_sample(path).turns == sample.turns


def test_a_dialogue_file_with_a_wrong_count_or_split_dialogue_is_refused(tmp_path):
    sample = draw_sample(ROWS, n=4, design="random", unit="dialogue", seed=0)
    path = tmp_path / "s.jsonl"
    write_sample(sample, path)
    lines = path.read_text().splitlines()
    target = tmp_path / "short.jsonl"
    target.write_text("\n".join(lines[3:]) + "\n")  # one dialogue fewer than declared
    with pytest.raises(InputError, match="declares 4 drawn dialogues but the file holds 3"):
        load_sample(target)
    record = json.loads(lines[1])
    record["stratum"] = "elsewhere"
    target.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    with pytest.raises(InputError, match="drawn whole"):
        load_sample(target)
    record = json.loads(lines[1])
    record["design"] = "domain"
    target.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    with pytest.raises(InputError, match="design differs"):
        load_sample(target)


def test_design_options_are_checked():
    with pytest.raises(OptionError, match="give --gold"):
        draw_sample(ROWS, n=5, design="judge-rule")
    with pytest.raises(OptionError, match="stratifies turns"):
        design_strata(ROWS, design="judge-rule", unit="dialogue", gold="2.1")
    with pytest.raises(OptionError, match="unknown design"):
        draw_sample(ROWS, n=5, design="neyman")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="unknown unit"):
        design_strata(ROWS, design="random", unit="slot")  # type: ignore[arg-type]


def test_estimates_refuse_a_sample_of_another_run():
    from judge.analysis import sample_estimates

    sample = draw_sample(ROWS, n=10, design="domain", seed=0)
    labels = {t.key: 1 for t in sample.turns}
    changed = [dict(r) for r in ROWS]
    for r in changed:
        if r["dialogue_id"] == "N03":
            r["pred_turn_state"] = {"train-day": "x"}  # moves three turns between strata
    with pytest.raises(DataMismatchError, match="another run"):
        sample_estimates(sample, [changed], [labels])
