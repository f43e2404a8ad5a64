"""``compare`` and ``systems``: what to make of runs side by side (``agreement``, ``audit`` and
``labels`` have modules of their own)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._digest import file_digest
from .._errors import OptionError
from ._gold import (
    add_corrections_option,
    add_run_corrections_options,
    read_all,
    run_rows_corrected,
)
from ._options import write_json
from ._report import print_estimates, print_methods, print_systems, say

if TYPE_CHECKING:
    from ..data import Schema
    from ..pipeline import Run


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "compare", help="judge methods side by side on the same turns (the paper's Table 2)",
        description="Compare judge runs over the same turns: TSA, judge JGA and agreement "
        "with RULE verdicts (and with human labels when given). With --sample and one labels "
        "file per run (runs of different systems on the same dialogues, labelled on one "
        "shared sample): judge, labels-only and prediction-powered estimates of each pair's "
        "TSA difference, and 'A is better than B' only when the PPI interval excludes 0.")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="judge runs over the same turns, one per method, prompt or system")
    p.add_argument("--human", nargs="+", metavar="FILE",
                   help="human labels: one file for all runs (same predictions), or one per "
                   "run (with --sample), paired with the runs by the predictions they name "
                   "(predictions_sha256; by order, with a warning, when a file or run does "
                   "not say)")
    p.add_argument("--sample", metavar="FILE", help="the shared sample the runs' labels come "
                   "from ('labels sample' on the first run; drawn again from it and refused "
                   "if it differs): adds differences")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="interval coverage of the differences (default: 0.95)")
    p.add_argument("--tuning", default="loo", metavar="MODE",
                   help="PPI power tuning: loo (default), plain or a fixed λ in [0, 1]")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the table as JSON")
    add_run_corrections_options(p, drawing=False)
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
    add_corrections_option(p)
    p.set_defaults(handler=run_systems)


def run_compare(args: argparse.Namespace, console: Console) -> int:
    # the analysis stage (numpy, scipy) is imported when a command uses it, not for --help
    from ..analysis import (
        check_sample,
        check_tuning,
        labels_tie,
        load_labels,
        load_sample,
        method_table,
        pair_by_predictions,
        recorded_predictions_sha256,
        run_differences,
        sampled_run,
    )
    from ..pipeline import Run, load_run

    check_tuning(args.tuning)
    files = args.human or []
    if len(files) > 1 and len(files) != len(args.runs):
        raise OptionError(f"--human has {len(files)} files for {len(args.runs)} runs: give one "
                          "for all runs or one per run")
    if args.sample and len(files) != len(args.runs):
        raise OptionError("--sample needs one --human file per run (the labels of each run's "
                          "predictions on the sampled turns)")
    runs = [load_run(path) for path in args.runs]
    if args.corrections:
        runs = [Run(run.path, run.summary, run_rows_corrected(
            run, args.corrections, dialogues=args.run_dialogues, schema=args.run_schema)[0])
            for run in runs]
    digests = [recorded_predictions_sha256(path) for path in args.runs]
    names = [f"run {path}" for path in args.runs]
    loaded = [load_labels(path) for path in files]
    warning = None
    if len(loaded) == 1:
        for digest, name in zip(digests, names, strict=True):
            loaded[0].check_predictions(digest, run=name)
    elif loaded:
        loaded, warning = pair_by_predictions(loaded, digests, names)
    ties = [labels_tie(loaded[0] if len(loaded) == 1 else loaded[i], digest, run=name)
            for i, (digest, name) in enumerate(zip(digests, names, strict=True))] \
        if loaded else []
    labels = [human.per_turn() for human in loaded]
    table = method_table(runs, labels[0] if len(labels) == 1 else None)
    if warning:
        table["labels_pairing"] = warning
    if ties:
        table["labels_tie"] = ties
        table["labels_tied"] = all(tie["tied"] for tie in ties)
    if args.sample:
        sample = load_sample(args.sample)
        drawn = sampled_run(runs, sample, digests)  # the run it was drawn from, any position
        table["sample_check"] = check_sample(sample, runs[drawn].rows,
                                             predictions_sha256=digests[drawn])
        table["differences"] = run_differences(runs, labels, sample, drawn_from=drawn,
                                               confidence=args.confidence, tuning=args.tuning,
                                               resolutions=[h.resolve() for h in loaded])
        for difference in table["differences"]:
            difference["labels_tied"] = table["labels_tied"]
    print_methods(table, console)
    if warning:
        say(console, f"warning: {warning}")
    for tie in dict.fromkeys(t["warning"] for t in ties if t["warning"]):
        say(console, f"warning: {tie}.")
    if table.get("sample_check"):
        say(console, f"sample checked: {table['sample_check']}")
    for difference in table.get("differences") or []:
        print_estimates(difference, console)
        say(console, difference["verdict"])
    write_json(args.json_out, table, console)
    return 0


def recorded_schema(runs: list[Run]) -> Schema:
    """The schema the runs recorded, when it is still there with the same digest."""
    from ..data import load_schema
    from ..pipeline import RunDirectory
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
    from ..analysis import plot_systems, system_table
    from ..data import load_schema
    from ..pipeline import load_run

    runs = [load_run(path) for path in args.runs]
    if args.names and len(args.names) != len(runs):
        raise OptionError(f"--names has {len(args.names)} names for {len(runs)} runs")
    schema = load_schema(args.schema) if args.schema else recorded_schema(runs)
    table = system_table(runs, schema, names=args.names, dialogues_path=args.dialogues,
                         corrections=read_all(args.corrections) if args.corrections else ())
    print_systems(table, console)
    write_json(args.json_out, table, console)
    if args.png:
        say(console, f"wrote {plot_systems(table, args.png)}")
    return 0
