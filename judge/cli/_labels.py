"""``dst-judge labels ...``: human labels in and out: import annotators' decisions from the
audit page, draw a sample of turns to label, and plan how many labels an interval needs."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .._io import plural
from ._gold import add_run_corrections_options, run_rows_corrected
from ._report import text

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``labels import|sample|plan`` under the main ``dst-judge`` parser."""
    from .._glossary import ALLOCATIONS, DESIGNS, UNITS

    p = commands.add_parser(
        "labels", help="human labels: draw a sample to label, import annotators' decisions",
        description="Human labels of a judge run's turns, in three steps: 'plan' says how "
        "many labelled turns give a TSA interval of the width you need; 'sample' draws those "
        "turns (simple random, judge × RULE strata, domain strata, or whole dialogues) for "
        "reviewers to label; 'import' turns the decisions exported from the audit page into "
        "a human-labels file. 'agreement --human --sample' then gives the estimates.")
    sub = p.add_subparsers(dest="labels_command", required=True, metavar="STEP")
    imp = sub.add_parser("import", help="turn an audit export (CSV or JSONL) with decisions "
                         "into a human-labels file")
    imp.add_argument("decisions", help="file exported from the audit page")
    imp.add_argument("--out", required=True, metavar="FILE", help="human labels (JSON Lines)")
    imp.add_argument("--annotator", help="annotator name for rows that give none")
    imp.add_argument("--run", metavar="RUN_DIR",
                     help="the judge run whose turns were decided: each label records its "
                     "predictions' digest (predictions_sha256), so agreement and compare can "
                     "tell labels of this run from labels of another system's")
    imp.set_defaults(handler=run_import)
    sample = sub.add_parser(
        "sample", help="draw turns (or whole dialogues) to label, by a sampling design",
        description="Draw a random sample of a judge run's turns for human labelling. "
        "Designs: random (the default; a simple random sample) and domain (strata by domain, "
        "proportional) suit estimates of the metric ('agreement --sample' shows judge, "
        "labels-only and prediction-powered estimates side by side) and need no gold "
        "annotation; judge-rule (strata judge verdict × RULE-<gold> verdict, × domain with "
        "--by-domain) is for agreement figures. --unit dialogue draws whole dialogues. Each "
        "drawn turn carries its design, inclusion probability and weight, and the file "
        "records what is needed to draw it again (n, seed, procedure, digests of the run): "
        "every command that reads it draws it again and refuses a file that differs.")
    sample.add_argument("run", metavar="RUN_DIR", help="a judge run directory")
    sample.add_argument("--n", type=int, required=True,
                        help="units to draw (turns, or dialogues with --unit dialogue)")
    sample.add_argument("--design", choices=DESIGNS, default="random",
                        help="random (default), domain or judge-rule")
    sample.add_argument("--unit", choices=UNITS, default="turn",
                        help="draw turns (default) or whole dialogues")
    sample.add_argument("--gold", metavar="VERSION",
                        help="annotation version whose RULE verdict stratifies (e.g. 2.1; "
                        "needed by the judge-rule design; the domain design also reads its "
                        "gold turn state when given)")
    sample.add_argument("--by-domain", action="store_true",
                        help="judge-rule design: also stratify by domain")
    sample.add_argument("--allocation", choices=ALLOCATIONS, default=None,
                        help="units per stratum: equal (judge-rule's default; small strata "
                        "taken whole) or proportional to stratum size (domain's default)")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    sample.add_argument("--out", required=True, metavar="FILE", help="sample (JSON Lines)")
    add_run_corrections_options(sample, drawing=True)
    sample.set_defaults(handler=run_sample)
    plan = sub.add_parser(
        "plan", help="how many labels give a TSA interval of a given width, labels alone vs "
        "prediction-powered",
        description="From a pilot (a sample file and its human labels) or from an assumed "
        "disagreement rate between judge and people: how many labelled turns (simple random "
        "sample) give a TSA interval of full width W percentage points, for the labels-only "
        "estimate and for the prediction-powered (PPI) one: the smallest n whose interval is "
        "at most W wide in at least 80 % of simulated samples, never below the smallest "
        "sample for which the interval is shown to hold.")
    plan.add_argument("run", metavar="RUN_DIR", help="the judge run to be labelled")
    plan.add_argument("--width", type=float, required=True, metavar="W",
                      help="full interval width in percentage points (10 = ±5)")
    plan.add_argument("--sample", metavar="FILE", help="the pilot's sample file")
    plan.add_argument("--human", metavar="FILE", help="the pilot's human labels")
    plan.add_argument("--disagreement", type=float, metavar="D",
                      help="without a pilot: assumed share of turns where judge and people "
                      "disagree (e.g. 0.1)")
    plan.add_argument("--confidence", type=float, default=0.95,
                      help="interval coverage (default: 0.95)")
    plan.add_argument("--json", dest="json_out", metavar="OUT", help="write the plan as JSON")
    plan.set_defaults(handler=run_plan)


