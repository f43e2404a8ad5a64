"""Benchmark: the estimates at their edges (issue 42). Four cases the main coverage bench
(``bench/ppi_coverage.py``) does not reach:

* **boundary**: TSA of a turn population from 2 % to 98 % (synthetic, 7,368 turns, eight
  strata of unequal accuracy), simple random and domain-like stratified samples of 50, 100 and
  200 turns, labels alone and PPI with two judges (one that disagrees with people on 3 % of
  turns at random, one lenient judge that calls half the wrong turns correct); and TSA, JGA and
  dialogue success of a dialogue population from 2 % to 98 % at 50, 100 and 200 dialogues;
* **heavy-tailed dialogues**: 1,000 dialogues of 1-45 turns (a long right tail), accuracy
  falling with length and a dialogue effect shared by its turns; whole-dialogue samples of 10
  and 25: coverage and the bias of the point estimate;
* **pilot plans**: ``labels plan`` from many 50-turn pilots of one run (the shared MultiWOZ
  stand-in: RULE against 2.1 as the judge, against 2.4 as the person): for how many pilots
  the suggested n reaches the width in at least 80 % of fresh samples;
* **uninformative judge**: the alternative-annotator test with a judge that says "correct" on
  every turn (TSA 95 %, five reviewers at 10 % label noise, ε = 0.1), a judge that says
  "correct" at the base rate regardless of the turn, and a good judge; and the per-reviewer
  test's rejection rate at the ε boundary when ties dominate.

Every interval comes from ``judge.analysis.design_estimate`` (the code the reports use) and
its ``interval`` method; ``--samples`` draws per row (default 2,000: a coverage near 95 % then
has a simulation error of 0.5 points). The script runs on any release with the same public
functions, so the same file measures before and after a change.

    python bench/ppi_edges.py [--samples 2000] [--pilots 200] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judge.analysis import CORNERS, Stratum, alt_test, design_estimate

LEVEL = 0.95
TRUTHS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.98)
TURN_SIZES = (50, 100, 200)
DIALOGUE_SIZES = (50, 100, 200)
HEAVY_SIZES = (10, 25)
STRATA = (2400, 1500, 1200, 900, 700, 400, 200, 68)
TARGET = 0.93
DIALOGUE_EFFECT = 0.5
"""SD of a dialogue's shared effect on the logit of its turns' accuracy: with the length
effect, a within-dialogue correlation of 0.03-0.12 for TSA, several times the 0.01-0.02 of the
shared MultiWOZ stand-in."""


# --------------------------------------------------------------------------- populations


def _solve(score: np.ndarray, share: float, metric: Any = None) -> float:
    """The offset ``a`` such that the population metric of ``score + a > 0`` equals ``share``
    (bisection; the metric is increasing in ``a``)."""
    metric = metric or (lambda ok: float(ok.mean()))
    low, high = -40.0, 40.0
    for _ in range(80):
        middle = (low + high) / 2
        if metric(score + middle > 0) < share:
            low = middle
        else:
            high = middle
    return high


def turn_population(truth: float, rng: np.random.Generator) -> dict[str, Any]:
    """7,368 turns in eight strata whose accuracies differ; the person's TSA is ``truth`` (up
    to one turn); two judges: ``random`` disagrees on 3 % of turns at random, ``lenient``
    calls half the wrong turns correct and 2 % of the correct ones wrong."""
    labels = np.repeat(np.arange(len(STRATA)), STRATA)
    effect = np.linspace(-1.5, 1.5, len(STRATA))[labels]
    score = effect + rng.logistic(size=labels.size)
    y = (score + _solve(score, truth) > 0).astype(float)
    flip = rng.random(y.size) < 0.03
    lenient = np.where(y == 1, (rng.random(y.size) >= 0.02), rng.random(y.size) < 0.5)
    return {"y": y, "judges": {"3 % random": np.where(flip, 1 - y, y),
                               "lenient": lenient.astype(float)},
            "strata": [np.flatnonzero(labels == h) for h in range(len(STRATA))]}


def heavy_lengths(count: int, rng: np.random.Generator) -> np.ndarray:
    """Dialogue lengths of 1-45 turns with a long right tail (median about 6)."""
    return np.clip(np.round(rng.lognormal(np.log(6.0), 0.9, count)), 1, 45).astype(int)


def dialogue_population(lengths: np.ndarray, metric: str, truth: float,
                        rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Turn labels of dialogues whose ``metric`` (tsa, jga, success) is ``truth``: a turn is
    correct when ``a − log(length) + dialogue effect + noise > 0`` (long dialogues are worse,
    turns of one dialogue move together). Returns per-dialogue human and judge totals and
    sizes under the metric; the judge is the person's verdict flipped on 5 % of turns."""
    owner = np.repeat(np.arange(lengths.size), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    score = (-np.log(lengths)[owner] + rng.normal(0, DIALOGUE_EFFECT, lengths.size)[owner]
             + rng.logistic(size=owner.size))

    def totals(ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = ok.astype(float)
        if metric == "tsa":
            return np.add.reduceat(ok, starts), lengths.astype(float)
        errors = np.cumsum(1 - ok)
        before = np.concatenate([[0.0], errors])[starts]
        clean = (errors - before[owner]) == 0  # no error so far in its dialogue
        if metric == "jga":
            return np.add.reduceat(clean.astype(float), starts), lengths.astype(float)
        whole = np.add.reduceat(clean.astype(float), starts) == lengths
        return whole.astype(float), np.ones(lengths.size)

    def value(ok: np.ndarray) -> float:
        y, t = totals(ok)
        return float(y.sum() / t.sum())

    ok = score + _solve(score, truth, value) > 0
    y, t = totals(ok)
    flipped = np.where(rng.random(ok.size) < 0.05, ~ok, ok)
    f, _ = totals(flipped)
    return {"y": y, "f": f, "t": t}


# --------------------------------------------------------------------------- sampling


def draw(members: Sequence[np.ndarray], n: int, samples: int, rng: np.random.Generator
         ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Stratified draws without replacement, proportional allocation with at least two per
    stratum (one stratum: a simple random sample)."""
    sizes = np.array([len(m) for m in members], dtype=float)
    if len(members) == 1:
        counts = [n]
    else:
        counts = np.maximum(2, np.floor(n * sizes / sizes.sum())).astype(int)
        order = np.argsort(-(n * sizes / sizes.sum() - counts))
        for h in order[: max(0, n - int(counts.sum()))]:
            counts[h] += 1
    blocks, groups, start = [], [], 0
    for m, k in zip(members, counts, strict=True):
        keys = rng.random((samples, len(m)))
        blocks.append(m[np.argpartition(keys, k - 1, axis=1)[:, :k]])
        groups.append(np.arange(start, start + k))
        start += k
    return np.concatenate(blocks, axis=1), groups


def figures(y: np.ndarray, f: np.ndarray, t: np.ndarray | None, index: np.ndarray,
            groups: list[np.ndarray], members: Sequence[np.ndarray]) -> dict[str, Any]:
    """Coverage, median width and mean error of labels alone and PPI over the draws."""
    tt = np.ones_like(y) if t is None else t
    truth = float(y.sum() / tt.sum())
    population = [Stratum.of(f[m], None if t is None else t[m]) for m in members]
    out: dict[str, Any] = {"truth": truth}
    for name, tuning in (("labels", 0.0), ("ppi", "loo")):
        estimate = design_estimate(y[index], f[index], None if t is None else t[index], groups,
                                   population, tuning=tuning, corners=CORNERS)
        low, high = estimate.interval(LEVEL)
        low, high = np.clip(low, 0, 1), np.clip(high, 0, 1)
        out[name] = {"coverage": float(np.mean((low <= truth) & (truth <= high))),
                     "below": float(np.mean(high < truth)),
                     "median_width": float(np.median(high - low)),
                     "bias": float(np.mean(estimate.value) - truth)}
    return out


# --------------------------------------------------------------------------- cases


def boundary(samples: int, seed: int, truths: Sequence[float] = TRUTHS) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for truth in truths:
        population = turn_population(truth, rng)
        for design, members in (("random", [np.arange(population["y"].size)]),
                                ("domain", population["strata"])):
            for judge_name, f in population["judges"].items():
                for n in TURN_SIZES:
                    index, groups = draw(members, n, samples, rng)
                    out.append({"unit": "turn", "metric": "tsa", "design": design,
                                "judge": judge_name, "n": n,
                                **figures(population["y"], f, None, index, groups, members)})
    lengths = heavy_lengths(1000, rng)
    for metric in ("tsa", "jga", "success"):
        for truth in truths:
            units = dialogue_population(lengths, metric, truth, rng)
            for m in DIALOGUE_SIZES:
                members = [np.arange(lengths.size)]
                index, groups = draw(members, m, samples, rng)
                out.append({"unit": "dialogue", "metric": metric, "design": "random",
                            "judge": "5 % random", "n": m,
                            **figures(units["y"], units["f"],
                                      None if metric == "success" else units["t"], index,
                                      groups, members)})
    return out


def heavy(samples: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    lengths = heavy_lengths(1000, rng)
    out = []
    for metric, truths in (("tsa", (0.6, 0.9)), ("jga", (0.3, 0.6)), ("success", (0.2, 0.5))):
        for truth in truths:
            units = dialogue_population(lengths, metric, truth, rng)
            for m in HEAVY_SIZES:
                members = [np.arange(lengths.size)]
                index, groups = draw(members, m, samples, rng)
                out.append({"metric": metric, "n": m,
                            **figures(units["y"], units["f"],
                                      None if metric == "success" else units["t"], index,
                                      groups, members)})
    return out


def pilot_plans(pilots: int, samples: int, seed: int, width: float = 10.0,
                data: Path | None = None) -> dict[str, Any] | None:
    """``labels plan`` from ``pilots`` simple random pilots of 50 turns; for each suggested n
    the share of ``samples`` fresh samples whose interval is at most ``width`` wide.

    A simple random pilot has one stratum, so its plan depends only on how many of its turns
    fall in each (label, judge) cell: ``plan_labels`` (deterministic, a fixed seed) runs once
    per composition seen, and each suggested n is measured once, on prefixes of one batch of
    fresh samples. That makes 200 pilots a few minutes' work rather than half an hour."""
    from judge.analysis import draw_sample, plan_labels

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ppi_coverage import default_data, load_population

    from judge.analysis._labels import row_key

    folder = data or default_data()
    if not (folder / "dialogues.jsonl.gz").exists():
        return None
    population = load_population(folder)["original"]
    rows, human = population["rows"], population["human"]
    judge = population["judge"]
    rng = np.random.default_rng(seed)
    stratum = [Stratum.of(judge)]
    by_key = {row_key(r): i for i, r in enumerate(rows)}
    plans: dict[tuple[int, ...], dict[str, Any]] = {}
    suggested: dict[str, list[int]] = {"labels": [], "ppi": []}
    for pilot in range(pilots):
        sample = draw_sample(rows, n=50, seed=1000 + pilot)
        labels = {t.key: int(human[by_key[t.key]]) for t in sample.turns}
        cells = np.zeros(4, dtype=int)
        for t in sample.turns:
            i = by_key[t.key]
            cells[2 * labels[t.key] + int(judge[i])] += 1
        composition = tuple(int(c) for c in cells)
        if composition not in plans:
            plans[composition] = plan_labels(rows, width=width, sample=sample, human=labels)
        for key in ("labels", "ppi"):
            suggested[key].append(plans[composition][key]["labels_needed"])
    out: dict[str, Any] = {"pilots": pilots, "width": width, "turns": int(human.size),
                           "truth": float(human.mean()),
                           "disagreement": float(np.mean(judge != human)),
                           "compositions": len(plans)}
    # fresh samples for every suggested n at once: the first n turns of a random order of a
    # simple random sample of the largest n are a simple random sample of n
    largest = max(max(sizes) for sizes in suggested.values())
    chosen = np.argpartition(rng.random((samples, human.size)), largest - 1,
                             axis=1)[:, :largest]
    order = np.take_along_axis(chosen, np.argsort(rng.random(chosen.shape), axis=1), axis=1)
    reached: dict[tuple[str, int], float] = {}
    for key in ("labels", "ppi"):
        for n in sorted(set(suggested[key])):
            index = order[:, :n]
            estimate = design_estimate(human[index], judge[index], None, [slice(None)],
                                       stratum, tuning=0.0 if key == "labels" else "loo",
                                       corners=CORNERS)
            low, high = estimate.interval(LEVEL)
            reached[(key, n)] = float(np.mean(high - low <= width / 100.0))
    for key in ("labels", "ppi"):
        share = np.array([reached[(key, n)] for n in suggested[key]])
        out[key] = {"kept": float(np.mean(share >= 0.8)), "worst": float(share.min()),
                    "median_n": float(np.median(suggested[key])),
                    "min_n": int(min(suggested[key])), "max_n": int(max(suggested[key]))}
    return out


def _boundary_p(d: np.ndarray, epsilon: float) -> float:
    """The per-reviewer test of the release under measurement."""
    from judge.analysis import _alttest

    test = getattr(_alttest, "noninferiority_test", None)
    if test is not None:
        return float(test(d, epsilon)[0])
    return float(_alttest._t_less(d, epsilon)[0])


def uninformative(runs: int, seed: int, turns: int = 100) -> list[dict[str, Any]]:
    """Share of simulated runs in which the alt-test says the judge may stand in."""
    rng = np.random.default_rng(seed)
    out = []
    for reviewers_count in (5, 3):
        for judge_name in ("constant 'correct'", "base rate", "good (5 % errors)"):
            passes = verdicts = 0
            for _ in range(runs):
                truth = (rng.random(turns) < 0.95).astype(int)
                keys = [(f"d{i // 7}", i) for i in range(turns)]
                reviewers = {f"r{j}": {k: int(v ^ (rng.random() < 0.1))
                                       for k, v in zip(keys, truth, strict=True)}
                             for j in range(reviewers_count)}
                if judge_name.startswith("constant"):
                    judge = dict.fromkeys(keys, 1)
                elif judge_name == "base rate":
                    judge = {k: int(rng.random() < 0.95) for k in keys}
                else:
                    judge = {k: int(v ^ (rng.random() < 0.05))
                             for k, v in zip(keys, truth, strict=True)}
                block = alt_test(judge, reviewers, epsilon=0.1, n_boot=0)
                assert block is not None
                passes += bool(block.get("passes"))
                verdicts += block.get("passes") is not None
            out.append({"reviewers": reviewers_count, "judge": judge_name, "turns": turns,
                        "may_stand_in": passes / runs, "verdicts": verdicts / runs})
    return out


def tie_boundary(runs: int, seed: int, epsilon: float = 0.1) -> list[dict[str, Any]]:
    """Rejection rate of the per-reviewer test when mean(W_reviewer − W_judge) is exactly ε
    and most turns are ties (P(tie) from 0.5 to 0.9), at 50 and 100 shared turns."""
    rng = np.random.default_rng(seed)
    out = []
    for ties in (0.5, 0.8, 0.9):
        for n in (50, 100):
            minus = (1 - ties - epsilon) / 2
            plus = minus + epsilon
            rejected = 0
            for _ in range(runs):
                u = rng.random(n)
                d = np.where(u < plus, 1.0, np.where(u < plus + minus, -1.0, 0.0))
                rejected += _boundary_p(d, epsilon) <= 0.05
            out.append({"ties": ties, "n": n, "rejection": rejected / runs})
    return out


# --------------------------------------------------------------------------- report


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def summarise(boundary_rows: list[dict[str, Any]]) -> list[list[str]]:
    """Worst coverage per (unit, metric, design, n, estimate) over the true values."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for e in boundary_rows:
        groups.setdefault((e["unit"], e["metric"], e["design"], e["n"]), []).append(e)
    rows = []
    for (unit, metric, design, n), entries in groups.items():
        cells: list[str] = [unit, metric, design, str(n)]
        for key in ("labels", "ppi"):
            worst = min(entries, key=lambda e: e[key]["coverage"])
            cells += [_pct(worst[key]["coverage"]), f"{_pct(worst['truth'])} ({worst['judge']})"]
        rows.append(cells)
    return rows


WIDTH_TRUTHS = (0.05, 0.5, 0.8, 0.9, 0.95, 0.98)


def widths(boundary_rows: list[dict[str, Any]]) -> list[list[str]]:
    """Median widths, labels / PPI, per (unit, metric, n) at :data:`WIDTH_TRUTHS`."""
    out = []
    for unit, metric, sizes in (("turn", "tsa", TURN_SIZES), ("dialogue", "tsa", DIALOGUE_SIZES),
                                ("dialogue", "jga", DIALOGUE_SIZES),
                                ("dialogue", "success", DIALOGUE_SIZES)):
        for n in sizes:
            cells: list[str] = [unit, metric, str(n)]
            for truth in WIDTH_TRUTHS:
                cells.append(next((f"{_pct(e['labels']['median_width'])} / "
                                   f"{_pct(e['ppi']['median_width'])}"
                                   for e in boundary_rows
                                   if e["unit"] == unit and e["metric"] == metric
                                   and e["n"] == n and e["design"] == "random"
                                   and e["judge"] in ("3 % random", "5 % random")
                                   and abs(e["truth"] - truth) < 0.005), "—"))
            out.append(cells)
    return out


def tables(results: dict[str, Any], samples: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{
        "title": "Near 0 and 100 %: the lowest coverage over true values 2-98 % (both judges)",
        "columns": ["unit", "metric", "design", "n", "labels: lowest coverage (%)",
                    "at truth (%)", "PPI: lowest coverage (%)", "at truth (%)"],
        "rows": summarise(results["boundary"]),
        "note": (f"{samples:,} samples per true value, judge and size; true values "
                 f"{', '.join(_pct(t) for t in TRUTHS)} %."),
    }, {
        "title": "Near 0 and 100 %, turns: coverage (%) at each true TSA (simple random, "
                 "3 %-random judge; labels / PPI)",
        "columns": ["true TSA (%)", *(f"n = {n}" for n in TURN_SIZES)],
        "rows": [[_pct(t)] + [next((f"{_pct(e['labels']['coverage'])} / "
                                    f"{_pct(e['ppi']['coverage'])}"
                                    for e in results["boundary"]
                                   if e["unit"] == "turn" and e["design"] == "random"
                                   and e["judge"] == "3 % random" and e["n"] == n
                                   and abs(e["truth"] - t) < 0.005), "—")
                              for n in TURN_SIZES] for t in TRUTHS],
    }, {
        "title": "Median width (points) of the interval at some true values, labels / PPI "
                 "(turns: simple random, 3 %-random judge)",
        "columns": ["unit", "metric", "n", *(f"{_pct(t)} %" for t in WIDTH_TRUTHS)],
        "rows": widths(results["boundary"]),
    }, {
        "title": "Heavy-tailed dialogues (1-45 turns, accuracy falling with length): whole-"
                 "dialogue simple random samples",
        "columns": ["metric", "dialogues", "truth (%)", "labels coverage (%)",
                    "labels misses above (%)", "labels bias (points)", "labels width (points)",
                    "PPI coverage (%)", "PPI bias (points)", "PPI width (points)"],
        "rows": [[e["metric"], e["n"], _pct(e["truth"]), _pct(e["labels"]["coverage"]),
                  _pct(1 - e["labels"]["coverage"] - e["labels"]["below"]),
                  f"{100 * e['labels']['bias']:+.2f}", _pct(e["labels"]["median_width"]),
                  _pct(e["ppi"]["coverage"]), f"{100 * e['ppi']['bias']:+.2f}",
                  _pct(e["ppi"]["median_width"])] for e in results["heavy"]],
        "note": "'misses above': the interval lies wholly above the truth; widths are medians.",
    }]
    if not results["boundary"]:
        out = out[3:]
    out = [t for t in out if t["rows"]]
    plans = results.get("plans")
    if plans:
        out.append({
            "title": (f"Plans from a 50-turn pilot: share of {plans['pilots']} pilots whose "
                      f"suggested n gives an interval at most {plans['width']:g} points wide "
                      f"in >= 80 % of fresh samples ({plans['turns']} turns, TSA "
                      f"{_pct(plans['truth'])} %, disagreement {_pct(plans['disagreement'])} %)"),
            "columns": ["estimate", "pilots kept (%)", "worst pilot reaches W (%)",
                        "median n", "n range"],
            "rows": [[key, _pct(plans[key]["kept"]), _pct(plans[key]["worst"]),
                      f"{plans[key]['median_n']:g}",
                      f"{plans[key]['min_n']}-{plans[key]['max_n']}"]
                     for key in ("labels", "ppi")],
        })
    if not results["alt"]:
        return out
    out.append({
        "title": ("Alternative-annotator test: share of runs saying the judge may stand in "
                  "(TSA 95 %, reviewers at 10 % label noise, ε = 0.1)"),
        "columns": ["reviewers", "turns", "judge", "may stand in (%)", "runs with a verdict (%)"],
        "rows": [[e["reviewers"], e["turns"], e["judge"], _pct(e["may_stand_in"]),
                  _pct(e["verdicts"])] for e in results["alt"]],
    })
    out.append({
        "title": "Per-reviewer test at the ε boundary (mean difference exactly ε = 0.1): "
                 "rejection rate at nominal 5 %",
        "columns": ["tie share", "turns", "rejected (%)"],
        "rows": [[_pct(e["ties"]), e["n"], _pct(e["rejection"])] for e in results["ties"]],
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


def misses(results: dict[str, Any]) -> list[str]:
    out = []
    for e in results["boundary"]:
        for key in ("labels", "ppi"):
            if e[key]["coverage"] < TARGET:
                out.append(f"{e['unit']} {e['metric']} {e['design']} n={e['n']} truth "
                           f"{_pct(e['truth'])} {e['judge']}: {key} {_pct(e[key]['coverage'])}")
    for e in results["heavy"]:
        for key in ("labels", "ppi"):
            if e["n"] >= 25 and e[key]["coverage"] < TARGET:
                out.append(f"heavy {e['metric']} {e['n']} dialogues: {key} "
                           f"{_pct(e[key]['coverage'])}")
    plans = results.get("plans")
    for key in ("labels", "ppi"):
        if plans and plans[key]["kept"] < 0.8:
            out.append(f"pilot plans: {key} kept for {_pct(plans[key]['kept'])} % of pilots")
    for e in results["alt"]:
        if not e["judge"].startswith("good") and e["may_stand_in"] > 0.05:
            out.append(f"alt-test {e['judge']} ({e['reviewers']} reviewers): may stand in in "
                       f"{_pct(e['may_stand_in'])} % of runs")
    for e in results["ties"]:
        if e["rejection"] > 0.07:
            out.append(f"ε boundary, ties {_pct(e['ties'])} %, n {e['n']}: rejects "
                       f"{_pct(e['rejection'])} %")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--pilots", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=None,
                        help="the shared MultiWOZ folder (for the pilot plans)")
    parser.add_argument("--cases", default="boundary,heavy,alt,plans",
                        help="which cases to run (comma-separated)")
    parser.add_argument("--name", default="ppi_edges",
                        help="results file name (bench/results/NAME.json), so that cases run "
                        "apart on a busy machine each keep their figures")
    parser.add_argument("--no-write", action="store_true",
                        help="print only (for a measurement of another release)")
    args = parser.parse_args()
    clock = {"start": time.perf_counter()}
    cases = set(args.cases.split(","))
    results: dict[str, Any] = {"boundary": [], "heavy": [], "alt": [], "ties": [],
                               "plans": None}
    if "boundary" in cases:
        results["boundary"] = boundary(args.samples, args.seed)
    clock["boundary"] = time.perf_counter()
    if "heavy" in cases:
        results["heavy"] = heavy(args.samples, args.seed + 1)
    clock["heavy"] = time.perf_counter()
    if "alt" in cases:
        results["alt"] = uninformative(args.samples, args.seed + 3)
        results["ties"] = tie_boundary(args.samples * 5, args.seed + 4)
    clock["alt"] = time.perf_counter()
    if "plans" in cases and args.pilots:
        results["plans"] = pilot_plans(args.pilots, args.samples, args.seed + 2,
                                       data=args.data)
    clock["plans"] = time.perf_counter()
    figures = tables(results, args.samples)
    report(figures)
    missed = misses(results)
    names = list(clock)
    seconds = {b: round(clock[b] - clock[a], 1) for a, b in itertools.pairwise(names)}
    print(f"\nseconds (wall): {seconds}")
    print("targets: all met" if not missed else f"targets missed ({len(missed)}):")
    for miss in missed:
        print(f"  MISS {miss}")
    if args.no_write:
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import write_results

    figures.append({"title": "Targets of issue 42", "columns": ["result"],
                    "rows": [[f"missed: {m}"] for m in missed] or [["all met"]],
                    "note": ("coverage >= 93 % at every true value 2-98 % (turns 50-200, "
                             "dialogues 50-200), and for heavy-tailed dialogues from 25; "
                             "pilot plans kept for >= 80 % of pilots; an uninformative judge "
                             "may stand in in <= 5 % of runs; the per-reviewer test rejects "
                             "<= 7 % at the ε boundary.")})
    write_results(args.name, figures, samples=args.samples, pilots=args.pilots,
                  seed=args.seed, level=LEVEL, misses=missed, seconds=seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
