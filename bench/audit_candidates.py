"""Benchmark: how well the ranked label-error candidates find MultiWOZ 2.1 annotation errors.

Ground truth: a (dialogue, turn, slot) was corrected when MultiWOZ 2.4's turn-level value for
that slot differs from 2.1's (``turn_state`` of consecutive gold states, removals included).
A candidate is a hit when its (dialogue, turn, slot) was corrected. Precision@k is the share of
hits among the first k candidates; recall is the share of all corrections hit by at least one
candidate of the whole list.

R-precision is the precision at as many candidates as there are corrections; AP (average
precision) rewards ranking hits early over the whole list.

Two settings:

* **shared**: the three systems' predictions files (``original``, ``da``, ``da-p``) against
  2.1 on the full MultiWOZ test set; exact-match evidence only, no model call.
* **example**: the project's example (4 dialogues) judged by replaying two recorded cassettes
  (``example-two-dim``, ``example-weak-two-dim``), with judge evidence.

``--ablation`` re-ranks the shared three-system list with groups of evidence left out, to
show what each buys. ``--crossfit`` also fits a logistic regression on the same evidence
codes, on one half of the dialogues, and ranks the other half (and vice versa): a check that
the hand-set weights are not what carries the figures.

    python bench/audit_candidates.py [--data ../shared/data/multiwoz] [--ablation] [--crossfit]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from _common import write_results  # the script's own folder is on sys.path

from judge import evaluate, load_config, load_dialogues, load_predictions, load_schema
from judge.analysis import find_candidates, source_from_predictions, source_from_run
from judge.data import DialogueSet, dialogue_key, turn_state
from judge.model import Cassette, replay_transport
from judge.pipeline import load_run

ROOT = Path(__file__).resolve().parents[1]
CUTOFFS = (25, 50, 100, 200)


def _default_data() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "data" / "multiwoz").is_dir():
            return folder / "shared" / "data" / "multiwoz"
    return ROOT.parent / "shared" / "data" / "multiwoz"


def corrections(dialogues: DialogueSet, audited: str, truth: str) -> set[tuple[str, int, str]]:
    """(dialogue key, turn, slot) whose turn-level value differs between the two versions."""
    out = set()
    for dialogue in dialogues.dialogues:
        key = dialogue_key(dialogue.dialogue_id)
        before = {audited: {}, truth: {}}
        for turn in dialogue.turns:
            changes = {}
            for version in (audited, truth):
                changes[version] = turn_state(before[version], turn.gold_states[version],
                                              include_removals=True)
                before[version] = turn.gold_states[version]
            for slot in set(changes[audited]) | set(changes[truth]):
                if changes[audited].get(slot) != changes[truth].get(slot):
                    out.add((key, turn.turn_index, slot))
    return out


def measure(candidates: Sequence, truth: set[tuple[str, int, str]]) -> dict[str, float]:
    """Precision at each cutoff (only where the list is that long), R-precision (precision at
    as many candidates as there are corrections), average precision and recall."""
    keys = [(dialogue_key(c.dialogue_id), c.turn_index, c.slot) for c in candidates]
    hits = [key in truth for key in keys]
    out: dict[str, float] = {f"p@{k}": 100.0 * sum(hits[:k]) / k
                             for k in CUTOFFS if len(hits) >= k}
    if truth:
        out["r-prec"] = 100.0 * sum(hits[: len(truth)]) / len(truth)
        found, total = set(), 0.0
        for rank, key in enumerate(keys, start=1):
            if key in truth and key not in found:  # a correction counts once, where first hit
                found.add(key)
                total += len(found) / rank
        out["ap"] = 100.0 * total / len(truth)
        out["recall"] = 100.0 * len(found) / len(truth)
    out["candidates"] = len(candidates)
    out["corrections"] = len(truth)
    return out


def crossfit(candidates: Sequence, truth: set[tuple[str, int, str]]) -> dict[str, float]:
    """Precision@k when each half of the dialogues is ranked by a logistic regression fitted on
    the other half, over the same evidence codes (weights summed per code)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    codes = sorted({e.code for c in candidates for e in c.evidence})
    x = np.array([[sum(e.weight for e in c.evidence if e.code == code) != 0 for code in codes]
                  for c in candidates], dtype=float)
    y = np.array([(dialogue_key(c.dialogue_id), c.turn_index, c.slot) in truth
                  for c in candidates])
    order = sorted({dialogue_key(c.dialogue_id) for c in candidates})
    fold = {d: i % 2 for i, d in enumerate(order)}
    f = np.array([fold[dialogue_key(c.dialogue_id)] for c in candidates])
    score = np.zeros(len(candidates))
    for k in (0, 1):
        model = LogisticRegression(max_iter=1000).fit(x[f != k], y[f != k])
        score[f == k] = model.decision_function(x[f == k])
    ranked = y[np.argsort(-score, kind="stable")]
    return {f"p@{k}": 100.0 * ranked[:k].mean() for k in CUTOFFS}


