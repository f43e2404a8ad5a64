"""``dst-judge agreement``: how judge, RULE versions and human labels agree on a judge run."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from ._gold import add_run_corrections_options, run_rows_corrected

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``agreement`` under the main ``dst-judge`` parser."""
    p = commands.add_parser(
        "agreement", help="agreement of judge, RULE versions and human labels (kappa, AC1, "
        "alpha, PABAK with CIs; population estimates from a stratified sample)",
        description="For every pair among the judge, RULE-<version> and human labels: "
        "accuracy, Cohen's kappa, Gwet's AC1, Krippendorff's alpha, PABAK, confusion matrix "
        "and P/R/F1 of the 'incorrect' class, with bootstrap confidence intervals that "
        "resample dialogues; the reviewers' agreement among themselves; with two or more "
        "reviewers on shared turns, the alternative-annotator test (can the judge stand in "
        "for one of them?); and, with --sample, population estimates from a sample drawn by "
        "'labels sample'.")
    p.add_argument("run", metavar="RUN_DIR", help="a judge run directory")
    p.add_argument("--human", metavar="FILE", help="human labels (JSON Lines)")
    p.add_argument("--sample", metavar="FILE", help="the sample the humans labelled "
                   "('labels sample'): adds population estimates")
    p.add_argument("--adjudicator", metavar="NAME",
                   help="the reviewer whose label decides turns the other reviewers split on "
                   "(default: none; such turns stay without a label and are named)")
    p.add_argument("--n-boot", type=int, default=1000,
                   help="bootstrap replicates (default: 1000; 0 = no intervals)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="interval coverage (default: 0.95)")
    p.add_argument("--tuning", default="loo", metavar="MODE",
                   help="PPI power tuning: loo (default: λ estimated without each labelled "
                   "turn), plain (one λ from all labels) or a fixed λ in [0, 1]")
    p.add_argument("--epsilon", type=float, default=0.1, metavar="E",
                   help="alternative-annotator test: the allowance ε on the gap between the "
                   "reviewer's and the judge's advantage probabilities (the share of turns on "
                   "which each aligns with the other reviewers at least as well as the other "
                   "does; ties count for both), not on agreement rates (default: 0.1)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the report as JSON")
    add_run_corrections_options(p, drawing=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import (
        agreement_report,
        check_tuning,
        judgment_rows_source,
        load_labels,
        load_sample,
        recorded_predictions_sha256,
    )
    from ..pipeline import load_run
    from ._options import write_json
    from ._report import print_agreement

    check_tuning(args.tuning)
    rows, _ = run_rows_corrected(load_run(args.run), args.corrections,
                                 dialogues=args.run_dialogues, schema=args.run_schema)
    human = load_labels(args.human) if args.human else None
    sample = load_sample(args.sample) if args.sample else None
    report = agreement_report(rows, human, sample=sample, n_boot=args.n_boot, seed=args.seed,
                              confidence=args.confidence, source=judgment_rows_source(args.run),
                              tuning=args.tuning, adjudicator=args.adjudicator,
                              predictions_sha256=recorded_predictions_sha256(args.run),
                              run_name=f"run {args.run}", epsilon=args.epsilon)
    print_agreement(report, console)
    write_json(args.json_out, report, console)
    return 0
