"""The ``dst-judge`` command line: parse arguments, call the library, print. Nothing else."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from pydantic import ValidationError
from rich.console import Console

from . import __version__
from ._data import load_dialogues, load_predictions, read_id_list
from ._errors import DSTJudgeError, OptionError
from ._formats import FILE_KINDS, json_schema, validate_file
from ._metrics._options import DEFAULT_LAMBDAS, MetricOptions
from ._metrics._suite import compute_metrics
from ._report import print_metrics
from ._schema import load_schema


def _add_metrics_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "metrics", help="exact-match DST metrics (JGA, SA, AGA, RSA, FGA, GCA, RULE TSA, ...)",
        description="Score predictions against gold annotations with the exact-match suite.")
    p.add_argument("--schema", required=True, help="schema JSON file")
    p.add_argument("--dialogues", required=True, help="dialogues JSON Lines file (.gz ok)")
    p.add_argument("--predictions", required=True, nargs="+", metavar="P",
                   help="one or more predictions files; one table column each")
    p.add_argument("--gold", help="annotation version to score against, e.g. 2.1 or 2.4 "
                   "(default: the file's first)")
    p.add_argument("--match", default="exact",
                   help="matching policy: exact, nospace, normalized, alternatives, or a '+' "
                   "combination (default: exact)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write every figure to OUT")
    p.add_argument("--dialogue-ids", metavar="FILE", help="evaluate only these dialogues")
    p.add_argument("--num-slots", type=int, help="K of slot accuracy (default: schema size)")
    p.add_argument("--none-values", nargs="+", default=["none"], metavar="V",
                   help="values that mean 'absent' (default: none)")
    p.add_argument("--aga-unit", choices=["turn", "frame"], default="turn")
    p.add_argument("--rsa-empty-turn", choices=["zero", "skip", "one"], default="zero")
    p.add_argument("--fga-lambdas", type=float, nargs="+", default=list(DEFAULT_LAMBDAS),
                   metavar="L")
    p.add_argument("--update-include-removals", action="store_true",
                   help="turn update accuracy also compares slot removals")
    p.add_argument("--alpha", type=float, default=10 / 11, help="GCA value weight (10/11)")
    p.add_argument("--gca-dedupe", action="store_true",
                   help="GCA: count a slot once per turn when both loops see it")
    p.add_argument("--keep-explicit-none", action="store_true",
                   help="GCA: explicit 'none' values count as changes (published few-shot)")
    p.add_argument("--undefined", choices=["zero", "null"], default="zero",
                   help="GCA with nothing to count: 0 (reference) or null")
    p.add_argument("--rule-match", choices=["exact", "nospace"],
                   help="RULE verdict matching (default: follows --match)")
    p.add_argument("--per-dialogue", action="store_true", help="add per-dialogue figures")
    p.add_argument("--no-breakdowns", action="store_true",
                   help="skip per-domain and per-slot breakdowns")
    p.set_defaults(handler=_run_metrics)


def _options(**values: object) -> MetricOptions:
    try:
        return MetricOptions(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        name = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "option"
        raise OptionError(f"{name}: {first['msg']}") from None


def _run_metrics(args: argparse.Namespace, console: Console) -> int:
    options = _options(
        match=args.match, none_values=tuple(args.none_values), num_slots=args.num_slots,
        aga_unit=args.aga_unit, rsa_empty_turn=args.rsa_empty_turn,
        fga_lambdas=tuple(args.fga_lambdas),
        update_include_removals=args.update_include_removals, alpha=args.alpha,
        gca_dedupe=args.gca_dedupe, keep_explicit_none=args.keep_explicit_none,
        undefined=args.undefined, rule_match=args.rule_match, per_dialogue=args.per_dialogue,
        breakdowns=not args.no_breakdowns)
    schema = load_schema(args.schema)
    dialogues = load_dialogues(args.dialogues)
    if args.dialogue_ids:
        dialogues = dialogues.subset(read_id_list(args.dialogue_ids), source=args.dialogue_ids)
    predictions = [load_predictions(p, dialogues, schema) for p in args.predictions]
    _disambiguate(predictions)
    report = compute_metrics(dialogues, predictions, schema, options, gold=args.gold)
    print_metrics(report, console)
    if args.json_out:
        report.write_json(args.json_out)
        console.print(f"wrote {args.json_out}")
    return 0


def _disambiguate(predictions: Sequence) -> None:
    """Give systems unique column names (file paths break ties)."""
    names = [p.name for p in predictions]
    for p in predictions:
        if names.count(p.name) > 1:
            p.name = p.path


def _add_validate_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "validate", help="check a schema, dialogues or predictions file; list every problem",
        description="Validate a file against its published JSON Schema and list every problem "
        "(file, line, field). With --print-schema, print the JSON Schema instead.")
    p.add_argument("kind", choices=FILE_KINDS)
    p.add_argument("file", nargs="?", help="the file to check")
    p.add_argument("--limit", type=int, default=100, help="stop after this many problems")
    p.add_argument("--print-schema", action="store_true", help="print the JSON Schema")
    p.set_defaults(handler=_run_validate)


def _run_validate(args: argparse.Namespace, console: Console) -> int:
    if args.print_schema:
        print(json.dumps(json_schema(args.kind), indent=2))
        return 0
    if not args.file:
        raise OptionError("validate needs a FILE (or --print-schema)")
    problems = validate_file(args.kind, args.file, limit=args.limit)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"dst-judge: {len(problems)} problem(s) in {args.file}", file=sys.stderr)
        return 2
    console.print(f"{args.file}: valid {args.kind} file")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dst-judge", description="Evaluate dialogue state tracking: LLM judge and "
        "exact-match metrics.")
    parser.add_argument("--version", action="version", version=f"dst-judge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_metrics_parser(commands)
    _add_validate_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    try:
        return args.handler(args, console)
    except DSTJudgeError as exc:
        print(f"dst-judge: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dst-judge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
