"""Benchmark: how fast reviewing label-error candidates closes the gap to a better gold.

MultiWOZ 2.4 stands in for the reviewer of 2.1. The candidates of three systems'
predictions against 2.1 are reviewed in the order under test; one review is one candidate
line. The simulated reviewer looks at the turns the candidate's fix would cover (the candidate's
turn and the following turns whose 2.1 value of the slot stays the same, as the web's review
shows them) and writes 2.4's value for every run of those turns where 2.4 differs from 2.1
(one correction per run of equal 2.4 values, ``through_turn`` its last turn), or rejects the
candidate ("the annotation is right") where 2.4 agrees with 2.1 on all of them.

After R reviews the corrections are applied to 2.1 (``judge.apply_corrections``), and for each
system the share of the 2.1 → 2.4 JGA gap closed is measured,
``(JGA(corrected) − JGA(2.1)) / (JGA(2.4) − JGA(2.1))``, with exact string match, together with
the turns moved away from 2.4 (2.1 equal to 2.4 there, the corrected gold not).

The test dialogues are split by id: those whose ids sort into the first half (500 of 999) are
the only ones any tuning may look at; the second half gives the honest figures. The ranking
itself never reads 2.4. Orders compared: ``score`` (the audit's evidence score) and ``jga``
(:func:`judge.analysis.review_order`, the review order).

    python bench/review_order.py [--data ../shared/data/multiwoz]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _common import write_results  # the script's own folder is on sys.path

from judge import apply_corrections, load_dialogues, load_predictions, load_schema
from judge.analysis import (
    Candidate,
    find_candidates,
    review_order,
    source_from_predictions,
)
from judge.data import Correction, DialogueSet, Located, PredictionSet

BUDGETS = (100, 250, 500, 1000, 2000)
SYSTEMS = ("original", "da", "da-p")


def _default_data() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "data" / "multiwoz").is_dir():
            return folder / "shared" / "data" / "multiwoz"
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "multiwoz"


def review(candidate: Candidate, dialogues: DialogueSet, audited: str = "2.1",
           truth: str = "2.4") -> list[Correction]:
    """What the simulated reviewer writes for one candidate line (see the module docstring)."""
    dialogue = dialogues.get(candidate.dialogue_id)
    assert dialogue is not None
    slot, start = candidate.slot, candidate.turn_index
    wrong = dialogue.turns[start].gold_states[audited].get(slot)
    end = start
    while (end + 1 < len(dialogue.turns)
           and dialogue.turns[end + 1].gold_states[audited].get(slot) == wrong):
        end += 1
    fields = {"dialogue_id": candidate.dialogue_id, "slot": slot, "gold": audited,
              "reviewer": "2.4", "time": "2026-11-28T00:00:00Z", "was": None}
    out: list[Correction] = []
    turn = start
    while turn <= end:
        right = dialogue.turns[turn].gold_states[truth].get(slot)
        if right == wrong:
            turn += 1
            continue
        last = turn
        while (last + 1 <= end
               and dialogue.turns[last + 1].gold_states[truth].get(slot) == right):
            last += 1
        out.append(Correction.model_validate({
            **fields, "turn_index": turn, "through_turn": last, "value": right,
            "was": dialogue.turns[turn].gold_states[audited].get(slot)}))
        turn = last + 1
    if not out:  # rejected: the annotation is right on every turn shown
        out.append(Correction.model_validate({**fields, "turn_index": start,
                                              "through_turn": start, "value": wrong,
                                              "was": wrong}))
    return out


def jga(dialogues: DialogueSet, system: PredictionSet, version: str) -> float:
    hits = total = 0
    for dialogue in dialogues.dialogues:
        predicted = system.for_dialogue(dialogue)
        for turn, pred in zip(dialogue.turns, predicted.turns, strict=True):
            hits += (pred.pred_state or {}) == turn.gold_states[version]
            total += 1
    return hits / total


def moved_away(dialogues: DialogueSet, version: str, audited: str = "2.1",
               truth: str = "2.4") -> int:
    return sum(turn.gold_states[audited] == turn.gold_states[truth]
               and turn.gold_states[version] != turn.gold_states[truth]
               for d in dialogues.dialogues for turn in d.turns)


def same_as(dialogues: DialogueSet, version: str, truth: str = "2.4") -> float:
    """The share of turns whose state under ``version`` is 2.4's."""
    turns = [turn for d in dialogues.dialogues for turn in d.turns]
    return sum(t.gold_states[version] == t.gold_states[truth] for t in turns) / len(turns)


def wrong_fixed(dialogues: DialogueSet, version: str, audited: str = "2.1",
                truth: str = "2.4") -> float:
    """The share of the wrongly annotated turns (2.1 differs from 2.4) that ``version`` brings
    to 2.4's state."""
    wrong = [turn for d in dialogues.dialogues for turn in d.turns
             if turn.gold_states[audited] != turn.gold_states[truth]]
    return sum(t.gold_states[version] == t.gold_states[truth] for t in wrong) / len(wrong)


