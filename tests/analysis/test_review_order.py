"""The review order of label-error candidates: a turn's candidates together, fixes that reach
many (system, turn) pairs first, and no peeking at another annotation version."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from judge import load_dialogues, load_predictions, load_schema
from judge.analysis import (
    error_chance,
    find_candidates,
    fix_span,
    review_order,
    source_from_predictions,
)
from judge.cli import main

from ..conftest import write_jsonl

SCHEMA = {"name": "mini", "domains": [{"domain": "hotel", "slots": [
    {"name": "hotel-area", "is_categorical": True, "possible_values": ["north", "south"]},
    {"name": "hotel-stars", "is_categorical": True, "possible_values": ["3", "4", "5"]},
    {"name": "hotel-name"}]}]}

# Hand-made fixture. D1: one system is right at turns 1-16 except that the annotation lacks
# both the area and the stars: a JGA gain needs both candidates, and it reaches 16 turns.
# D2: stars written as a word outside the value set, a likelier error than either of D1's
# (the evidence order puts it first) but worth one turn.
D1_21 = [{}] * 17
D1_SYS = [{}, *[{"hotel-area": "north", "hotel-stars": "4"}] * 16]
D2_21 = [{"hotel-stars": "four"}]
D2_SYS = [{"hotel-stars": "4"}]


def _files(tmp_path: Path, *, with_24: bool) -> tuple[Path, Path, Path]:
    def turns(states, words):
        out = []
        for i, state in enumerate(states):
            turn = {"turn_index": i, "system": "ok .", "user": words, "gold_state_21": state}
            if with_24:
                turn["gold_state_24"] = {"hotel-name": "zzz"}  # nonsense: must not matter
            out.append(turn)
        return out

    schema = tmp_path / "schema.json"
    write_jsonl(schema, [SCHEMA])
    schema.write_text(schema.read_text().strip())
    dialogues = write_jsonl(tmp_path / f"dialogues{int(with_24)}.jsonl", [
        {"dialogue_id": "D1", "turns": turns(D1_21, "a 4 star hotel in the north")},
        {"dialogue_id": "D2", "turns": turns(D2_21, "a four star place")}])
    preds = write_jsonl(tmp_path / "system.jsonl", [
        {"dialogue_id": "D1", "turns": [{"turn_index": i, "pred_state": s}
                                        for i, s in enumerate(D1_SYS)]},
        {"dialogue_id": "D2", "turns": [{"turn_index": 0, "pred_state": D2_SYS[0]}]}])
    return schema, dialogues, preds


def _ordered(tmp_path: Path, *, with_24: bool):
    schema_path, dialogues_path, preds_path = _files(tmp_path, with_24=with_24)
    schema = load_schema(schema_path)
    dialogues = load_dialogues(dialogues_path, schema=schema)
    sources = [source_from_predictions(load_predictions(preds_path, dialogues, schema))]
    candidates = find_candidates(dialogues, sources, gold="2.1", schema=schema)
    return dialogues, candidates, review_order(candidates, dialogues, sources, gold="2.1")


def test_a_turns_candidates_come_together_and_before_fixes_worth_nothing(tmp_path):
    dialogues, candidates, ordered = _ordered(tmp_path, with_24=False)
    keys = [(c.dialogue_id, c.slot) for c in ordered]
    assert set(keys[:2]) == {("D1", "hotel-area"), ("D1", "hotel-stars")}
    assert keys[2] == ("D2", "hotel-stars")
    assert (candidates[0].dialogue_id, candidates[0].slot) == ("D2", "hotel-stars")
    assert [c.rank for c in ordered] == [1, 2, 3]
    area = next(c for c in ordered if c.slot == "hotel-area")
    assert list(fix_span(area, dialogues, "2.1")) == list(range(1, 17))


def test_the_order_never_reads_another_annotation_version(tmp_path):
    _, _, without = _ordered(tmp_path, with_24=False)
    _, _, with_other = _ordered(tmp_path, with_24=True)
    assert [(c.dialogue_id, c.turn_index, c.slot, c.predicted) for c in without] == \
        [(c.dialogue_id, c.turn_index, c.slot, c.predicted) for c in with_other]


def test_error_chance_is_monotone_in_the_evidence(tmp_path):
    _, candidates, _ = _ordered(tmp_path, with_24=False)
    by_logit = sorted(candidates, key=lambda c: c.logit)
    chances = [error_chance(c) for c in by_logit]
    assert chances == sorted(chances) and all(0 < p < 1 for p in chances)


def test_audit_writes_the_review_order_by_default(tmp_path):
    schema, dialogues, preds = _files(tmp_path, with_24=False)
    args = ["audit", str(preds), "--dialogues", str(dialogues), "--schema", str(schema),
            "--gold", "2.1"]
    assert main([*args, "--candidates", str(tmp_path / "review.csv")]) == 0
    assert main([*args, "--order", "evidence", "--candidates",
                 str(tmp_path / "evidence.csv")]) == 0
    def keys(name: str) -> list[tuple[str, str]]:
        with (tmp_path / name).open(newline="", encoding="utf-8") as handle:
            return [(row["dialogue_id"], row["slot"]) for row in csv.DictReader(handle)]

    assert set(keys("review.csv")[:2]) == {("D1", "hotel-area"), ("D1", "hotel-stars")}
    assert keys("evidence.csv")[0] == ("D2", "hotel-stars")


def test_the_order_tradeoff_quoted_is_what_the_bench_measured():
    """The page's and the queue's sentence about the two orders quotes the held-out figures of
    ``bench/review_order.py`` (its results file), not figures typed by hand."""
    import json

    from judge.analysis.tables import ORDER_TRADEOFF

    from ..conftest import ROOT

    results = json.loads((ROOT / "bench/results/review_order.json").read_text())
    held_out = {("jga" if "order: jga" in t["title"] else "score"): t
                for t in results["tables"] if "held out" in t["title"]}

    def fixed(table: dict) -> float:
        row = next(r for r in table["rows"] if r[0] == str(ORDER_TRADEOFF.reviews))
        return float(row[table["columns"].index("wrongly annotated turns fixed")].rstrip(" %"))

    def head(table: dict) -> int:
        return int(re.search(r"first 50 candidates: (\d+) %", table["note"]).group(1))

    assert ORDER_TRADEOFF.review_fixed == fixed(held_out["jga"])
    assert ORDER_TRADEOFF.evidence_fixed == fixed(held_out["score"])
    assert ORDER_TRADEOFF.review_head == head(held_out["jga"])
    assert ORDER_TRADEOFF.evidence_head == head(held_out["score"])


def test_the_audit_page_says_which_order_and_what_it_costs(tmp_path):
    schema, dialogues, preds = _files(tmp_path, with_24=False)
    args = ["audit", str(preds), "--dialogues", str(dialogues), "--schema", str(schema),
            "--gold", "2.1"]
    assert main([*args, "--out", str(tmp_path / "review.html")]) == 0
    assert main([*args, "--order", "evidence", "--out", str(tmp_path / "evidence.html")]) == 0
    review = (tmp_path / "review.html").read_text()
    evidence = (tmp_path / "evidence.html").read_text()
    assert "in <strong>review order</strong>" in review
    assert "in <strong>evidence order</strong>" in evidence
    for html in (review, evidence):
        assert "of the first 50" in html and "wrongly annotated turns" in html
