"""The ``dst-judge`` command line: parse arguments, call the library, print. Nothing else."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError
from rich.console import Console

from . import __version__
from ._config import METHODS, JudgeConfig, load_config
from ._data import DialogueSet, PredictionSet, load_dialogues, load_predictions, read_id_list
from ._errors import DSTJudgeError, OptionError
from ._evaluate import EvaluationResult
from ._formats import FILE_KINDS, json_schema, validate_file
from ._metrics._options import DEFAULT_LAMBDAS, MetricOptions
from ._metrics._suite import compute_metrics
from ._report import print_evaluation, print_metrics
from ._rules import RuleSet, default_rules, load_rules
from ._schema import Schema, load_schema

_Sub = argparse._SubParsersAction


# --- shared argument groups --------------------------------------------------------------------

def _data_args(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--schema", required=True, help="schema JSON file")
    g.add_argument("--dialogues", required=True, help="dialogues JSON Lines file (.gz ok)")
    g.add_argument("--predictions", required=True, nargs="+" if many else None, metavar="P",
                   help="predictions file" + ("s; one table column each" if many else ""))
    g.add_argument("--dialogue-ids", metavar="FILE", help="evaluate only these dialogues")
    g.add_argument("--limit", type=int, metavar="N", help="evaluate only the first N dialogues")


def _judge_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("judge (CLI > DST_JUDGE_* environment > --config file)")
    g.add_argument("--config", metavar="FILE", help="JSON or TOML file of judge options")
    g.add_argument("--model", help="model name (default gpt-4-turbo)")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    g.add_argument("--method", choices=METHODS, help="two-dim (default), two-dim-cot, direct, cot")
    g.add_argument("--semantics", choices=["default", "paper"],
                   help="rule filters and integration (default: default)")
    g.add_argument("--rule-match", choices=["exact", "nospace"],
                   help="RULE verdict matching (default: nospace for two-prompt methods, exact "
                   "for single-prompt ones)")
    g.add_argument("--prompt-variant", choices=["zero-shot", "few-shot"])
    g.add_argument("--response-format", choices=["json_schema", "json_object", "text"])
    g.add_argument("--temperature", type=float)
    g.add_argument("--top-p", type=float)
    g.add_argument("--seed", type=int)
    g.add_argument("--max-tokens", type=int)
    g.add_argument("--timeout", type=float, help="seconds per request")
    g.add_argument("--max-retries", type=int)
    g.add_argument("--concurrency", type=int, help="requests in flight at once")
    g.add_argument("--reasks", type=int, help="re-asks after an invalid reply (default 1)")
    g.add_argument("--cache-dir", help="reply cache directory")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument("--rules", metavar="FILE", help="rule file (default: the packaged one for "
                   "the schema)")


def _config(args: argparse.Namespace, **overrides: Any) -> JudgeConfig:
    names = ("model", "base_url", "method", "semantics", "rule_match", "prompt_variant",
             "response_format", "temperature", "top_p", "seed", "max_tokens", "timeout",
             "max_retries", "concurrency", "reasks", "cache_dir")
    values = {name: getattr(args, name, None) for name in names}
    if getattr(args, "no_cache", False):
        values["use_cache"] = False
    values.update(overrides)
    return load_config(values, getattr(args, "config", None))


def _load_data(args: argparse.Namespace) -> tuple[Schema, DialogueSet]:
    schema = load_schema(args.schema)
    dialogues = load_dialogues(args.dialogues)
    if args.dialogue_ids:
        dialogues = dialogues.subset(read_id_list(args.dialogue_ids), source=args.dialogue_ids)
    if args.limit is not None:
        if args.limit < 1:
            raise OptionError("--limit must be at least 1")
        ids = [d.dialogue_id for d in dialogues.dialogues[: args.limit]]
        dialogues = dialogues.subset(ids)
    return schema, dialogues


def _rules(args: argparse.Namespace, schema: Schema) -> RuleSet:
    return load_rules(args.rules) if getattr(args, "rules", None) else default_rules(schema)


# --- metrics -------------------------------------------------------------------------------------

def _add_metrics(commands: _Sub) -> None:
    p = commands.add_parser(
        "metrics", help="exact-match DST metrics (JGA, SA, AGA, RSA, FGA, GCA, RULE TSA, ...)",
        description="Score predictions against gold annotations with the exact-match suite.")
    _data_args(p, many=True)
    p.add_argument("--gold", help="annotation version to score against, e.g. 2.1 or 2.4 "
                   "(default: the file's first)")
    p.add_argument("--match", default="exact",
                   help="matching policy: exact, nospace, normalized, alternatives, or a '+' "
                   "combination (default: exact)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write every figure to OUT")
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


def _metric_options(**values: object) -> MetricOptions:
    try:
        return MetricOptions(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        name = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "option"
        raise OptionError(f"{name}: {first['msg']}") from None


def _run_metrics(args: argparse.Namespace, console: Console) -> int:
    options = _metric_options(
        match=args.match, none_values=tuple(args.none_values), num_slots=args.num_slots,
        aga_unit=args.aga_unit, rsa_empty_turn=args.rsa_empty_turn,
        fga_lambdas=tuple(args.fga_lambdas),
        update_include_removals=args.update_include_removals, alpha=args.alpha,
        gca_dedupe=args.gca_dedupe, keep_explicit_none=args.keep_explicit_none,
        undefined=args.undefined, rule_match=args.rule_match, per_dialogue=args.per_dialogue,
        breakdowns=not args.no_breakdowns)
    schema, dialogues = _load_data(args)
    predictions = [load_predictions(p, dialogues, schema) for p in args.predictions]
    _disambiguate(predictions)
    report = compute_metrics(dialogues, predictions, schema, options, gold=args.gold)
    print_metrics(report, console)
    if args.json_out:
        report.write_json(args.json_out)
        console.print(f"wrote {args.json_out}")
    return 0


def _disambiguate(predictions: Sequence[PredictionSet]) -> None:
    """Give systems unique column names (file paths break ties)."""
    names = [p.name for p in predictions]
    for p in predictions:
        if names.count(p.name) > 1:
            p.name = p.path


# --- evaluate ------------------------------------------------------------------------------------

def _add_evaluate(commands: _Sub) -> None:
    p = commands.add_parser(
        "evaluate", help="judge every turn with an LLM (two-dimensional judge) and score it",
        description="Judge each predicted turn state with an LLM (accuracy and completeness), "
        "integrate the verdicts into TSA and judge JGA, and compare with RULE verdicts.")
    _data_args(p)
    _judge_args(p)
    p.add_argument("--out", required=True, metavar="DIR",
                   help="writes DIR/judgments.jsonl and DIR/summary.json")
    p.add_argument("--replay", metavar="CASSETTE", help="answer from recorded traffic (no key)")
    p.add_argument("--record", metavar="CASSETTE",
                   help="record the traffic with a real server into CASSETTE (cache off)")
    p.set_defaults(handler=_run_evaluate)


def _http_client(args: argparse.Namespace,
                 config: JudgeConfig) -> tuple[httpx.AsyncClient | None, Any]:
    from ._cassette import Cassette, RecordingTransport, replay_transport

    if args.replay and args.record:
        raise OptionError("--replay and --record exclude each other")
    if args.replay:
        return httpx.AsyncClient(transport=replay_transport(Cassette.load(args.replay))), None
    if args.record:
        secret = config.api_key.get_secret_value() if config.api_key else ""
        cassette = Cassette(Path(args.record), source=f"{config.endpoint} model={config.model}",
                            secrets=(secret,))
        return httpx.AsyncClient(transport=RecordingTransport(cassette),
                                 timeout=config.timeout), cassette
    return None, None


def _run_evaluate(args: argparse.Namespace, console: Console) -> int:
    from ._evaluate import evaluate

    overrides: dict[str, Any] = {}
    if args.record:
        overrides["use_cache"] = False
    config = _config(args, **overrides)
    if not (args.replay or config.base_url or config.api_key):
        raise OptionError("no model to ask: set OPENAI_API_KEY, pass --base-url for a local "
                          "OpenAI-compatible server, or --replay a cassette")
    schema, dialogues = _load_data(args)
    predictions = load_predictions(args.predictions, dialogues, schema)
    http_client, cassette = _http_client(args, config)
    result = evaluate(config, schema, dialogues, predictions, rules=_rules(args, schema),
                      http_client=http_client)
    if cassette is not None:
        cassette.save()
        console.print(f"recorded {len(cassette.interactions)} exchanges into {cassette.path}")
    return _finish(result, args.out, console)


def _finish(result: EvaluationResult, out: str, console: Console) -> int:
    """Write a judge run's files and print its summary."""
    paths = result.write(out)
    print_evaluation(result.summary, console)
    console.print(f"wrote {paths[0]} and {paths[1]}")
    return 0


