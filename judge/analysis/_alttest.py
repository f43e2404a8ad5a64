"""Can the judge stand in for one of the reviewers? The alternative-annotator test of Calderon,
Reichart and Dror (2025), "The Alternative Annotator Test for LLM-as-a-Judge".

Agreement with a majority label says how often the judge matches the humans, not whether it
matches them *as well as another human does*. The test answers the second question without a
gold label, leaving one reviewer out at a time:

* for reviewer j, take the turns j labelled on which at least one other reviewer gave a label;
  on each turn i, score how well the judge aligns with the *other* reviewers and how well j
  does (binary labels: the share of the others giving the same label);
* ``W^f_i = 1`` when the judge's score is at least j's, ``W^h_i = 1`` when j's is at least the
  judge's (a tie counts for both); ``ρ^f_j = mean W^f`` is the judge's advantage probability
  over j, ``ρ^h_j = mean W^h`` j's over the judge;
* a one-sided test of ``H0: P(W^h = 1) − P(W^f = 1) ≥ ε`` against ``H1: < ε``: rejecting it
  says the judge is not worse than j by more than ε, the allowance the judge earns by being
  cheaper and faster (ε = 0.1 by default; a larger ε asks less of the judge). ε is a gap
  between two advantage probabilities (shares of turns on which one aligns with the other
  reviewers at least as well as the other does), not between agreement rates. The paper uses
  a paired t-test on ``W^h − W^f``; that difference is 0 on every tie, and when ties dominate
  (most turns uncontroversial) the t-test rejects 10-13 % of the time at the ε boundary
  instead of 5 % (``bench/ppi_edges.py``). We use Tango's (1998) score test for a difference
  of paired proportions instead, which holds its level there;
* the p-values of all reviewers go through the Benjamini–Yekutieli procedure at q = 0.05 (the
  paper's choice: it controls the false discovery rate under any dependence between the tests,
  and the tests share the judge and the reviewers);
* the winning rate ω is the share of reviewers whose H0 is rejected; the judge may stand in for
  one of these reviewers when ω ≥ 0.5.

Each reviewer needs enough shared turns for the test to mean anything; reviewers with fewer
than :data:`MIN_SHARED` are named with the number they have, and the test is not run at all
unless at least two reviewers qualify ("not enough overlap"). A verdict needs
:data:`MIN_REVIEWERS` tested reviewers (the authors' advice: with two, the test only asks
whether the judge agrees with one reviewer more than the other does); with two the figures are
given without a verdict. The judge's and each reviewer's agreement with the others are
reported beside the test, with intervals from a bootstrap that resamples dialogues, and the
share of tied turns (on which ``W^f = W^h = 1``).

**A judge that says nothing.** When nearly every turn gets the same label, a judge giving that
label on every turn agrees with the others' majority more often than a reviewer with a little
label noise does, and passes the test without looking at a turn (a constant "correct" at TSA
95 % and five reviewers at 10 % noise passed in 99 % of simulated runs). So the same test is
run for that constant judge (the label most reviewers' labels carry); when it would pass too,
the labels are too unbalanced for the test to tell, and there is no verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from ._labels import TurnKey
from ._statistics import cluster_bootstrap, percentile_interval
from .reports import AltTest

EPSILON = 0.1
"""The default ε: how much worse than a reviewer the judge may be and still stand in."""

Q = 0.05
"""The false discovery rate of the Benjamini–Yekutieli procedure over reviewers."""

MIN_SHARED = 30
"""Fewest turns a reviewer must share with another reviewer (and the judge) to be tested. The
authors ask for 50-100 instances; below 30 a t-test on 0/±1 differences is too rough."""

WINNING_RATE = 0.5
"""The judge may stand in for a reviewer when at least this share of reviewers lose to it."""

MIN_REVIEWERS = 3
"""Fewest tested reviewers for a verdict (the authors recommend at least three: with two the
test has no consensus to compare with, only one reviewer against the other)."""


def noninferiority_test(d: np.ndarray, epsilon: float) -> tuple[float, float | None]:
    """Tango's (1998) score test of ``H0: P(d = 1) − P(d = −1) ≥ ε`` against ``< ε`` for
    paired 0/1 outcomes (``d = W^h − W^f`` in {−1, 0, 1}): (p-value, z).

    The variance is taken at the restricted maximum-likelihood estimate under ``H0`` (the root
    of ``2n q² + (−b − c + (2n − b + c)ε) q − cε(1 − ε) = 0`` for ``q = P(d = −1)``, ``b`` and
    ``c`` the counts of +1 and −1), not at the sample, so a sample with few non-ties does not
    get a variance near 0 and a spurious rejection."""
    from scipy.stats import norm

    d = np.asarray(d, dtype=float)
    n = d.size
    if n == 0:
        return 1.0, None
    b, c = float(np.sum(d > 0)), float(np.sum(d < 0))
    e = float(epsilon)
    big_a, big_b, big_c = 2.0 * n, -b - c + (2.0 * n - b + c) * e, -c * e * (1.0 - e)
    q = (-big_b + np.sqrt(max(big_b * big_b - 4.0 * big_a * big_c, 0.0))) / (2.0 * big_a)
    spread = n * (2.0 * q + e * (1.0 - e))
    if spread <= 0:
        return (0.0 if (b - c) / n < e else 1.0), None
    z = (b - c - n * e) / np.sqrt(spread)
    return float(norm.cdf(z)), float(z)


def _t_less(d: np.ndarray, epsilon: float) -> tuple[float, float | None]:
    """One-sided one-sample t-test of ``mean(d) ≥ ε`` against ``< ε``: (p-value, t).

    Differences that never vary leave the t statistic undefined; the p-value is then 0 when
    their common value is below ε and 1 otherwise (no doubt either way on these turns)."""
    from scipy.stats import t as student

    n = d.size
    spread = float(np.std(d, ddof=1)) if n > 1 else 0.0
    if spread == 0.0:
        return (0.0 if float(d.mean()) < epsilon else 1.0), None
    statistic = (float(d.mean()) - epsilon) / (spread / np.sqrt(n))
    return float(student.cdf(statistic, n - 1)), statistic


def benjamini_yekutieli(p_values: Sequence[float], q: float = Q) -> list[bool]:
    """Which hypotheses the Benjamini–Yekutieli step-up procedure rejects at level ``q``:
    the k smallest p-values, k the largest with ``p_(k) ≤ k·q / (m·Σ_{i≤m} 1/i)``."""
    m = len(p_values)
    if m == 0:
        return []
    harmonic = float(np.sum(1.0 / np.arange(1, m + 1)))
    order = np.argsort(p_values, kind="stable")
    passed = [k for k in range(1, m + 1) if p_values[order[k - 1]] <= k * q / (m * harmonic)]
    cut = max(passed, default=0)
    rejected = [False] * m
    for k in range(cut):
        rejected[int(order[k])] = True
    return rejected


def _share_interval(per_turn: np.ndarray, dialogues: Sequence[str], n_boot: int,
                    confidence: float, rng: np.random.Generator) -> list[float] | None:
    """Percentile interval of a mean over turns, resampling dialogues."""
    if n_boot <= 0 or per_turn.size == 0:
        return None
    names = list(dict.fromkeys(dialogues))
    index = {d: i for i, d in enumerate(names)}
    sums = np.zeros((len(names), 2))
    for value, dialogue in zip(per_turn, dialogues, strict=True):
        sums[index[dialogue]] += (value, 1.0)
    boot = cluster_bootstrap(sums, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        return percentile_interval(100.0 * boot[:, 0] / boot[:, 1], confidence)


def alt_test(judge: Mapping[TurnKey, int], reviewers: Mapping[str, Mapping[TurnKey, int]], *,
             epsilon: float = EPSILON, q: float = Q, n_boot: int = 1000,
             confidence: float = 0.95, seed: int = 0, _guard: bool = True
             ) -> AltTest | None:
    """The alternative-annotator test of the judge against reviewers (None with fewer than two
    reviewers). ``judge`` and ``reviewers[name]``: turn key → 0/1 label (definite labels only).

    Returns ``epsilon``, ``q``, ``correction`` (the procedure's name), ``reviewers`` (one entry
    per reviewer: shared turns, the judge's and the reviewer's agreement with the others in %
    with intervals, ``rho_judge`` and ``rho_reviewer``, the p-value and whether H0 is rejected;
    or a ``note`` when the reviewer shares too few turns), ``winning_rate`` ω,
    ``average_advantage`` (mean ``rho_judge``), ``tie_share``, ``verdict``, ``passes`` (None
    when there is no verdict: fewer than :data:`MIN_REVIEWERS` reviewers, or labels so
    unbalanced that a constant judge passes too; ``constant_judge`` then says which) and
    ``enough_overlap``. ``_guard`` False skips the constant-judge check (used for that run).
    """
    names = list(reviewers)
    if len(names) < 2:
        return None
    if not 0 <= epsilon < 1:
        raise ValueError(f"epsilon must lie in [0, 1) (got {epsilon!r})")
    rng = np.random.default_rng(seed)
    entries: list[dict[str, Any]] = []
    tested: list[int] = []
    p_values: list[float] = []
    for name in names:
        own = reviewers[name]
        keys = [k for k in own if k in judge
                and any(k in reviewers[o] for o in names if o != name)]
        entry: dict[str, Any] = {"reviewer": name, "shared_turns": len(keys)}
        entries.append(entry)
        if len(keys) < MIN_SHARED:
            entry["note"] = (f"{name} shares {len(keys)} labelled turn(s) with the other "
                             f"reviewers; the test needs at least {MIN_SHARED}")
            continue
        judge_score, own_score = np.zeros(len(keys)), np.zeros(len(keys))
        for i, key in enumerate(keys):
            others = [reviewers[o][key] for o in names if o != name and key in reviewers[o]]
            judge_score[i] = np.mean([label == judge[key] for label in others])
            own_score[i] = np.mean([label == own[key] for label in others])
        w_judge = (judge_score >= own_score).astype(float)
        w_human = (own_score >= judge_score).astype(float)
        p, statistic = noninferiority_test(w_human - w_judge, epsilon)
        dialogues = [k[0] for k in keys]
        entry.update({
            "judge_agreement": {"value": 100.0 * float(judge_score.mean()),
                                "ci": _share_interval(judge_score, dialogues, n_boot,
                                                      confidence, rng)},
            "reviewer_agreement": {"value": 100.0 * float(own_score.mean()),
                                   "ci": _share_interval(own_score, dialogues, n_boot,
                                                         confidence, rng)},
            "rho_judge": float(w_judge.mean()), "rho_reviewer": float(w_human.mean()),
            "ties": float(np.mean(judge_score == own_score)),
            "judge_better": float(np.mean(judge_score > own_score)),
            "reviewer_better": float(np.mean(own_score > judge_score)),
            "z": statistic, "p_value": p,
        })
        tested.append(len(entries) - 1)
        p_values.append(p)
    out: dict[str, Any] = {
        "epsilon": epsilon, "q": q, "correction": "Benjamini-Yekutieli",
        "minimum_shared_turns": MIN_SHARED, "reviewers": entries,
        "method": ("Calderon et al. (2025): leave each reviewer out; on the turns they "
                   "labelled, the share of the other reviewers agreeing with the judge and "
                   "with them; W = 1 where one aligns at least as well as the other (ties "
                   "count for both); one-sided Tango score test of P(W_reviewer) - P(W_judge) "
                   ">= epsilon (the paper's t-test over-rejects when ties dominate); "
                   "Benjamini-Yekutieli over reviewers; a verdict needs three reviewers and "
                   "labels balanced enough that a constant judge would not pass"),
        "rho_meaning": ("rho judge: share of turns on which the judge agrees with the other "
                        "reviewers at least as well as the reviewer does (a tie counts for "
                        "both, so rho judge + rho reviewer = 1 + tie share)"),
    }
    if len(tested) < 2:
        short = ", ".join(f"{e['reviewer']}: {e['shared_turns']}" for e in entries
                          if "note" in e)
        out.update({"enough_overlap": False, "winning_rate": None, "average_advantage": None,
                    "passes": None, "verdict": (
                        f"not enough overlap: the test needs at least two reviewers who each "
                        f"share at least {MIN_SHARED} labelled turns with another reviewer; "
                        f"{len(tested)} do (shared turns: {short}). Have two or more "
                        "reviewers label the same turns.")})
        return cast(AltTest, out)
    rejected = benjamini_yekutieli(p_values, q)
    for index, reject in zip(tested, rejected, strict=True):
        entries[index]["rejected"] = reject
    omega = float(np.mean(rejected))
    tested_entries = [entries[i] for i in tested]
    out.update({
        "enough_overlap": True, "winning_rate": omega, "tested_reviewers": len(tested),
        "average_advantage": float(np.mean([e["rho_judge"] for e in tested_entries])),
        "tie_share": float(np.mean([e["ties"] for e in tested_entries])),
    })
    wins = (f"it wins against {sum(rejected)} of {len(tested)} (ω = {omega:.2f}, ε = "
            f"{epsilon:g})")
    if len(tested) < MIN_REVIEWERS:
        out.update({"passes": None, "verdict": (
            f"no verdict: {wins}, but a verdict needs at least {MIN_REVIEWERS} reviewers: with "
            f"{len(tested)} the test only asks whether the judge agrees with one reviewer more "
            "often than the other does, with no consensus to compare with (Calderon et al. "
            "recommend three or more). Have a third reviewer label the same turns.")})
        return cast(AltTest, out)
    constant = _constant_judge(judge, reviewers) if _guard else None
    if omega >= WINNING_RATE and constant is not None:
        label, share = constant
        baseline = alt_test(dict.fromkeys(judge, label), reviewers, epsilon=epsilon, q=q,
                            n_boot=0, confidence=confidence, seed=seed, _guard=False)
        out["constant_judge"] = {"label": label, "label_share": share,
                                 "winning_rate": baseline["winning_rate"] if baseline else None}
        if baseline and baseline.get("passes"):
            word = "correct" if label == 1 else "wrong"
            out.update({"passes": None, "unbalanced": True, "verdict": (
                f"no verdict: {wins}, but the labels are too unbalanced for the test to mean "
                f"much: {100 * share:.0f} % of the reviewers' labels say '{word}', and a judge "
                f"answering '{word}' on every turn would pass too (ω = "
                f"{baseline['winning_rate']:.2f}). Judge it on the agreement figures, or label "
                "a sample with more turns of the other kind.")})
            return cast(AltTest, out)
    out.update({
        "passes": omega >= WINNING_RATE,
        "verdict": (f"the judge may stand in for one of these reviewers: {wins}; ω ≥ "
                    f"{WINNING_RATE}" if omega >= WINNING_RATE else
                    f"the judge may not stand in for these reviewers: {wins}; ω < "
                    f"{WINNING_RATE}"),
    })
    return cast(AltTest, out)


def _constant_judge(judge: Mapping[TurnKey, int],
                    reviewers: Mapping[str, Mapping[TurnKey, int]]) -> tuple[int, float] | None:
    """The label most of the reviewers' labels (on the judged turns) carry, and its share."""
    labels = [v for own in reviewers.values() for k, v in own.items() if k in judge]
    if not labels:
        return None
    share = float(np.mean(labels))
    return (1, share) if share >= 0.5 else (0, 1.0 - share)


