"""Benchmark: coverage and width of the labels-only and prediction-powered (PPI) intervals,
on every design and unit, and whether ``labels plan`` keeps its promise.

A simulation on the shared MultiWOZ data with exact match standing in for both sides: per turn,
the RULE verdict (exact match of the predicted turn state) against the 2.1 annotation plays the
judge, the same against 2.4 plays the person. The three shared systems are the populations
(7,368 turns each); the estimand is each system's "human" TSA over its own turns. Noisier
stand-in judges flip the 2.1 verdict on a random 10 %, 20 % and 30 % of turns.

Tables (every estimate computed by ``judge.analysis.design_estimate``, the code the reports
use, on ``--samples`` random samples per row):

* one system, turns as units: designs ``random`` (simple random), ``domain`` (strata by domain,
  proportional, at least two per stratum; the domain named from the prediction and the 2.1
  turn change, the "judge" side) and ``judge-rule`` (strata judge verdict × RULE-2.1 verdict,
  equal allocation), at n = 50, 100, 200 (and 20, 30 on simple random samples, to find the
  smallest size at which the interval holds);
* the difference of two systems labelled on one shared sample, strata from the first system's
  run (the judge is the 10 %-flipped stand-in, so that judge and RULE differ as a real judge
  does), every design at n = 50, 100, 200 (judge-rule measured to show why ``compare``
  refuses it, and left out of the targets);
* whole dialogues (simple random): TSA and JGA as ratios over turns with intervals clustered
  by dialogue, dialogue success, and the difference of two systems, at 5, 10, 25, 50 dialogues;
* the planner: for assumed disagreement rates 0-20 % (a population in which the judge is the
  person's verdict flipped on exactly that share of turns) and the 2.1 stand-in itself, the n
  ``plan_labels`` suggests for a width, and the share of samples of that n whose interval is
  at most that wide (the promise: at least 80 %), with their coverage.

Targets (issue 34): coverage >= 93 % for every labels and PPI interval from 50 turns, every
served design (one system and differences); whole dialogues >= 93 % from 25 and >= 90 % at 10;
no zero-width interval; the planner's n reaches the width in >= 80 % of samples. With 2,000
samples (the default) a coverage near 95 % has a simulation error of 0.5 points (±1 at 95 %
confidence).

    python bench/ppi_coverage.py [--data ../shared/data/multiwoz] [--samples 2000]

The figures go to ``bench/results/ppi_coverage.json`` (``write_results``), which
docs/ESTIMATES.md renders.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judge import load_dialogues, load_predictions, load_schema
from judge.analysis import (
    CORNERS,
    DIFFERENCE_CORNERS,
    DIFFERENCE_PSEUDO_UNITS,
    PSEUDO_UNITS,
    Stratum,
    allocate,
    design_estimate,
    design_strata,
)
from judge.analysis._design import MIN_DIALOGUES, MIN_TURNS
from judge.analysis._planning import PLAN_SHARE, plan_labels
from judge.data import dialogue_key, judged_turn_states, turn_states
from judge.metrics import rule_policy, rule_verdicts

SYSTEMS = ("original", "da", "da-p")
SIZES = (50, 100, 200)
SMALL_SIZES = (20, 30)
DESIGNS = ("random", "domain", "judge-rule")
FLIPS = (0.0, 0.1, 0.2, 0.3)
DIFFERENCE_FLIP = 0.1
PAIRS = (("da", "original"), ("da-p", "original"), ("da-p", "da"))
DIALOGUE_SIZES = (5, 10, 25, 50)
PLAN_RATES = (0.0, 0.01, 0.05, 0.1, 0.2)
PLAN_WIDTHS = (10.0, 5.0)
LEVEL = 0.95


def default_data() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "data" / "multiwoz").is_dir():
            return folder / "shared" / "data" / "multiwoz"
    return Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multiwoz"


def load_population(data: Path) -> dict[str, dict[str, Any]]:
    """Per system: judgment-shaped rows (RULE-2.1 as the judge's verdict), the 0/1 "judge"
    (vs 2.1) and "human" (vs 2.4) verdicts of every turn, in one fixed turn order."""
    schema = load_schema(data / "schema.json")
    dialogues = load_dialogues(data / "dialogues.jsonl.gz")
    policy, ignore_none = rule_policy("exact", schema)
    out = {}
    for system in SYSTEMS:
        predictions = load_predictions(data / "predictions" / f"{system}.jsonl.gz", dialogues,
                                       schema)
        rows, judge, human = [], [], []
        for dialogue in dialogues.dialogues:
            pred = predictions.for_dialogue(dialogue)
            judged = judged_turn_states([t.pred_state or {} for t in pred.turns],
                                        [t.pred_turn_state for t in pred.turns])
            gold = {v: [t.gold_states[v] for t in dialogue.turns] for v in ("2.1", "2.4")}
            verdicts = {v: rule_verdicts(g, judged, policy, ignore_none_pairs=ignore_none)
                        for v, g in gold.items()}
            changes = turn_states(gold["2.1"])
            for turn, state in enumerate(judged):
                rows.append({"dialogue_id": dialogue.dialogue_id, "turn_index": turn,
                             "verdict": verdicts["2.1"][turn],
                             "rule": {"2.1": verdicts["2.1"][turn]},
                             "pred_turn_state": state,
                             "gold_turn_state": {"2.1": changes[turn]}})
                judge.append(verdicts["2.1"][turn])
                human.append(verdicts["2.4"][turn])
        out[system] = {"rows": rows, "judge": np.array(judge, dtype=float),
                       "human": np.array(human, dtype=float)}
    return out


def strata_indices(rows: Sequence[dict[str, Any]], design: str,
                   judge: np.ndarray | None = None) -> list[np.ndarray]:
    """Row indices of each stratum of a design (one stratum for simple random samples;
    ``judge-rule``: the given judge verdicts × the RULE-2.1 verdict of the rows)."""
    if design == "random":
        return [np.arange(len(rows))]
    if design == "judge-rule":
        assert judge is not None
        rule = np.array([bool(r["rule"]["2.1"]) for r in rows])
        cells = 2 * judge.astype(int) + rule.astype(int)
        return [np.flatnonzero(cells == c) for c in range(4) if np.any(cells == c)]
    strata = design_strata(rows, design="domain", gold="2.1")
    position = {(dialogue_key(str(r["dialogue_id"])), int(r["turn_index"])): i
                for i, r in enumerate(rows)}
    return [np.array([position[k] for k in strata.members[name]])
            for name in sorted(strata.members)]


def draw(members: list[np.ndarray], n: int, samples: int, rng: np.random.Generator,
         allocation: str = "proportional") -> tuple[np.ndarray, list[np.ndarray]]:
    """``samples`` stratified draws without replacement: an index matrix (samples, n) and the
    columns of each stratum (allocation and minimum as ``labels sample`` uses them)."""
    sizes = {str(h): len(m) for h, m in enumerate(members)}
    minimum = 2 if len(members) > 1 and allocation == "proportional" else 0
    counts = allocate(sizes, n, allocation, minimum=minimum)  # type: ignore[arg-type]
    blocks, groups, start = [], [], 0
    for h, m in enumerate(members):
        k = counts[str(h)]
        if k == 0:
            continue
        keys = rng.random((samples, len(m)))
        picks = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < len(m) else \
            np.tile(np.arange(len(m)), (samples, 1))
        blocks.append(m[picks])
        groups.append(np.arange(start, start + k))
        start += k
    return np.concatenate(blocks, axis=1), groups


def allocation_of(design: str) -> str:
    return "equal" if design == "judge-rule" else "proportional"


def interval_figures(y: np.ndarray, f: np.ndarray, t: np.ndarray | None, index: np.ndarray,
                     groups: list[np.ndarray], members: list[np.ndarray], truth: float,
                     corners: Any, tuning: Any = "loo",
                     pseudo_units: float = PSEUDO_UNITS,
                     only_degenerate: bool = False) -> dict[str, Any]:
    """Coverage and widths of labels-only and PPI intervals over the drawn samples (every
    stratum of ``members`` must have draws)."""
    population = [Stratum.of(f[m], None if t is None else t[m]) for m in members]
    out: dict[str, Any] = {}
    widths = {}
    for name, lam in (("labels", 0.0), ("ppi", tuning)):
        estimate = design_estimate(y[index], f[index], None if t is None else t[index], groups,
                                   population, tuning=lam, corners=corners,
                                   pseudo_units=pseudo_units, only_degenerate=only_degenerate)
        low, high = estimate.interval(LEVEL)
        widths[name] = high - low
        out[name] = {"coverage": float(np.mean((low <= truth) & (truth <= high))),
                     "median_width": float(np.median(widths[name])),
                     "zero_width": int(np.sum(widths[name] <= 1e-12)),
                     "mean_estimate_minus_truth": float(np.mean(estimate.value) - truth)}
        if name == "ppi":
            out[name]["median_lambda"] = float(np.median(estimate.lam))
    both_zero = widths["labels"] <= 0
    ratio = np.where(both_zero, 1.0, widths["ppi"] / np.where(both_zero, 1.0, widths["labels"]))
    out["width_ratio"] = float(np.median(ratio))
    out["ppi_wider_share"] = float(np.mean(widths["ppi"] > widths["labels"] * (1 + 1e-9)))
    return out


def flipped_judges(population: dict[str, dict[str, Any]], flips: Sequence[float],
                   rng: np.random.Generator) -> dict[tuple[str, float], np.ndarray]:
    noisy = {}
    for system, data in population.items():
        for flip in sorted(set(flips) | {DIFFERENCE_FLIP}):
            flipped = rng.random(data["judge"].size) < flip
            noisy[(system, flip)] = np.where(flipped, 1 - data["judge"], data["judge"])
    return noisy


def simulate(population: dict[str, dict[str, Any]], samples: int, seed: int = 0,
             sizes: Sequence[int] = SIZES, flips: Sequence[float] = FLIPS,
             designs: Sequence[str] = DESIGNS, small: Sequence[int] = SMALL_SIZES
             ) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    noisy = flipped_judges(population, flips, rng)
    results: dict[str, Any] = {"agreement": {}, "systems": [], "differences": []}
    for system, flip in noisy:
        if flip in flips:
            results["agreement"][f"{system} flip {flip:.0%}"] = float(
                np.mean(noisy[(system, flip)] == population[system]["human"]))
    for design in designs:
        domain = {s: strata_indices(population[s]["rows"], "domain") for s in SYSTEMS} \
            if design == "domain" else {}
        allocation = allocation_of(design)
        every = sorted(set(sizes) | (set(small) if design == "random" else set()))
        for n in every:
            for system in SYSTEMS:
                y = population[system]["human"]
                truth = float(y.mean())
                for flip in flips:
                    judge = noisy[(system, flip)]
                    strata = (domain[system] if design == "domain" else
                              strata_indices(population[system]["rows"], design, judge))
                    index, groups = draw(strata, n, samples, rng, allocation)
                    figures = interval_figures(y, judge, None, index, groups, strata, truth,
                                               CORNERS)
                    results["systems"].append({"design": design, "n": n, "system": system,
                                               "flip": flip, "truth": truth, **figures})
            if n not in sizes:
                continue
            for a, b in PAIRS:
                judge_a = noisy[(a, DIFFERENCE_FLIP)]
                strata = (domain[a] if design == "domain" else
                          strata_indices(population[a]["rows"], design, judge_a))
                index, groups = draw(strata, n, samples, rng, allocation)
                y = population[a]["human"] - population[b]["human"]
                f = judge_a - noisy[(b, DIFFERENCE_FLIP)]
                figures = interval_figures(y, f, None, index, groups, strata, float(y.mean()),
                                           DIFFERENCE_CORNERS,
                                           pseudo_units=DIFFERENCE_PSEUDO_UNITS,
                                           only_degenerate=True)
                results["differences"].append({"design": design, "n": n, "a": a, "b": b,
                                               "truth": float(y.mean()), **figures})
    return results


def dialogue_units(population: dict[str, dict[str, Any]], system: str, metric: str,
                   judge: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per dialogue of a system: the human total, the judge total and the size under a metric
    (tsa: correct turns of turns; jga: turns whose every turn so far is correct; success: the
    whole dialogue correct, size 1)."""
    data = population[system]
    order = [str(r["dialogue_id"]) for r in data["rows"]]
    bounds = [0] + [i for i in range(1, len(order)) if order[i] != order[i - 1]] + [len(order)]
    out = []
    for values in (data["human"], data["judge"] if judge is None else judge):
        totals = []
        for start, stop in itertools.pairwise(bounds):
            turns = values[start:stop]
            totals.append(turns.sum() if metric == "tsa" else np.cumprod(turns).sum()
                          if metric == "jga" else float(turns.all()))
        out.append(np.array(totals, dtype=float))
    sizes = np.array([stop - start for start, stop in itertools.pairwise(bounds)],
                     dtype=float)
    return out[0], out[1], sizes if metric != "success" else np.ones_like(sizes)




def simulate_dialogues(population: dict[str, dict[str, Any]], samples: int,
                       seed: int = 1, sizes: Sequence[int] = DIALOGUE_SIZES
                       ) -> list[dict[str, Any]]:
    """Whole-dialogue simple random samples (every turn of a drawn dialogue labelled): TSA and
    JGA as ratios over turns with intervals clustered by dialogue, dialogue success, and the
    TSA difference of two systems (10 %-flipped stand-in judges)."""
    rng = np.random.default_rng(seed)
    noisy = flipped_judges(population, (), np.random.default_rng(seed + 100))
    count = dialogue_units(population, SYSTEMS[0], "success")[0].size
    out = []
    for m in sizes:
        for system in SYSTEMS:
            index, groups = draw([np.arange(count)], m, samples, rng)
            for metric in ("tsa", "jga", "success"):
                y, f, t = dialogue_units(population, system, metric)
                truth = float(y.sum() / t.sum())
                figures = interval_figures(y, f, t, index, groups, [np.arange(count)], truth,
                                           CORNERS)
                out.append({"dialogues": m, "system": system, "metric": metric,
                            "truth": truth, **figures})
        for a, b in PAIRS:
            index, groups = draw([np.arange(count)], m, samples, rng)
            ya, fa, t = dialogue_units(population, a, "tsa", noisy[(a, DIFFERENCE_FLIP)])
            yb, fb, _ = dialogue_units(population, b, "tsa", noisy[(b, DIFFERENCE_FLIP)])
            truth = float((ya - yb).sum() / t.sum())
            figures = interval_figures(ya - yb, fa - fb, t, index, groups, [np.arange(count)],
                                       truth, DIFFERENCE_CORNERS,
                                       pseudo_units=DIFFERENCE_PSEUDO_UNITS,
                                       only_degenerate=True)
            out.append({"dialogues": m, "system": f"{a} − {b}", "metric": "tsa difference",
                        "truth": truth, **figures})
    return out


def simulate_planner(population: dict[str, dict[str, Any]], samples: int, seed: int = 2,
                     rates: Sequence[float] = PLAN_RATES,
                     widths: Sequence[float] = PLAN_WIDTHS) -> list[dict[str, Any]]:
    """``plan_labels`` from an assumed disagreement rate on a population that has it (the
    person's verdict flipped on exactly that share of turns, chosen at random), and from the
    2.1 stand-in's measured rate on the stand-in itself; then ``samples`` simple random
    samples of the suggested n: the share whose interval is at most the width, and coverage."""
    rng = np.random.default_rng(seed)
    data = population[SYSTEMS[0]]
    human = data["human"]
    cases: list[tuple[str, float, np.ndarray]] = []
    for rate in rates:
        judge = human.copy()
        flip = rng.choice(human.size, size=round(rate * human.size), replace=False)
        judge[flip] = 1 - judge[flip]
        cases.append((f"{rate:.0%} (assumed = actual)", rate, judge))
    actual = float(np.mean(data["judge"] != human))
    cases.append((f"2.1 stand-in ({actual:.1%} actual)", actual, data["judge"]))
    out = []
    everything = [np.arange(human.size)]
    for name, rate, judge in cases:
        rows = [{"dialogue_id": "d", "turn_index": i, "verdict": bool(v)}
                for i, v in enumerate(judge)]
        for width in widths:
            plan = plan_labels(rows, width=width, disagreement=rate)
            entry: dict[str, Any] = {"disagreement": name, "width": width}
            for key, tuning in (("labels", 0.0), ("ppi", "loo")):
                n = plan[key]["labels_needed"]
                index, groups = draw(everything, n, samples, rng)
                estimate = design_estimate(human[index], judge[index], None, groups,
                                           [Stratum.of(judge)], tuning=tuning, corners=CORNERS)
                low, high = estimate.interval(LEVEL)
                truth = float(human.mean())
                entry[key] = {"n": n, "reached": float(np.mean(high - low <= width / 100.0)),
                              "median_width": float(np.median(high - low)),
                              "coverage": float(np.mean((low <= truth) & (truth <= high)))}
            out.append(entry)
    return out


def check_targets(results: dict[str, Any]) -> list[str]:
    """Every missed target, in words (empty when all are met)."""
    misses = []
    served = [e for e in results["differences"] if e["design"] != "judge-rule"]
    for entry in [*results["systems"], *served]:  # compare refuses judge-rule differences
        name = (f"{entry['design']} n={entry['n']} "
                + (f"{entry['system']} flip {entry['flip']:.0%}" if "system" in entry
                   else f"{entry['a']} - {entry['b']}"))
        for estimate in ("labels", "ppi"):
            coverage = entry[estimate]["coverage"]
            if entry["n"] >= MIN_TURNS and coverage < 0.93:
                misses.append(f"{name}: {estimate} coverage {coverage:.3f} below 0.93")
            if entry[estimate]["zero_width"]:
                misses.append(f"{name}: {estimate} gave {entry[estimate]['zero_width']} "
                              "zero-width intervals")
    for entry in results.get("dialogues", []):
        name = f"{entry['dialogues']} dialogues {entry['system']} {entry['metric']}"
        target = 0.93 if entry["dialogues"] >= MIN_DIALOGUES else \
            0.90 if entry["dialogues"] >= 10 else None
        for estimate in ("labels", "ppi"):
            coverage = entry[estimate]["coverage"]
            if target is not None and coverage < target:
                misses.append(f"{name}: {estimate} coverage {coverage:.3f} below {target}")
            if entry[estimate]["zero_width"]:
                misses.append(f"{name}: {estimate} gave {entry[estimate]['zero_width']} "
                              "zero-width intervals")
    for entry in results.get("planner", []):
        for key in ("labels", "ppi"):
            if entry[key]["reached"] < PLAN_SHARE:
                misses.append(f"plan width {entry['width']:g} disagreement "
                              f"{entry['disagreement']}: {key} n={entry[key]['n']} reaches "
                              f"the width in {entry[key]['reached']:.1%} of samples")
    return misses


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def tables(results: dict[str, Any], samples: int) -> list[dict[str, Any]]:
    """The figures as the tables ``write_results`` records and the docs render."""
    cover = ["labels coverage (%)", "PPI coverage (%)", "labels width (points)",
             "PPI width (points)", "width ratio PPI / labels"]

    def figures(e: dict[str, Any]) -> list[str]:
        return [_pct(e["labels"]["coverage"]), _pct(e["ppi"]["coverage"]),
                _pct(e["labels"]["median_width"]), _pct(e["ppi"]["median_width"]),
                f"{e['width_ratio']:.2f}"]

    out = [{
        "title": "Stand-in agreement: judge (RULE vs 2.1, flipped) with person (RULE vs 2.4)",
        "columns": ["judge", "agreement (%)"],
        "rows": [[name, _pct(value)] for name, value in results["agreement"].items()],
    }, {
        "title": "One system: coverage of 95 % intervals and median widths",
        "columns": ["design", "n", "system", "flipped", *cover, "median λ"],
        "rows": [[e["design"], e["n"], e["system"], f"{e['flip']:.0%}", *figures(e),
                  f"{e['ppi']['median_lambda']:.2f}"] for e in results["systems"]],
        "note": (f"{samples:,} samples per row. Widths are medians; the ratio is the median "
                 "of each sample's PPI width over its labels-only width. Sizes 20 and 30 "
                 "(simple random only) show where the interval stops holding."),
    }, {
        "title": ("Difference of two systems labelled on one shared sample (strata from the "
                  f"first system's run; {DIFFERENCE_FLIP:.0%}-flipped stand-in judges)"),
        "note": ("The judge-rule rows show why `compare` refuses that design for a "
                 "difference: they are measured, not served."),
        "columns": ["design", "n", "a − b", "truth (points)", *cover],
        "rows": [[e["design"], e["n"], f"{e['a']} − {e['b']}", _pct(e["truth"]), *figures(e)]
                 for e in results["differences"]],
    }]
    if results.get("dialogues"):
        out.append({
            "title": "Whole dialogues, simple random (2.1 stand-in judge; differences with "
                     f"{DIFFERENCE_FLIP:.0%}-flipped stand-ins)",
            "columns": ["dialogues", "system", "metric", "truth (%)", *cover],
            "rows": [[e["dialogues"], e["system"], e["metric"], _pct(e["truth"]), *figures(e)]
                     for e in results["dialogues"]],
        })
    if results.get("planner"):
        out.append({
            "title": (f"The planner's promise: the suggested n gives an interval at most W "
                      f"wide in at least {PLAN_SHARE:.0%} of samples (system "
                      f"{SYSTEMS[0]})"),
            "columns": ["disagreement", "W (points)", "labels n", "labels reach W (%)",
                        "labels coverage (%)", "PPI n", "PPI reach W (%)",
                        "PPI median width", "PPI coverage (%)"],
            "rows": [[e["disagreement"], f"{e['width']:g}", e["labels"]["n"],
                      _pct(e["labels"]["reached"]), _pct(e["labels"]["coverage"]),
                      e["ppi"]["n"], _pct(e["ppi"]["reached"]),
                      _pct(e["ppi"]["median_width"]), _pct(e["ppi"]["coverage"])]
                     for e in results["planner"]],
        })
    return out


def report(figures: list[dict[str, Any]]) -> None:
    for table in figures:
        print(f"\n{table['title']}")
        widths = [max(len(str(c)), *(len(str(r[i])) for r in table["rows"]))
                  for i, c in enumerate(table["columns"])]
        print("  ".join(str(c).rjust(w) for c, w in zip(table["columns"], widths, strict=True)))
        for row in table["rows"]:
            print("  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"no data at {args.data}; pass --data DIR (the shared MultiWOZ folder)")
        return 1
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    start = time.perf_counter()
    population = load_population(args.data)
    loaded = time.perf_counter()
    results = simulate(population, args.samples, args.seed)
    turns = time.perf_counter()
    results["dialogues"] = simulate_dialogues(population, args.samples, args.seed + 1)
    dialogues = time.perf_counter()
    results["planner"] = simulate_planner(population, args.samples, args.seed + 2)
    done = time.perf_counter()
    seconds = {"load": round(loaded - start, 1), "turns": round(turns - loaded, 1),
               "dialogues": round(dialogues - turns, 1), "planner": round(done - dialogues, 1),
               "total": round(done - start, 1)}
    figures = tables(results, args.samples)
    report(figures)
    misses = check_targets(results)
    print(f"\nseconds (one core): {seconds}")
    print("targets: all met" if not misses else f"targets missed ({len(misses)}):")
    for miss in misses:
        print(f"  MISS {miss}")
    from _common import write_results  # the script's folder is on sys.path when run as one

    figures.append({"title": "Targets of issue 34",
                    "columns": ["result"],
                    "rows": [[f"missed: {m}"] for m in misses] or [["all met"]],
                    "note": (f"coverage >= 93 % for every labels and PPI interval from "
                             f"{MIN_TURNS} turns up (one system and differences, every design)"
                             f"; whole dialogues >= 93 % from {MIN_DIALOGUES} dialogues and "
                             ">= 90 % at 10; no zero-width interval anywhere; the planner's n "
                             f"reaches the width in >= {PLAN_SHARE:.0%} of samples.")})
    write_results("ppi_coverage", figures, samples=args.samples, seed=args.seed, level=LEVEL,
                  misses=misses, seconds=seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