# --- batch ---------------------------------------------------------------------------------------

def _add_batch(commands: _Sub) -> None:
    p = commands.add_parser("batch", help="judge at scale through the OpenAI Batch API")
    sub = p.add_subparsers(dest="batch_command", required=True, metavar="STEP")
    prep = sub.add_parser("prepare", help="write the Batch API request file")
    _data_args(prep)
    _judge_args(prep)
    prep.add_argument("--out", required=True, metavar="FILE", help="request file (JSON Lines)")
    prep.set_defaults(handler=_run_prepare)
    sub_ = sub.add_parser("submit", help="upload a request file and create a batch")
    sub_.add_argument("requests", help="request file from 'batch prepare'")
    _judge_args(sub_)
    sub_.set_defaults(handler=_run_submit)
    stat = sub.add_parser("status", help="show a batch's status")
    stat.add_argument("batch_id")
    _judge_args(stat)
    stat.set_defaults(handler=_run_status)
    col = sub.add_parser("collect", help="integrate a finished batch (live, or from a file)")
    col.add_argument("batch_id", nargs="?", help="batch to download (omit with --output-file)")
    col.add_argument("--output-file", metavar="FILE", help="a finished batch's output on disk")
    _data_args(col)
    _judge_args(col)
    col.add_argument("--out", required=True, metavar="DIR")
    col.set_defaults(handler=_run_collect)


