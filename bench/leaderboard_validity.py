"""Benchmark: do the leaderboard's tests keep their error rate and its intervals their
coverage on real DST output?

1. **Type-I error.** Two systems that are equally good by construction, with the
   within-dialogue correlation of real output: for each dialogue, at random, system A takes
   real system X's predictions and B takes Y's, or the other way round (X, Y two of the
   shared runs, drawn for each comparison). The paired test clustered by dialogue should
   reject in about 5 % of comparisons at alpha = 0.05; beside it, what a per-turn paired t
   test (turns as independent) and an unpaired per-turn two-proportion test give.
2. **Coverage.** Test sets drawn from the shared set (its dialogues resampled with
   replacement, the shared set standing for the population): how often the 95 % interval of
   each system's figure, and of each pair's difference, holds the population value; beside
   it, the per-turn (independent turns) interval.

Both use the same functions as ``dst-judge leaderboard`` (judge.analysis); the per-turn
verdicts come from judge.metrics.turn_verdicts on the shared MultiWOZ test set (gold 2.4).

    python bench/leaderboard_validity.py [--data ../shared/data/multiwoz] [--null 2000]
        [--coverage 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
from _common import peak_rss_mb, write_results  # the script's own folder is on sys.path
from scipy import stats

from judge import MetricOptions, load_dialogues, load_predictions, load_schema
from judge.analysis import difference, interval, jackknife_estimate, ratio_estimate
from judge.metrics import gca_from_counts, turn_verdicts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "multiwoz"
SYSTEMS = ("original", "da", "da-p")
METRICS = ("jga", "sa", "fga", "gca")
ALPHA = 0.05


def per_dialogue(data: Path, version: str) -> tuple[dict[str, dict[str, np.ndarray]],
                                                    np.ndarray, np.ndarray]:
    """Per system and metric: per-dialogue sums (``[G]``, GCA ``[G, 4]``) and sums of squares
    of the per-turn values (for the per-turn variance); the turns per dialogue."""
    schema = load_schema(data / "schema.json")
    dialogues = load_dialogues(data / "dialogues.jsonl.gz")
    options = MetricOptions(breakdowns=False)
    turns = np.array([len(d.turns) for d in dialogues.dialogues], dtype=np.float64)
    cluster = np.repeat(np.arange(len(turns)), turns.astype(int))
    out: dict[str, dict[str, np.ndarray]] = {}
    for name in SYSTEMS:
        predictions = load_predictions(data / "predictions" / f"{name}.jsonl.gz", dialogues,
                                       schema)
        v = turn_verdicts(dialogues, predictions, schema, version=version, options=options,
                          fga_lambda=0.5)
        figures: dict[str, np.ndarray] = {}
        for metric, values in (("jga", v.jga.astype(float)), ("sa", v.sa), ("fga", v.fga)):
            figures[metric] = np.bincount(cluster, weights=values)
            figures[metric + "_sq"] = np.bincount(cluster, weights=values**2)
        figures["gca"] = np.stack([np.bincount(cluster, weights=v.changes[:, k])
                                   for k in range(4)], axis=1)
        out[name] = figures
    return out, turns, cluster


def estimate(figures: dict[str, np.ndarray], metric: str, turns: np.ndarray, rows=None):
    if metric == "gca":
        counts = figures["gca"] if rows is None else figures["gca"][rows]
        return jackknife_estimate(counts, gca_from_counts)
    sums = figures[metric] if rows is None else figures[metric][rows]
    return ratio_estimate(sums, turns if rows is None else turns[rows])


def per_turn_se(figures: dict[str, np.ndarray], metric: str, turns: np.ndarray) -> float:
    """The standard error of a mean over turns taken as independent."""
    n = turns.sum()
    mean = figures[metric].sum() / n
    variance = figures[metric + "_sq"].sum() / n - mean**2
    return float(np.sqrt(variance * n / (n - 1) / n))


def null_rates(data: dict[str, dict[str, np.ndarray]], turns: np.ndarray,
               replicates: int, rng: np.random.Generator) -> list[list[str]]:
    """Rejection rates at ALPHA of the clustered paired test and two per-turn tests."""
    pairs = list(itertools.combinations(SYSTEMS, 2))
    rejected = {m: np.zeros(3) for m in METRICS}
    n = turns.sum()
    for _ in range(replicates):
        x, y = pairs[rng.integers(len(pairs))]
        swap = rng.random(turns.size) < 0.5
        for metric in METRICS:
            keys = [metric] if metric == "gca" else [metric, metric + "_sq"]
            a = {k: np.where(swap[:, None] if data[x][k].ndim == 2 else swap,
                             data[y][k], data[x][k]) for k in keys}
            b = {k: np.where(swap[:, None] if data[x][k].ndim == 2 else swap,
                             data[x][k], data[y][k]) for k in keys}
            clustered = difference(estimate(a, metric, turns), estimate(b, metric, turns),
                                   1 - ALPHA)
            rejected[metric][0] += clustered.p < ALPHA
            if metric == "gca":
                rejected[metric][1:] = np.nan
                continue
            # per turn, unpaired: the two means as independent, turns as independent
            mean_a, mean_b = a[metric].sum() / n, b[metric].sum() / n
            var_a = a[metric + "_sq"].sum() / n - mean_a**2
            var_b = b[metric + "_sq"].sum() / n - mean_b**2
            z = (mean_a - mean_b) / np.sqrt((var_a + var_b) / n)
            rejected[metric][2] += 2 * stats.norm.sf(abs(z)) < ALPHA
            rejected[metric][1] = np.nan
    return [[METRICS_LABEL[m], f"{100 * r[0] / replicates:.1f}",
             "–" if np.isnan(r[2]) else f"{100 * r[2] / replicates:.1f}"]
            for m, r in rejected.items()]


METRICS_LABEL = {"jga": "JGA", "sa": "slot accuracy", "fga": "FGA", "gca": "GCA"}


def null_rates_jga_paired_per_turn(verdicts: dict[str, np.ndarray], cluster: np.ndarray,
                                   turns: np.ndarray, replicates: int,
                                   rng: np.random.Generator) -> float:
    """The per-turn paired t test on JGA (turn differences as independent), same nulls."""
    pairs = list(itertools.combinations(SYSTEMS, 2))
    hits = 0
    for _ in range(replicates):
        x, y = pairs[rng.integers(len(pairs))]
        swap = (rng.random(turns.size) < 0.5)[cluster]
        d = np.where(swap, verdicts[y] - verdicts[x], verdicts[x] - verdicts[y])
        t = d.mean() / (d.std(ddof=1) / np.sqrt(d.size))
        hits += 2 * stats.t.sf(abs(t), d.size - 1) < ALPHA
    return 100 * hits / replicates


def coverage(data: dict[str, dict[str, np.ndarray]], turns: np.ndarray, replicates: int,
             size: int, rng: np.random.Generator) -> list[list[str]]:
    """Share of resampled test sets of ``size`` dialogues whose interval holds the full
    set's value: systems and pairwise differences, clustered and per turn."""
    truth = {(s, m): estimate(data[s], m, turns).value for s in SYSTEMS for m in METRICS}
    pairs = list(itertools.combinations(SYSTEMS, 2))
    held: dict[tuple[str, str], list[int]] = {}
    for _ in range(replicates):
        rows = rng.integers(0, turns.size, size=size)
        for metric in METRICS:
            found = {s: estimate(data[s], metric, turns, rows) for s in SYSTEMS}
            counts = held.setdefault(("system", metric), [0, 0, 0])
            for s in SYSTEMS:
                ci = interval(found[s], 0.95)
                counts[0] += ci.low <= truth[(s, metric)] <= ci.high
                counts[2] += 1
                if metric != "gca":
                    sub = {k: v[rows] for k, v in data[s].items() if k != "gca"}
                    se = per_turn_se(sub, metric, turns[rows])
                    counts[1] += abs(found[s].value - truth[(s, metric)]) <= 1.96 * se
            pair_counts = held.setdefault(("difference", metric), [0, 0, 0])
            for a, b in pairs:
                ci = difference(found[a], found[b], 0.95)
                target = truth[(a, metric)] - truth[(b, metric)]
                pair_counts[0] += ci.low <= target <= ci.high
                pair_counts[2] += 1
    rows_out = []
    for (kind, metric), (clustered, per_turn, total) in held.items():
        naive = "–" if metric == "gca" or kind == "difference" else (
            f"{100 * per_turn / total:.1f}")
        rows_out.append([f"{METRICS_LABEL[metric]} ({kind})", str(size),
                         f"{100 * clustered / total:.1f}", naive])
    return rows_out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--null", type=int, default=2000)
    parser.add_argument("--coverage", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--version", default="2.4")
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"no data at {args.data}; pass --data DIR (the shared MultiWOZ folder)")
        return 1
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    data, turns, cluster = per_dialogue(args.data, args.version)
    # 0/1 JGA per turn of each system, for the per-turn paired t test
    schema = load_schema(args.data / "schema.json")
    dialogues = load_dialogues(args.data / "dialogues.jsonl.gz")
    jga = {}
    for name in SYSTEMS:
        predictions = load_predictions(args.data / "predictions" / f"{name}.jsonl.gz",
                                       dialogues, schema)
        jga[name] = turn_verdicts(dialogues, predictions, schema, version=args.version,
                                  options=MetricOptions(breakdowns=False),
                                  fga_lambda=0.5).jga.astype(float)
    null = null_rates(data, turns, args.null, rng)
    paired_per_turn = null_rates_jga_paired_per_turn(jga, cluster, turns, args.null, rng)
    null_table = [[label, clustered,
                   f"{paired_per_turn:.1f}" if label == "JGA" else "–", unpaired]
                  for label, clustered, unpaired in null]
    print(f"null comparisons: {args.null} (gold {args.version}, alpha {ALPHA})")
    print(f"{'metric':14s} {'clustered paired':>17s} {'per-turn paired':>16s} "
          f"{'per-turn unpaired':>18s}")
    for row in null_table:
        print(f"{row[0]:14s} {row[1]:>16s}% {row[2]:>15s}% {row[3]:>17s}%")
    cover = (coverage(data, turns, args.coverage, turns.size, rng)
             + coverage(data, turns, args.coverage // 2, 100, rng))
    print(f"coverage of 95% intervals: {args.coverage} resampled test sets of "
          f"{turns.size} dialogues ({args.coverage // 2} of 100)")
    for row in cover:
        print(f"{row[0]:28s} G={row[1]:>4s}  clustered {row[2]:>5s}%  per turn {row[3]:>5s}%")
    seconds = time.perf_counter() - start
    print(f"time {seconds:.0f} s, peak RSS {peak_rss_mb():.0f} MB")
    write_results("leaderboard_validity", [
        {"title": f"Rejection rate of {args.null} null comparisons at alpha = 0.05 (two "
                  "systems equally good by construction: real systems' predictions swapped "
                  "dialogue by dialogue at random)",
         "columns": ["metric", "clustered paired test (%)", "per-turn paired t test (%)",
                     "per-turn unpaired test (%)"],
         "rows": null_table,
         "note": "Target 4-6 %. The per-turn tests take turns as independent; they are what "
                 "a leaderboard without clustering would report."},
        {"title": "Coverage of 95 % intervals on test sets resampled from the shared set",
         "columns": ["figure", "dialogues per test set", "clustered interval (%)",
                     "per-turn interval (%)"],
         "rows": cover,
         "note": f"{args.coverage} test sets of {turns.size} dialogues, {args.coverage // 2} "
                 "of 100; each system's figure and each pair's difference against the full "
                 "set's value. Target >= 94 %."},
    ], null_comparisons=args.null, coverage_replicates=args.coverage, gold=args.version,
        seconds=round(seconds, 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