def run_import(args: argparse.Namespace, console: Console) -> int:
    from .._errors import OptionError
    from ..analysis import import_decisions, recorded_predictions_sha256, write_labels

    digest = recorded_predictions_sha256(args.run) if args.run else None
    if args.run and digest is None:
        raise OptionError(f"{args.run} records no predictions digest (no readable manifest "
                          "naming its predictions file): the labels could not be tied to it")
    records = import_decisions(args.decisions, annotator=args.annotator)
    if digest is not None:
        records = [{**record, "predictions_sha256": digest} for record in records]
    count = write_labels(records, args.out)
    console.print(f"wrote {plural(count, 'human label')} to {args.out}", markup=False)
    if digest is None:
        console.print(text(
            "warning: the labels name no predictions_sha256 (give --run RUN_DIR): agreement "
            "and compare cannot tell them from labels of another system's run, and mark "
            "their figures as resting on labels not tied to the run", style="yellow"))
    return 0


def run_sample(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import draw_sample, recorded_predictions_sha256, write_sample
    from ..pipeline import load_run

    rows, corrected = run_rows_corrected(load_run(args.run), args.corrections,
                                         dialogues=args.run_dialogues, schema=args.run_schema)
    gold = args.gold
    if corrected and gold is not None and gold not in corrected:
        base = [name for name in corrected if name.split("+corr:")[0].replace(".", "")
                == gold.replace(".", "")]
        gold = base[0] if base else gold  # --gold 2.1 with corrections: the corrected 2.1
    sample = draw_sample(rows, n=args.n, gold=gold, seed=args.seed,
                         by_domain=args.by_domain, allocation=args.allocation,
                         design=args.design, unit=args.unit,
                         predictions_sha256=recorded_predictions_sha256(args.run))
    count = write_sample(sample, args.out)
    first = sample.turns[0]
    units = (f"{len(sample.units())} dialogues ({count} turns)" if args.unit == "dialogue"
             else f"{count} turns")
    kind = {"judge-rule": "Stratified", "random": "Simple random",
            "domain": "Domain-stratified"}[args.design]
    table = Table(title=f"{kind} sample of {units} from {sample.population} "
                  f"(seed {args.seed}, {first.allocation} allocation)",
                  title_justify="left")
    for name in ("stratum", f"{args.unit}s", "drawn", "weight"):
        table.add_column(name, justify="left" if name == "stratum" else "right")
    for stratum in sorted(sample.strata().values(), key=lambda s: s["stratum"]):
        table.add_row(escape(stratum["stratum"]), str(stratum["size"]), str(stratum["sample"]),
                      f"{stratum['size'] / stratum['sample']:.2f}")
    console.print(table)
    known = "the run's and its predictions' digests" if first.predictions_sha256 \
        else "the run's digest (its predictions are not known: no manifest)"
    console.print(f"wrote {args.out}: it records n {args.n}, seed {args.seed}, procedure "
                  f"{first.procedure} and {known}; every command that reads it draws it "
                  "again and refuses a changed file", markup=False)
    return 0


def run_plan(args: argparse.Namespace, console: Console) -> int:
    from .._io import plural
    from ..analysis import MIN_TURNS, load_labels, load_sample, plan_labels
    from ..pipeline import load_run
    from ._options import write_json

    rows = load_run(args.run).rows
    if args.sample and not args.human:
        from .._errors import OptionError

        raise OptionError("--sample needs --human: the pilot's labels")
    sample = load_sample(args.sample) if args.sample else None
    human = load_labels(args.human).per_turn() if args.human else None
    plan = plan_labels(rows, width=args.width, confidence=args.confidence, sample=sample,
                       human=human, disagreement=args.disagreement)
    basis = plan["basis"]
    source = (f"pilot {basis['pilot']} ({basis['labelled']} labelled turns; weighted by its "
              f"design: TSA {100 * basis['tsa']:.1f} %, disagreement "
              f"{100 * basis['disagreement']:.1f} %; planned on TSA "
              f"{100 * basis['planned_tsa']:.1f} %, disagreement "
              f"{100 * basis['planned_disagreement']:.1f} %, their one-sided "
              f"{100 * basis['bound_level']:g} % bounds)" if "pilot" in basis
              else f"assumed disagreement {100 * basis['disagreement']:.1f} %")
    table = Table(title=f"Labels for a {100 * args.confidence:g} % TSA interval of width "
                  f"{args.width:g} points ({plan['population']} judged turns; {source})",
                  title_justify="left")
    share = f"{100 * plan['share']:g} %"
    for name in ("estimate", "labelled turns needed", "median width",
                 f"width in {share} of samples"):
        table.add_column(name, justify="left" if name == "estimate" else "right")
    for figures, name in ((plan["labels"], "labels alone"),
                          (plan["ppi"], "prediction-powered (PPI)")):
        table.add_row(name, str(figures["labels_needed"]), f"{figures['median_width']:.1f}",
                      f"{figures['width_at_share']:.1f}")
    console.print(table)
    console.print(f"Criterion: {plan['criterion']}.", markup=False)
    population = int(plan["population"])
    if any(plan[key]["labels_needed"] >= population for key in ("labels", "ppi")):
        console.print(
            f"Why: this run has only {plural(population, 'judged turn')}"
            + (f", fewer than the {MIN_TURNS} labelled turns below which the bench has not "
               "shown the interval to hold" if population < MIN_TURNS else "")
            + ", so the plan is to label every turn. With every turn labelled the figure is "
            "counted, not estimated: there is no sampling error, hence a width of 0.0.",
            markup=False)
    write_json(args.json_out, plan, console)
    return 0
