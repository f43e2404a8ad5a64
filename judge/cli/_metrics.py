"""``metrics`` (the exact-match suite) and ``validate`` (file checks against JSON Schemas)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._errors import InputError, OptionError
from .._io import plural, printable
from .._names import DEFAULT_LAMBDAS, FILE_KINDS
from ._convert import (
    announce,
    load_predictions_noted,
    load_schema_noted,
    warn_out_of_schema,
)
from ._gold import add_corrections_option, corrected_gold
from ._options import add_data_options, disambiguate, load_data, metric_options
from ._report import print_metrics, say

if TYPE_CHECKING:
    from ..data import OutOfSchemaSlot
    from ..metrics import MetricOptions, MetricsReport


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "metrics", help="exact-match DST metrics (JGA, SA, AGA, RSA, FGA, GCA, RULE TSA, ...)",
        description="Score predictions against gold annotations with the exact-match suite.")
    add_data_options(p, many=True)
    p.add_argument("--gold", help="annotation version to score against, e.g. 2.1 or 2.4 "
                   "(default: the file's first)")
    add_corrections_option(p)
    add_scoring_options(p)
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write every figure to OUT")
    p.add_argument("--aga-unit", choices=["turn", "frame"], default="turn",
                   help="average goal accuracy per turn or per frame (default: turn)")
    p.add_argument("--rsa-empty-turn", choices=["zero", "skip", "one"], default="zero",
                   help="relative slot accuracy of a turn where gold and prediction are both "
                   "empty (default: zero)")
    p.add_argument("--update-include-removals", action="store_true",
                   help="turn update accuracy also compares slot removals")
    p.add_argument("--rule-match", choices=["exact", "nospace"],
                   help="RULE verdict matching (default: follows --match)")
    p.add_argument("--per-dialogue", action="store_true", help="add per-dialogue figures")
    p.add_argument("--no-breakdowns", action="store_true",
                   help="skip per-domain and per-slot breakdowns")
    p.set_defaults(handler=run_metrics)

    p = commands.add_parser(
        "validate", help="check a schema, dialogues or predictions file; list every problem",
        description="Validate a file against its published JSON Schema and list every problem "
        "(file, line, field). With --print-schema, print the JSON Schema instead.")
    p.add_argument("kind", choices=FILE_KINDS, help="what the file holds")
    p.add_argument("file", nargs="?", help="the file to check")
    p.add_argument("--limit", type=int, default=100,
                   help="stop after this many problems (default: 100)")
    p.add_argument("--print-schema", action="store_true", help="print the JSON Schema")
    p.add_argument("--schema", metavar="S",
                   help="predictions: also check every predicted slot name against this schema "
                   "and name the closest schema slot for each one outside it (a warning); "
                   "corrections: every corrected slot must be in it (a problem, with the "
                   "closest schema slot named)")
    p.add_argument("--strict", action="store_true",
                   help="with --schema: slot names outside the schema are problems (exit 2), "
                   "not warnings")
    p.set_defaults(handler=run_validate)


def add_scoring_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The matching and scoring options that shape JGA, SA, FGA and GCA (``metrics`` and
    ``leaderboard`` share them; :func:`scoring_values` reads them back)."""
    p.add_argument("--match", default="exact",
                   help="matching policy: exact, nospace, normalized, alternatives, or a '+' "
                   "combination (default: exact)")
    p.add_argument("--num-slots", type=int,
                   help="K of slot accuracy (default: the schema's slot count)")
    p.add_argument("--none-values", nargs="+", default=["none"], metavar="V",
                   help="values that mean 'absent' (default: none)")
    p.add_argument("--fga-lambdas", type=float, nargs="+", default=list(DEFAULT_LAMBDAS),
                   metavar="L", help="flexible goal accuracy decay constants (default: "
                   + " ".join(str(v) for v in DEFAULT_LAMBDAS) + ")")
    p.add_argument("--alpha", type=float, default=10 / 11,
                   help="GCA value weight (default: 10/11)")
    p.add_argument("--gca-dedupe", action="store_true",
                   help="GCA: count a slot once per turn when both loops see it")
    p.add_argument("--keep-explicit-none", action="store_true",
                   help="GCA: explicit 'none' values count as changes (published few-shot)")
    p.add_argument("--undefined", choices=["zero", "null"], default="zero",
                   help="GCA with nothing to count: 0 (reference) or null (default: zero)")


def scoring_values(args: argparse.Namespace) -> dict[str, Any]:
    """The options of :func:`add_scoring_options`, named as :class:`MetricOptions` names
    them."""
    return {"match": args.match, "none_values": tuple(args.none_values),
            "num_slots": args.num_slots, "fga_lambdas": tuple(args.fga_lambdas),
            "alpha": args.alpha, "gca_dedupe": args.gca_dedupe,
            "keep_explicit_none": args.keep_explicit_none, "undefined": args.undefined}