ALT_TEST_HEADER: tuple[str, ...] = (
    "reviewer", "shared turns", "judge agrees with others % [CI]",
    "reviewer agrees with others % [CI]", "ρ judge", "ρ reviewer", "tied %", "p",
    "judge wins")


def format_alt_test(block: Mapping[str, Any] | None) -> list[tuple[str, ...]]:
    """One row per reviewer, in the order of ``ALT_TEST_HEADER``."""
    if not block:
        return []

    def cell(figure: Mapping[str, Any]) -> str:
        ci = figure.get("ci")
        return f"{figure['value']:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")

    rows: list[tuple[str, ...]] = []
    for e in block["reviewers"]:
        if "note" in e:
            rows.append((e["reviewer"], str(e["shared_turns"]), "—", "—", "—", "—", "—", "—",
                         f"too few (< {block['minimum_shared_turns']})"))
            continue
        rows.append((e["reviewer"], str(e["shared_turns"]), cell(e["judge_agreement"]),
                     cell(e["reviewer_agreement"]), f"{e['rho_judge']:.2f}",
                     f"{e['rho_reviewer']:.2f}", f"{100 * e['ties']:.0f}",
                     f"{e['p_value']:.3g}",
                     "—" if "rejected" not in e else "yes" if e["rejected"] else "no"))
    return rows
