"""``dst-judge labels ...``: human labels in and out: import annotators' decisions from the
audit page, and draw a stratified sample of turns to label."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .._io import plural

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``labels import|sample`` under the main ``dst-judge`` parser."""
    from ..analysis import ALLOCATIONS

    p = commands.add_parser("labels", help="human labels: draw a sample to label, import "
                            "annotators' decisions")
    sub = p.add_subparsers(dest="labels_command", required=True, metavar="STEP")
    imp = sub.add_parser("import", help="turn an audit export (CSV or JSONL) with decisions "
                         "into a human-labels file")
    imp.add_argument("decisions", help="file exported from the audit page")
    imp.add_argument("--out", required=True, metavar="FILE", help="human labels (JSON Lines)")
    imp.add_argument("--annotator", help="annotator name for rows that give none")
    imp.set_defaults(handler=run_import)
    sample = sub.add_parser(
        "sample", help="draw turns to label, stratified by judge × RULE verdict (× domain)",
        description="Draw a stratified random sample of a judge run's turns for human "
        "labelling: strata are judge verdict × RULE-<gold> verdict (× domain with "
        "--by-domain). Each drawn turn carries its inclusion probability and weight, so that "
        "'agreement --sample' can estimate population figures without the bias of labelling "
        "only disagreements.")
    sample.add_argument("run", metavar="RUN_DIR", help="a judge run directory")
    sample.add_argument("--n", type=int, required=True, help="turns to draw")
    sample.add_argument("--gold", required=True, metavar="VERSION",
                        help="annotation version whose RULE verdict stratifies (e.g. 2.1)")
    sample.add_argument("--by-domain", action="store_true", help="also stratify by domain")
    sample.add_argument("--allocation", choices=ALLOCATIONS, default="equal",
                        help="turns per stratum: equal (default; small strata taken whole) "
                        "or proportional to stratum size")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    sample.add_argument("--out", required=True, metavar="FILE", help="sample (JSON Lines)")
    sample.set_defaults(handler=run_sample)


def run_import(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import import_decisions, write_labels

    records = import_decisions(args.decisions, annotator=args.annotator)
    count = write_labels(records, args.out)
    console.print(f"wrote {plural(count, 'human label')} to {args.out}", markup=False)
    return 0


def run_sample(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import draw_sample, write_sample
    from ..pipeline import load_run

    rows = load_run(args.run).rows
    sample = draw_sample(rows, n=args.n, gold=args.gold, seed=args.seed,
                         by_domain=args.by_domain, allocation=args.allocation)
    count = write_sample(sample, args.out)
    table = Table(title=f"Stratified sample of {count} turns from {sample.population} "
                  f"(seed {args.seed}, {args.allocation} allocation)", title_justify="left")
    for name in ("stratum", "turns", "drawn", "weight"):
        table.add_column(name, justify="left" if name == "stratum" else "right")
    for stratum in sorted(sample.strata().values(), key=lambda s: s["stratum"]):
        table.add_row(escape(stratum["stratum"]), str(stratum["size"]), str(stratum["sample"]),
                      f"{stratum['size'] / stratum['sample']:.2f}")
    console.print(table)
    console.print(f"wrote {args.out}", markup=False)
    return 0