ABLATIONS = {
    "systems' agreement only": {"prior", "systems_agree", "systems_split"},
    "without the gold's later turns": None,
    "without the schema's value sets": None,
    "without the dialogue text": None,
    "without dontcare and spelling rules": None,
}
LEFT_OUT = {
    "without the gold's later turns": {"gold_later"},
    "without the schema's value sets": {"gold_outside_schema", "value_outside_schema"},
    "without the dialogue text": {"value_in_dialogue", "gold_not_in_dialogue",
                                  "gold_in_dialogue"},
    "without dontcare and spelling rules": {"said_no_preference", "gold_dontcare",
                                            "surface_variant"},
}


def rerank(candidates: Sequence, keep, position: dict[str, int]) -> list:
    """The candidates ordered by the summed weights of the evidence codes ``keep`` accepts;
    ties in dialogue order, as the library breaks them (never by the left-out evidence)."""
    def key(c) -> tuple:
        logit = sum(e.weight for e in c.evidence if keep(e.code))
        return (-logit, position[dialogue_key(c.dialogue_id)], c.turn_index, c.slot)
    return sorted(candidates, key=key)


def ablation(candidates: Sequence, truth,
             position: dict[str, int]) -> list[tuple[str, dict[str, float]]]:
    rows = []
    for label, only in ABLATIONS.items():
        if only is not None:
            ranked = rerank(candidates, lambda code, only=only: code in only, position)
        else:
            ranked = rerank(candidates, lambda code, out=LEFT_OUT[label]: code not in out,
                            position)
        rows.append((f"  same, {label}", measure(ranked, truth)))
    return rows


NOTES: list[str] = []


def _agreement_note(candidates: Sequence, truth) -> str:
    """How often the gold was corrected where every system holds the same value against it."""
    def hit(c) -> bool:
        return (dialogue_key(c.dialogue_id), c.turn_index, c.slot) in truth
    every = [c for c in candidates if len(c.systems) == 3]
    valued = [c for c in every if c.predicted is not None]
    share = 100 * sum(map(hit, every)) / len(every)
    return (f"candidates all 3 systems hold: {len(every)}, {share:.1f} % corrected; of these "
            f"with a value (not 'absent'): {len(valued)}, "
            f"{100 * sum(map(hit, valued)) / len(valued):.1f} % corrected")


def shared(data: Path, use_crossfit: bool,
           use_ablation: bool = False) -> list[tuple[str, dict[str, float]]]:
    start = time.perf_counter()
    schema = load_schema(data / "schema.json")
    dialogues = load_dialogues(data / "dialogues.jsonl.gz")
    systems = [load_predictions(data / "predictions" / f"{name}.jsonl.gz", dialogues, schema)
               for name in ("original", "da", "da-p")]
    truth = corrections(dialogues, "2.1", "2.4")
    rows = []
    for label, chosen in (("3 systems", systems), *((f"1 system ({s.name})", [s])
                                                    for s in systems)):
        sources = [source_from_predictions(s) for s in chosen]
        candidates = find_candidates(dialogues, sources, gold="2.1", schema=schema)
        rows.append((f"MultiWOZ test, {label}, exact-match evidence", measure(candidates, truth)))
        if len(chosen) == 3:
            NOTES.append(_agreement_note(candidates, truth))
        if use_ablation and len(chosen) == 3:
            rows.extend(ablation(candidates, truth, dialogues.index))
        if use_crossfit and len(chosen) == 3:
            rows.append(("  same, logistic regression cross-fitted on halves",
                         crossfit(candidates, truth)))
    print(f"(shared data loaded and ranked in {time.perf_counter() - start:.1f} s)",
          file=sys.stderr)
    return rows