def run_metrics(args: argparse.Namespace, console: Console) -> int:
    from ..metrics import compute_metrics
    options = metric_options(
        **scoring_values(args), aga_unit=args.aga_unit, rsa_empty_turn=args.rsa_empty_turn,
        update_include_removals=args.update_include_removals, rule_match=args.rule_match,
        per_dialogue=args.per_dialogue, breakdowns=not args.no_breakdowns)
    report = _streamed(args, options)
    if report is None:  # a subset, corrections, another format or order: loaded whole
        schema, dialogues = load_data(args)
        dialogues, gold, _ = corrected_gold(dialogues, schema, args.corrections, args.gold)
        predictions = [load_predictions_noted(p, dialogues, schema, warn_slots=False)
                       for p in args.predictions]
        disambiguate(predictions)
        report = compute_metrics(dialogues, predictions, schema, options, gold=gold)
    print_metrics(report, console)
    if args.json_out:
        report.write_json(args.json_out)
        say(console, f"wrote {args.json_out}")
    return 0


def _streamed(args: argparse.Namespace, options: MetricOptions) -> MetricsReport | None:
    """The report read in step with the dialogues (:func:`stream_metrics`: a test set of any
    size in bounded memory), or None when the files must be loaded whole."""
    from ..data import NotInStep
    from ..metrics import stream_metrics
    if args.dialogue_ids or args.limit is not None or args.corrections:
        return None
    schema = load_schema_noted(args.schema)
    try:
        report, files = stream_metrics(args.dialogues, args.predictions, schema, options,
                                       gold=args.gold)
    except NotInStep:
        return None
    announce(files.dialogues, *files.scans)
    names = [system.name for system in report.systems]
    for system in report.systems:  # unique column names, as disambiguate() gives them
        if names.count(system.name) > 1:
            system.name = system.path
    return report


def run_validate(args: argparse.Namespace, console: Console) -> int:
    from ..data import describe_out_of_schema, json_schema, validate_file
    if args.print_schema:
        print(json.dumps(json_schema(args.kind), indent=2))
        return 0
    if not args.file:
        raise OptionError("validate needs a FILE (or --print-schema)")
    if args.schema and args.kind not in ("predictions", "corrections"):
        raise OptionError("--schema checks the slot names of a predictions file; "
                          f"it does not apply to a {args.kind} file")
    if args.strict and not args.schema:
        raise OptionError("--strict needs --schema (the schema the slot names are checked "
                          "against)")
    problems = validate_file(args.kind, args.file, limit=args.limit)
    if args.kind == "corrections" and args.schema:
        # every problem in one pass: the slot names of the records that read, beside the
        # other lines' problems, in line order
        problems = sorted([*problems, *_corrections_outside(args.file, args.schema)],
                          key=lambda p: p.line or 0)[: args.limit]
    outside = (_slot_names_outside(args.file, args.schema)
               if args.schema and args.kind == "predictions" and not problems else [])
    if outside and args.strict:
        problems.append(InputError(describe_out_of_schema(outside) or "", path=args.file))
    elif outside:
        warn_out_of_schema(args.file, outside)
    for problem in problems:
        print(printable(problem), file=sys.stderr)
    if problems:
        print(printable(f"dst-judge: {plural(len(problems), 'problem')} in {args.file}"),
              file=sys.stderr)
        return 2
    say(console, f"{args.file}: valid {args.kind} file")
    if args.kind == "predictions" and not args.schema:
        say(console, "slot names not checked against a schema (add --schema S to check them)")
    return 0


def _corrections_outside(path: str, schema_path: str) -> list[InputError]:
    """Each correction whose slot the schema does not have, naming the closest schema slot;
    records that do not read are skipped (the schema check lists their problems)."""
    from .._io import iter_jsonl_lines, parse_line
    from ..data import Correction, Located, load_schema, slot_problem

    schema = load_schema(schema_path)
    found = []
    for line, text in iter_jsonl_lines(path):
        try:
            located = Located(parse_line(Correction, text, path=path, line=line), path, line)
        except InputError:
            continue
        problem = slot_problem(located, schema)
        if problem is not None:
            found.append(problem)
    return found


def _slot_names_outside(path: str, schema_path: str) -> list[OutOfSchemaSlot]:
    """The predicted slot names of a valid native predictions file that ``schema_path`` does
    not have. (A file in another format is converted with the help of its dialogues, which
    validate does not read: evaluate and metrics report its names.)"""
    from ..data import load_schema, out_of_schema_slots, predicted_slot_names
    schema = load_schema(schema_path)
    return out_of_schema_slots(predicted_slot_names(path), schema)
