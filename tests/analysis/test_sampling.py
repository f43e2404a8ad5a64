"""Stratified sampling of turns for human labels, and the population estimates it allows."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from judge import InputError
from judge.analysis import (
    HumanLabel,
    HumanLabels,
    agreement_report,
    draw_sample,
    load_sample,
    write_sample,
)
from judge.analysis._sampling import allocate, turn_domain
from judge.errors import DataMismatchError, OptionError

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "judge" / "data" / "formats"
                     / "sample.schema.json").read_text(encoding="utf-8"))


def row(dialogue: str, turn: int, judge: bool | None, rule: bool | None,
        pred: dict | None = None) -> dict:
    return {"dialogue_id": dialogue, "turn_index": turn, "verdict": judge,
            "rule": {"2.1": rule, "2.4": rule}, "pred_turn_state": pred or {},
            "gold_turn_state": {"2.1": {}, "2.4": {}}}


def population(counts: dict[tuple[bool, bool], int]) -> list[dict]:
    """Rows with the given number of turns per (judge, RULE) cell, two turns per dialogue."""
    rows, n = [], 0
    for (judge, rule), count in counts.items():
        for _ in range(count):
            rows.append(row(f"D{n // 2:04d}", n % 2, judge, rule))
            n += 1
    return rows


ROWS = population({(True, True): 80, (False, False): 10, (True, False): 6, (False, True): 4})


def test_allocation_equal_and_proportional():
    sizes = {"a": 80, "b": 10, "c": 6, "d": 4}
    # water-filling from the smallest stratum: d takes 4 of 20/4, c 5 of 16/3, b 5 of 11/2,
    # a the remaining 6
    assert allocate(sizes, 20, "equal") == {"a": 6, "b": 5, "c": 5, "d": 4}
    # small strata are taken whole, the rest share what is left
    assert allocate(sizes, 40, "equal") == {"a": 20, "b": 10, "c": 6, "d": 4}
    assert allocate(sizes, 20, "proportional") == {"a": 16, "b": 2, "c": 1, "d": 1}
    assert allocate(sizes, 500, "equal") == sizes  # more than there is: everything


def test_draw_is_stratified_weighted_and_reproducible():
    sample = draw_sample(ROWS, n=20, gold="21", seed=4, design="judge-rule")
    assert len(sample.turns) == 20 and sample.gold == "2.1" and sample.population == 100
    strata = sample.strata()
    assert {h: (s["size"], s["sample"]) for h, s in strata.items()} == {
        "judge=correct, RULE-2.1=correct": (80, 6),
        "judge=incorrect, RULE-2.1=incorrect": (10, 5),
        "judge=correct, RULE-2.1=incorrect": (6, 5),
        "judge=incorrect, RULE-2.1=correct": (4, 4)}
    for turn in sample.turns:
        assert turn.weight == pytest.approx(turn.stratum_size / turn.stratum_sample)
        assert turn.inclusion_probability == pytest.approx(1 / turn.weight)
    # the weights add up to the population
    assert sum(t.weight for t in sample.turns) == pytest.approx(100)
    again = draw_sample(ROWS, n=20, gold="2.1", seed=4, design="judge-rule")
    assert again.turns == sample.turns
    other = draw_sample(ROWS, n=20, gold="2.1", seed=5, design="judge-rule")
    assert [t.key for t in other.turns] != [t.key for t in sample.turns]


def test_error_rows_are_outside_the_population_and_domains_stratify():
    rows = [*ROWS[:10], row("E0", 0, None, True),
            row("H0", 0, True, True, {"hotel-area": "north"}),
            row("H0", 1, True, True, {"hotel-area": "north", "taxi-leaveat": "10:00"})]
    sample = draw_sample(rows, n=50, gold="2.1", by_domain=True, design="judge-rule")
    assert sample.population == 12
    assert {t.domain for t in sample.turns} == {"none", "hotel", "several"}
    assert turn_domain(rows[-1], "2.1") == "several"


def test_sample_options_are_checked():
    with pytest.raises(OptionError, match=r"it has: 2\.1, 2\.4"):
        draw_sample(ROWS, n=5, gold="3.0")
    with pytest.raises(OptionError, match="--n"):
        draw_sample(ROWS, n=0, gold="2.1")
    with pytest.raises(OptionError, match="allocation"):
        draw_sample(ROWS, n=5, gold="2.1", allocation="neyman")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="no turn"):
        draw_sample([row("D", 0, None, True)], n=5, gold="2.1", design="judge-rule")


def test_sample_file_round_trip_schema_and_checks(tmp_path):
    sample = draw_sample(ROWS, n=12, gold="2.1", seed=1, design="judge-rule")
    path = tmp_path / "sample.jsonl"
    assert write_sample(sample, path) == 12
    validator = jsonschema.Draft202012Validator(SCHEMA)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(not list(validator.iter_errors(r)) for r in records)
    loaded = load_sample(path)
    assert loaded.turns == sample.turns and loaded.lines == list(range(1, 13))

    def broken(change: dict, line: int = 2) -> InputError:
        bad = [dict(r) for r in records]
        bad[line - 1].update(change)
        target = tmp_path / "bad.jsonl"
        target.write_text("".join(json.dumps(r) + "\n" for r in bad))
        with pytest.raises(InputError) as info:
            load_sample(target)
        return info.value

    assert broken({"weight": 3.0}).field == "weight"
    assert broken({"seed": 99}).field == "seed"
    assert broken({"stratum_size": 81}, line=records.index(
        next(r for r in records[1:] if r["stratum"] == records[0]["stratum"])) + 1
    ).field in ("stratum_size", "weight")
    assert broken({"dialogue_id": records[0]["dialogue_id"],
                   "turn_index": records[0]["turn_index"]}).field == "turn_index"
    assert broken({"extra": 1}).field == "extra"


def test_a_sample_from_another_run_is_refused():
    sample = draw_sample(ROWS, n=10, gold="2.1", design="judge-rule")
    flipped = [dict(r) for r in ROWS]
    first = next(i for i, r in enumerate(flipped)
                 if (r["dialogue_id"], r["turn_index"]) == (sample.turns[0].dialogue_id,
                                                            sample.turns[0].turn_index))
    flipped[first]["verdict"] = not flipped[first]["verdict"]
    labels = HumanLabels([HumanLabel(dialogue_id=t.dialogue_id, turn_index=t.turn_index, label=1)
                          for t in sample.turns])
    with pytest.raises(DataMismatchError, match="another run"):
        agreement_report(flipped, labels, sample=sample, n_boot=0)
    with pytest.raises(OptionError, match="human labels"):
        agreement_report(ROWS, None, sample=sample, n_boot=0)


def test_population_estimates_by_hand():
    # Population: 80 turns judge=1 RULE=1, 10 judge=0 RULE=0, 6 judge=1 RULE=0, 4 judge=0 RULE=1,
    # sampled 6/5/5/4 (equal allocation) and labelled by a human: in the agreeing strata the
    # human says what both say except for one turn of the 80-stratum (human 0); in the
    # judge=1/RULE=0 stratum the human sides with the judge 4 times of 5; in judge=0/RULE=1
    # with RULE 3 times of 4.
    sample = draw_sample(ROWS, n=20, gold="2.1", seed=0, design="judge-rule")
    verdicts = {(r["dialogue_id"], r["turn_index"]): (r["verdict"], r["rule"]["2.1"])
                for r in ROWS}
    seen: Counter = Counter()
    records = []
    for turn in sample.turns:
        judge, rule = verdicts[(turn.dialogue_id, turn.turn_index)]
        seen[(judge, rule)] += 1
        k = seen[(judge, rule)]
        if judge == rule:
            human = int(judge) if not (judge and k == 1) else 0
        elif judge:
            human = 1 if k <= 4 else 0
        else:
            human = 1 if k <= 3 else 0
        records.append(HumanLabel(dialogue_id=turn.dialogue_id, turn_index=turn.turn_index,
                                  label=human))
    report = agreement_report(ROWS, HumanLabels(records), sample=sample, n_boot=300, seed=1)
    block = report["population"]
    assert (block["population_turns"], block["sampled_turns"], block["labelled_turns"]) == (
        100, 20, 20)
    assert block["uncovered_turns"] == 0
    # estimated correct turns: 80·5/6 + 10·0 + 6·4/5 + 4·3/4 of 100
    assert block["human_correct"]["value"] == pytest.approx(80 * 5 / 6 + 4.8 + 3)
    judge = next(p for p in block["pairs"] if p["a"] == "judge")
    # the judge agrees with the human on 80·5/6 + 10 + 6·4/5 + 4·1/4 turns
    assert judge["accuracy"]["value"] == pytest.approx(80 * 5 / 6 + 10 + 4.8 + 1)
    rule = next(p for p in block["pairs"] if p["a"] == "RULE-2.1")
    # RULE agrees on 80·5/6 + 10 + 6·1/5 + 4·3/4
    assert rule["accuracy"]["value"] == pytest.approx(80 * 5 / 6 + 10 + 1.2 + 3)
    # the weighted confusion table, judge (rows) vs human (columns), gives kappa and PABAK
    c00, c01, c10, c11 = 10 + 1, 3, 80 / 6 + 6 / 5, 80 * 5 / 6 + 4.8
    n = c00 + c01 + c10 + c11
    po, pe = (c00 + c11) / n, ((c00 + c01) * (c00 + c10) + (c10 + c11) * (c01 + c11)) / n**2
    assert n == pytest.approx(100)
    assert judge["kappa"]["value"] == pytest.approx((po - pe) / (1 - pe))
    assert judge["pabak"]["value"] == pytest.approx(2 * po - 1)
    low, high = judge["accuracy"]["ci"]
    assert low <= judge["accuracy"]["value"] <= high
    again = agreement_report(ROWS, HumanLabels(records), sample=sample, n_boot=300, seed=1)
    assert again["population"] == block
    assert np.isfinite(judge["kappa"]["ci"]).all()


def test_unlabelled_strata_are_reported_as_uncovered():
    sample = draw_sample(ROWS, n=8, gold="2.1", seed=0, design="judge-rule")
    wanted = "judge=correct, RULE-2.1=correct"
    records = [HumanLabel(dialogue_id=t.dialogue_id, turn_index=t.turn_index, label=1)
               for t in sample.turns if t.stratum != wanted]
    block = agreement_report(ROWS, HumanLabels(records), sample=sample,
                             n_boot=0)["population"]
    assert block["uncovered_turns"] == 80
    assert next(s for s in block["strata"] if s["stratum"] == wanted)["labelled"] == 0
