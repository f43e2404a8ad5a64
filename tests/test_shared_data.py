"""The suite on the shared MultiWOZ test set against the data README's regression values.

Skipped with a reason where ../shared/data is absent (it lives only in the development
workspace, never in the package).
"""

from __future__ import annotations

import pytest

from judge import MetricOptions, compute_metrics, load_dialogues, load_predictions, load_schema

from .conftest import shared_path, write_jsonl

# Data README: JGA vs 2.1, vs 2.4 (exact string), vs 2.4 (any listed value)
EXPECTED_JGA = {"original": (30.77, 33.74, 33.85), "da": (34.91, 39.35, 39.52),
                "da-p": (36.18, 42.21, 42.44)}


@pytest.fixture(scope="module")
def multiwoz():
    schema = load_schema(shared_path("multiwoz", "schema.json"))
    dialogues = load_dialogues(shared_path("multiwoz", "dialogues.jsonl.gz"))
    systems = [load_predictions(shared_path("multiwoz", "predictions", f"{n}.jsonl.gz"),
                                dialogues, schema) for n in EXPECTED_JGA]
    return schema, dialogues, systems


def test_counts(multiwoz):
    schema, dialogues, systems = multiwoz
    assert len(schema.slot_names) == 30
    assert len(dialogues) == 999 and dialogues.num_turns == 7368
    assert dialogues.versions == ("2.1", "2.4")
    assert [s.name for s in systems] == list(EXPECTED_JGA)
    # data README quirk 9: turns whose pred_state has an unknown slot: 407 / 181 / 275
    def unknown(state: dict[str, str] | None) -> bool:
        return any(slot not in schema.slots for slot in state or {})

    in_states = [sum(unknown(t.pred_state) for d in s.dialogues.values() for t in d.turns)
                 for s in systems]
    assert in_states == [407, 181, 275]
    # metrics counts a turn whose state or turn state names one (a deletion of an unknown slot
    # is in the turn state only): one more turn of 'original' and of 'da-p'
    either = [sum(unknown(t.pred_state) or unknown(t.pred_turn_state)
                  for d in s.dialogues.values() for t in d.turns) for s in systems]
    report = compute_metrics(dialogues, systems, schema, MetricOptions(breakdowns=False))
    assert [s.inputs["turns_with_out_of_schema_slots"] for s in report.systems] == either
    assert either == [408, 181, 276]
    # pred_state follows from pred_turn_state at every turn (checked by the data's authors)
    assert all(s.inputs["integration_mismatches"] == 0 for s in report.systems)


@pytest.mark.parametrize(("gold", "match", "column"),
                         [("2.1", "exact", 0), ("2.4", "exact", 1), ("2.4", "alternatives", 2)])
def test_jga_regression_values(multiwoz, gold, match, column):
    schema, dialogues, systems = multiwoz
    report = compute_metrics(dialogues, systems, schema,
                             MetricOptions(match=match, breakdowns=False), gold=gold)
    for system in report.systems:
        assert round(system.metrics["jga"], 2) == EXPECTED_JGA[system.name][column]


def test_metric_ordering_and_ranges(multiwoz):
    schema, dialogues, systems = multiwoz
    report = compute_metrics(dialogues, systems[:1], schema)
    m = report.systems[0].metrics
    # turn-level scores bracket: JGA <= FGA(lambda) <= TurnMatch, and FGA grows with lambda
    fga = [m["fga"][k] for k in ("0.25", "0.5", "0.75", "1.0")]
    assert m["jga"] <= fga[0] <= fga[1] <= fga[2] <= fga[3] <= m["turn_match"]
    assert m["jga"] < m["rsa"] < m["aga"] < m["sa"] <= 100
    per_domain = report.systems[0].per_domain
    assert per_domain is not None and set(per_domain) == set(schema.domain_names)
    assert per_domain["train"]["dialogues"] >= 490  # gold train dialogues, plus predicted ones


def test_sgd_example_scores_perfect_against_its_own_first_alternatives(tmp_path):
    """New domains load with their own schema; '|' surface forms need the alternatives policy."""
    schema = load_schema(shared_path("sgd_example", "schema.json"))
    dialogues = load_dialogues(shared_path("sgd_example", "dialogues.jsonl.gz"))
    assert dialogues.versions == ("gold",)
    assert len(dialogues) == 76 and dialogues.num_turns == 545
    rows = [{"dialogue_id": d.dialogue_id, "turns": [
        {"turn_index": t.turn_index,
         "pred_state": {s: v.split("|")[-1] for s, v in t.gold_states["gold"].items()}}
        for t in d.turns]} for d in dialogues.dialogues]
    path = write_jsonl(tmp_path / "sgd_pred.jsonl", rows)
    predictions = load_predictions(path, dialogues, schema)
    assert not predictions.out_of_schema
    alternatives = compute_metrics(dialogues, predictions, schema,
                                   MetricOptions(match="alternatives")).systems[0]
    assert alternatives.metrics["jga"] == 100.0
    assert alternatives.metrics["gca"]["counts"]["W"] == 0
    assert set(alternatives.per_domain) == {"payment", "flights"}
    exact = compute_metrics(dialogues, predictions, schema).systems[0]
    assert exact.metrics["jga"] < 100.0