def _run_prepare(args: argparse.Namespace, console: Console) -> int:
    from ._batch import write_requests
    from ._evaluate import plan_evaluation

    config = _config(args)
    schema, dialogues = _load_data(args)
    predictions = load_predictions(args.predictions, dialogues, schema)
    plan = plan_evaluation(config, schema, dialogues, predictions, rules=_rules(args, schema))
    count = write_requests(plan, args.out)
    console.print(f"wrote {count} requests to {args.out} ({len(plan.turns)} turns)")
    return 0


def _run_submit(args: argparse.Namespace, console: Console) -> int:
    from ._batch import submit

    batch = asyncio.run(submit(_config(args), args.requests))
    console.print(f"batch {batch['id']}: {batch['status']}")
    return 0


def _run_status(args: argparse.Namespace, console: Console) -> int:
    from ._batch import status

    batch = asyncio.run(status(_config(args), args.batch_id))
    counts = batch.get("request_counts") or {}
    console.print(f"batch {batch['id']}: {batch['status']} "
                  f"({counts.get('completed', 0)} done, {counts.get('failed', 0)} failed of "
                  f"{counts.get('total', 0)})")
    return 0


def _run_collect(args: argparse.Namespace, console: Console) -> int:
    from ._batch import download, read_output
    from ._evaluate import collect

    config = _config(args)
    schema, dialogues = _load_data(args)
    predictions = load_predictions(args.predictions, dialogues, schema)
    if args.output_file:
        files = [Path(args.output_file)]
    elif args.batch_id:
        files = asyncio.run(download(config, args.batch_id, args.out))
    else:
        raise OptionError("batch collect needs a BATCH_ID or --output-file FILE")
    records = {}
    for path in files:
        records.update(read_output(path))
    result = collect(config, schema, dialogues, predictions, records, rules=_rules(args, schema))
    return _finish(result, args.out, console)


# --- cache, validate -----------------------------------------------------------------------------

def _add_cache(commands: _Sub) -> None:
    p = commands.add_parser("cache", help="inspect or clear the reply cache")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--cache-dir", help="cache directory (default: the user cache dir)")
    p.add_argument("--config", metavar="FILE")
    p.set_defaults(handler=_run_cache)


def _run_cache(args: argparse.Namespace, console: Console) -> int:
    from ._cache import ResponseCache

    config = load_config({"cache_dir": args.cache_dir}, args.config)
    cache = ResponseCache(config.cache_dir)
    try:
        if args.action == "clear":
            console.print(f"removed {cache.clear()} cached replies from {config.cache_dir}")
        else:
            stats = cache.stats()
            console.print(f"{stats['entries']} cached replies, {stats['size_bytes']} bytes, in "
                          f"{stats['directory']}")
    finally:
        cache.close()
    return 0


def _add_validate(commands: _Sub) -> None:
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
    _add_evaluate(commands)
    _add_metrics(commands)
    _add_batch(commands)
    _add_cache(commands)
    _add_validate(commands)
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