def precision_at(order: Sequence[Candidate], dialogues: DialogueSet, count: int) -> float:
    """The share of the first ``count`` candidates that are real errors (the review changes
    the annotation)."""
    head = order[:count]
    return sum(review(c, dialogues)[0].value != review(c, dialogues)[0].was
               for c in head) / len(head)


def tune(candidates: Sequence[Candidate], dialogues: DialogueSet) -> tuple[float, float]:
    """The logistic calibration of the evidence score: P(a review corrects something) against
    the candidate's logit, fitted on the tuning half only."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.array([[c.logit] for c in candidates])
    y = np.array([review(c, dialogues)[0].value != review(c, dialogues)[0].was
                  for c in candidates])
    model = LogisticRegression(C=1e6, max_iter=1000).fit(x, y)
    return float(model.coef_[0][0]), float(model.intercept_[0])


def simulate(dialogues: DialogueSet, systems: Sequence[PredictionSet],
             order: Sequence[Candidate]) -> list[dict[str, object]]:
    """Gap closed per system and turns moved away, after each budget of reviews."""
    base = {s.name: jga(dialogues, s, "2.1") for s in systems}
    best = {s.name: jga(dialogues, s, "2.4") for s in systems}
    reviews = [review(c, dialogues) for c in order]
    rows = []
    for budget in (*[b for b in BUDGETS if b < len(order)], len(order)):
        located = [Located(c, "simulated", i) for i, review_ in enumerate(reviews[:budget])
                   for c in review_]
        fixed = apply_corrections(dialogues, "2.1", located, name="fixed")
        row: dict[str, object] = {"reviews": budget,
                                  "moved away": moved_away(fixed.dialogues, "fixed"),
                                  "equal to 2.4": 100.0 * same_as(fixed.dialogues, "fixed"),
                                  "wrong fixed": 100.0 * wrong_fixed(fixed.dialogues, "fixed")}
        for system in systems:
            gap = best[system.name] - base[system.name]
            now = jga(fixed.dialogues, system, "fixed")
            row[system.name] = 100.0 * (now - base[system.name]) / gap if gap else float("nan")
        rows.append(row)
    return rows


def halves(dialogues: DialogueSet) -> tuple[list[str], list[str]]:
    ids = sorted(d.dialogue_id for d in dialogues.dialogues)
    middle = (len(ids) + 1) // 2
    return ids[:middle], ids[middle:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=_default_data())
    parser.add_argument("--tune", action="store_true",
                        help="fit the calibration of the evidence score on the first half and "
                        "print it (judge/analysis/_review.py's CALIBRATION)")
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"no shared data at {args.data}: nothing to measure", file=sys.stderr)
        return 2
    start = time.perf_counter()
    schema = load_schema(args.data / "schema.json")
    everything = load_dialogues(args.data / "dialogues.jsonl.gz")
    tables = []
    for half, ids in zip(("first half (tuning)", "second half (held out)"), halves(everything),
                         strict=True):
        dialogues = everything.subset(ids)
        systems = [load_predictions(args.data / "predictions" / f"{name}.jsonl.gz", dialogues,
                                    schema) for name in SYSTEMS]
        sources = [source_from_predictions(s) for s in systems]
        candidates = find_candidates(dialogues, sources, gold="2.1", schema=schema)
        if args.tune:
            scale, shift = tune(candidates, dialogues)
            print(f"CALIBRATION = ({scale:.3f}, {shift:.3f})  # fitted on {half}")
            return 0
        baseline = 100.0 * same_as(dialogues, "2.1")
        orders = {"score": candidates,
                  "jga": review_order(candidates, dialogues, sources, gold="2.1")}
        for name, order in orders.items():
            rows = simulate(dialogues, systems, order)
            head = 100.0 * precision_at(order, dialogues, 50)
            print(f"\n{half}, order {name} ({len(dialogues)} dialogues, "
                  f"{len(candidates)} candidates; real errors among the first 50: "
                  f"{head:.0f} %)")
            print("| reviews | " + " | ".join(SYSTEMS)
                  + " | moved away | equal to 2.4 | wrong turns fixed |")
            print("| --- |" + " --- |" * (len(SYSTEMS) + 3))
            table = []
            for row in rows:
                cells = [str(row["reviews"]),
                         *(f"{row[s]:.1f} %" for s in SYSTEMS), str(row["moved away"]),
                         f"{row['equal to 2.4']:.1f} %", f"{row['wrong fixed']:.1f} %"]
                table.append(cells)
                print("| " + " | ".join(cells) + " |")
            tables.append({"title": f"Share of the 2.1 → 2.4 JGA gap closed, {half}, "
                                    f"order: {name} ({len(dialogues)} dialogues, "
                                    f"{len(candidates)} candidates)",
                           "columns": ["reviews", *SYSTEMS, "turns moved away from 2.4",
                                       "turns equal to 2.4", "wrongly annotated turns fixed"],
                           "rows": table,
                           "note": f"Turns equal to 2.4 before any review: {baseline:.1f} %. "
                                   f"Real errors among the first 50 candidates: {head:.0f} %."})
    print(f"\n({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    write_results("review_order", tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
