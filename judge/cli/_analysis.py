"""``agreement``, ``compare``, ``systems``, ``audit`` and ``labels``: what to make of runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from .._digest import file_digest
from .._errors import OptionError
from ..analysis import (
    agreement_report,
    import_decisions,
    load_labels,
    method_table,
    plot_systems,
    system_table,
    write_audit,
    write_labels,
)
from ..data import Schema, load_schema
from ..pipeline import Run, RunDirectory, load_run
from ._options import write_json
from ._report import print_agreement, print_methods, print_systems, say


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "agreement", help="agreement of judge, RULE versions and human labels (kappa, CIs)",
        description="For every pair among the judge, RULE-<version> and human labels: accuracy, "
        "Cohen's kappa, confusion matrix and P/R/F1 of the 'incorrect' class, with bootstrap "
        "confidence intervals that resample dialogues.")
    p.add_argument("run", metavar="RUN_DIR", help="a judge run directory")
    p.add_argument("--human", metavar="FILE", help="human labels (JSON Lines)")
    p.add_argument("--n-boot", type=int, default=1000,
                   help="bootstrap replicates (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="interval coverage (default: 0.95)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the report as JSON")
    p.set_defaults(handler=run_agreement)

    p = commands.add_parser(
        "compare", help="judge methods side by side on the same turns (the paper's Table 2)",
        description="Compare judge runs of several methods over the same turns: TSA, judge "
        "JGA and agreement with RULE verdicts (and with human labels when given).")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="judge runs of the same predictions, one per method or prompt")
    p.add_argument("--human", metavar="FILE", help="human labels to add agreement with humans")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the table as JSON")
    p.set_defaults(handler=run_compare)

    p = commands.add_parser(
        "systems", help="DST systems under the judge and exact-match metrics (TSA, JGA), "
        "with a PNG chart (the paper's Figures 2-3)")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="one judge run per system")
    p.add_argument("--schema", help="schema file (default: the one the runs recorded, if it "
                   "is still there unchanged)")
    p.add_argument("--dialogues", help="dialogues file (default: the one each run recorded)")
    p.add_argument("--names", nargs="+", help="system names (default: from the runs)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the table as JSON")
    p.add_argument("--png", metavar="OUT", help="write a bar chart")
    p.set_defaults(handler=run_systems)

    p = commands.add_parser(
        "audit", help="HTML page of turns where judge and annotation disagree (for annotators)",
        description="Write one self-contained HTML file listing the turns where the judge and "
        "an annotation version disagree, grouped by slot and kind, with sorting, filtering and "
        "export of annotators' decisions.")
    p.add_argument("run", metavar="RUN_DIR", help="a judge run directory")
    p.add_argument("--out", required=True, metavar="HTML", help="the page to write")
    p.set_defaults(handler=run_audit)

    p = commands.add_parser("labels", help="human labels: import annotators' decisions")
    sub = p.add_subparsers(dest="labels_command", required=True, metavar="STEP")
    imp = sub.add_parser("import", help="turn an audit export (CSV or JSONL) with decisions "
                         "into a human-labels file")
    imp.add_argument("decisions", help="file exported from the audit page")
    imp.add_argument("--out", required=True, metavar="FILE", help="human labels (JSON Lines)")
    imp.add_argument("--annotator", help="annotator name for rows that give none")
    imp.set_defaults(handler=run_labels_import)


def run_agreement(args: argparse.Namespace, console: Console) -> int:
    run = load_run(args.run)
    human = load_labels(args.human) if args.human else None
    report = agreement_report(run.rows, human, n_boot=args.n_boot, seed=args.seed,
                              confidence=args.confidence)
    print_agreement(report, console)
    write_json(args.json_out, report, console)
    return 0


def run_compare(args: argparse.Namespace, console: Console) -> int:
    runs = [load_run(path) for path in args.runs]
    human = load_labels(args.human).per_turn() if args.human else None
    table = method_table(runs, human)
    print_methods(table, console)
    write_json(args.json_out, table, console)
    return 0


def recorded_schema(runs: list[Run]) -> Schema:
    """The schema the runs recorded, when it is still there with the same digest."""
    manifest = RunDirectory(runs[0].path).read_manifest() or {}
    sources = manifest.get("sources") or {}
    path, digest = sources.get("schema"), sources.get("schema_sha256")
    if not path or not digest:
        raise OptionError(f"{runs[0].path} records no schema file: pass --schema")
    if not Path(path).is_file() or file_digest(path) != digest:
        raise OptionError(f"the schema file {runs[0].path} recorded ({path}) is gone or changed "
                          "since the run: pass --schema")
    return load_schema(path)


def run_systems(args: argparse.Namespace, console: Console) -> int:
    runs = [load_run(path) for path in args.runs]
    if args.names and len(args.names) != len(runs):
        raise OptionError(f"--names has {len(args.names)} names for {len(runs)} runs")
    schema = load_schema(args.schema) if args.schema else recorded_schema(runs)
    table = system_table(runs, schema, names=args.names, dialogues_path=args.dialogues)
    print_systems(table, console)
    write_json(args.json_out, table, console)
    if args.png:
        say(console, f"wrote {plot_systems(table, args.png)}")
    return 0


def run_audit(args: argparse.Namespace, console: Console) -> int:
    count = write_audit(args.run, args.out)
    say(console, f"wrote {args.out} ({count} items)")
    return 0


def run_labels_import(args: argparse.Namespace, console: Console) -> int:
    records = import_decisions(args.decisions, annotator=args.annotator)
    count = write_labels(records, args.out)
    say(console, f"wrote {count} human label(s) to {args.out}")
    return 0