def _replay(out: Path, predictions: str, cassette: str) -> Path:
    schema = load_schema(ROOT / "examples" / "schema.json")
    dialogues = load_dialogues(ROOT / "examples" / "dialogues.jsonl")
    system = load_predictions(ROOT / "examples" / predictions, dialogues, schema)
    config = load_config({"model": "local", "cache_dir": str(out / "cache"), "use_cache": False})
    client = httpx.AsyncClient(transport=replay_transport(Cassette.load(ROOT / "cassettes"
                                                                        / cassette)))
    result = evaluate(config, schema, dialogues, system, http_client=client)
    result.write(out / "run")
    return out / "run"


def example() -> list[tuple[str, dict[str, float]]]:
    schema = load_schema(ROOT / "examples" / "schema.json")
    dialogues = load_dialogues(ROOT / "examples" / "dialogues.jsonl")
    truth = corrections(dialogues, "2.1", "2.4")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [load_run(_replay(Path(tmp) / "a", "predictions.jsonl", "example-two-dim.json")),
                load_run(_replay(Path(tmp) / "b", "predictions-weak.jsonl",
                                 "example-weak-two-dim.json"))]
        judged = [source_from_run(run, name) for run, name in zip(runs, ("example", "weak"),
                                                                  strict=True)]
        plain = [source_from_predictions(load_predictions(ROOT / "examples" / p, dialogues,
                                                          schema, name=n))
                 for p, n in (("predictions.jsonl", "example"),
                              ("predictions-weak.jsonl", "weak"))]
        rows = []
        for label, sources in (("with judge evidence", judged),
                               ("exact-match evidence only", plain)):
            candidates = find_candidates(dialogues, sources, gold="2.1", schema=schema)
            rows.append((f"example (2 runs), {label}", measure(candidates, truth)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=_default_data())
    parser.add_argument("--ablation", action="store_true")
    parser.add_argument("--crossfit", action="store_true")
    args = parser.parse_args()
    rows = example()
    if (args.data / "dialogues.jsonl.gz").exists():
        rows = shared(args.data, args.crossfit, args.ablation) + rows
    else:
        print(f"no shared data at {args.data}; only the example is measured", file=sys.stderr)
    print("| setting | P@25 | P@50 | P@100 | P@200 | R-prec | AP | recall | candidates | "
          "corrections |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    def cell(figures: dict[str, float], name: str, digits: int = 1) -> str:
        return f"{figures[name]:.{digits}f}" if name in figures else "—"

    names = ("p@25", "p@50", "p@100", "p@200", "r-prec", "ap", "recall")
    table = [[label.strip(), *(cell(figures, name) for name in names),
              cell(figures, "candidates", 0), cell(figures, "corrections", 0)]
             for label, figures in rows]
    for row in table:
        print("| " + " | ".join(row) + " |")
    for note in NOTES:
        print(note)
    write_results("audit_candidates", [{
        "title": ("Ranked label-error candidates against MultiWOZ 2.1, scored by 2.4's "
                  "corrections"),
        "columns": ["setting", "P@25", "P@50", "P@100", "P@200", "R-prec", "AP", "recall",
                    "candidates", "corrections"],
        "rows": table,
        "note": " ".join(f"{note[0].upper()}{note[1:]}." for note in NOTES),
    }], ablation=args.ablation, crossfit=args.crossfit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
