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

from .. import __version__
from .._config import METHODS, JudgeConfig, load_config
from .._errors import DSTJudgeError, OptionError
from ..data import (
    FILE_KINDS,
    DialogueSet,
    PredictionSet,
    Schema,
    json_schema,
    load_dialogues,
    load_predictions,
    load_schema,
    read_id_list,
    validate_file,
)
from ..method import RuleSet, default_rules, load_rules
from ..metrics import DEFAULT_LAMBDAS, MetricOptions, compute_metrics
from ..pipeline import EvaluationResult, evaluate
from ._report import print_estimate, print_evaluation, print_metrics

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
    g.add_argument("--local", action="store_true",
                   help="use the server of 'dst-judge local serve' (few-shot prompts unless "
                   "--prompt-variant says otherwise)")
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
    g.add_argument("--http-backend", choices=["aiohttp", "httpx"],
                   help="HTTP stack of live calls (default aiohttp: several times less CPU per "
                   "call than httpx at high concurrency)")
    g.add_argument("--reasks", type=int, help="re-asks after an invalid reply (default 1)")
    g.add_argument("--cache-dir", help="reply cache directory")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument("--rules", metavar="FILE", help="rule file (default: the packaged one for "
                   "the schema)")
    g.add_argument("--rpm", type=int, help="requests per minute at most")
    g.add_argument("--tpm", type=int, help="tokens per minute at most (estimated)")
    g.add_argument("--prompt-cache-key", action="store_true", default=None,
                   help="send a per-dialogue prompt_cache_key (OpenAI prompt caching)")
    g.add_argument("--budget", type=float, metavar="USD",
                   help="stop cleanly once the run has spent this much (resumable)")
    g.add_argument("--prices", metavar="FILE", help="price table (JSON; default: packaged)")


def _config(args: argparse.Namespace, **overrides: Any) -> JudgeConfig:
    names = ("model", "base_url", "method", "semantics", "rule_match", "prompt_variant",
             "response_format", "temperature", "top_p", "seed", "max_tokens", "timeout",
             "max_retries", "concurrency", "reasks", "cache_dir", "rpm", "tpm",
             "prompt_cache_key", "budget", "prices", "http_backend")
    values = {name: getattr(args, name, None) for name in names}
    if getattr(args, "no_cache", False):
        values["use_cache"] = False
    if getattr(args, "local", False):
        from ..model.local import local_config_values

        for name, value in local_config_values().items():
            if values.get(name) is None:
                values[name] = value
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


def _rules(path: str | None, schema: Schema) -> RuleSet:
    """The rule file given, else the packaged rules that fit the schema."""
    return load_rules(path) if path else default_rules(schema)


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
                   help="run directory: judgments.jsonl, summary.json, and the run log "
                   "(calls.jsonl) with its manifest for --resume")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in --out without repeating finished calls")
    p.add_argument("--dry-run", action="store_true",
                   help="estimate calls, tokens and cost; make no call")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when the terminal is interactive)")
    p.add_argument("--replay", metavar="CASSETTE", help="answer from recorded traffic (no key)")
    p.add_argument("--record", metavar="CASSETTE",
                   help="record the traffic with a real server into CASSETTE (cache off)")
    p.set_defaults(handler=_run_evaluate)


def _http_client(args: argparse.Namespace,
                 config: JudgeConfig) -> tuple[httpx.AsyncClient | None, Any]:
    from ..model import Cassette, RecordingTransport, replay_transport

    if args.replay and args.record:
        raise OptionError("--replay and --record exclude each other")
    if args.replay:
        return httpx.AsyncClient(transport=replay_transport(Cassette.load(args.replay))), None
    if args.record:
        secret = config.secret or ""
        cassette = Cassette(Path(args.record), source=f"{config.endpoint} model={config.model}",
                            secrets=(secret,))
        return httpx.AsyncClient(transport=RecordingTransport(cassette),
                                 timeout=config.timeout), cassette
    return None, None


def _run_evaluate(args: argparse.Namespace, console: Console) -> int:
    """Judge live (or from a cassette) into a resumable run directory."""
    overrides: dict[str, Any] = {}
    if args.record:
        overrides["use_cache"] = False
    config = _config(args, **overrides)
    schema, dialogues = _load_data(args)
    predictions = load_predictions(args.predictions, dialogues, schema)
    rules = _rules(args.rules, schema)
    if args.dry_run:
        return _dry_run(config, schema, dialogues, predictions, rules, console)
    if not (args.replay or config.base_url or config.api_key):
        raise OptionError("no model to ask: set OPENAI_API_KEY, pass --base-url for a local "
                          "OpenAI-compatible server, or --replay a cassette")
    http_client, cassette = _http_client(args, config)
    sources = {"schema": args.schema, "rules": args.rules}
    result = _with_progress(args.progress, console, lambda on_progress: evaluate(
        config, schema, dialogues, predictions, rules=rules, http_client=http_client,
        out_dir=args.out, resume=args.resume, sources=sources, on_progress=on_progress))
    if cassette is not None:
        cassette.save()
        console.print(f"recorded {len(cassette.interactions)} exchanges into {cassette.path}")
    return _finish(result, args.out, console, written=True)


def _with_progress(progress: bool | None, console: Console, run: Any) -> Any:
    """Run with a live progress bar (calls, ETA, cache hits, errors, tokens, cost): when
    ``--progress`` says so, or by default when the terminal is interactive."""
    if not (console.is_terminal if progress is None else progress):
        return run(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("judging"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeRemainingColumn(), TextColumn("{task.fields[info]}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("judging", total=None, info="")

        def update(state: Any) -> None:
            spend = state.spend
            money = "" if spend is None or spend.price is None else f" · ${spend.usd:.4f}"
            tokens = 0 if spend is None else spend.prompt_tokens + spend.completion_tokens
            bar.update(task, total=state.total, completed=state.done,
                       info=f"cache hits {state.cache_hits} · errors {state.errors} · "
                            f"tokens {tokens}{money}")

        return run(update)


def _dry_run(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
             predictions: PredictionSet, rules: RuleSet, console: Console) -> int:
    from ..pipeline import estimate, plan_evaluation
    from ..store import ResponseCache

    plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
    keys: set[str] = set()
    if config.use_cache and Path(config.cache_dir).exists():
        cache = ResponseCache(config.cache_dir)
        keys = cache.keys()
        cache.close()
    figures = estimate(plan, cached_keys=keys)
    print_estimate(figures, console)
    return 0


def _add_retry_errors(commands: _Sub) -> None:
    p = commands.add_parser(
        "retry-errors", help="re-run only the failed calls of a run directory",
        description="Send again only the calls that ended in an error (transport, refusal, "
        "truncation, invalid output); every other call is taken from the run log. Data and "
        "options come from the run's manifest; transport options may be given anew.")
    p.add_argument("run", metavar="RUN_DIR")
    g = p.add_argument_group("transport")
    for flag, kind in (("--base-url", str), ("--concurrency", int), ("--timeout", float),
                       ("--max-retries", int), ("--rpm", int), ("--tpm", int),
                       ("--budget", float), ("--cache-dir", str)):
        g.add_argument(flag, type=kind)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    p.set_defaults(handler=_run_retry_errors)


def _run_retry_errors(args: argparse.Namespace, console: Console) -> int:
    from ..pipeline import RunDirectory

    run_dir = RunDirectory(args.run)
    manifest = run_dir.read_manifest()
    if manifest is None:
        raise OptionError(f"{args.run} is not a run directory with a manifest")
    fields = set(JudgeConfig.model_fields)
    values = {k: v for k, v in manifest["options"].items() if k in fields and k != "api_key"}
    for name in ("base_url", "concurrency", "timeout", "max_retries", "rpm", "tpm", "budget",
                 "cache_dir"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    config = load_config(values)
    sources = manifest["sources"]
    schema = load_schema(sources["schema"])
    dialogues = load_dialogues(sources["dialogues"]).subset(sources["dialogue_ids"])
    predictions = load_predictions(sources["predictions"], dialogues, schema)
    rules = _rules(sources.get("rules"), schema)
    removed = run_dir.drop_errors()
    console.print(f"re-running {removed} failed call(s); the others come from the run log")
    result = _with_progress(args.progress, console, lambda on_progress: evaluate(
        config, schema, dialogues, predictions, rules=rules, out_dir=args.run, resume=True,
        sources={"schema": sources["schema"], "rules": sources.get("rules")},
        on_progress=on_progress, refresh=True))
    return _finish(result, args.run, console, written=True)


def _finish(result: EvaluationResult, out: str, console: Console, *,
            written: bool = False) -> int:
    """Write a judge run's files (unless the run already did) and print its summary."""
    folder = Path(out)
    if not written:
        result.write(folder)
    print_evaluation(result.summary, console)
    console.print(f"wrote {folder / 'judgments.jsonl'} and {folder / 'summary.json'}")
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
    from ..pipeline import plan_evaluation, write_requests

    config = _config(args)
    schema, dialogues = _load_data(args)
    predictions = load_predictions(args.predictions, dialogues, schema)
    plan = plan_evaluation(config, schema, dialogues, predictions, rules=_rules(args.rules, schema))
    count = write_requests(plan, args.out)
    console.print(f"wrote {count} requests to {args.out} ({len(plan.turns)} turns)")
    return 0


def _run_submit(args: argparse.Namespace, console: Console) -> int:
    from ..model import submit

    batch = asyncio.run(submit(_config(args), args.requests))
    console.print(f"batch {batch['id']}: {batch['status']}")
    return 0


def _run_status(args: argparse.Namespace, console: Console) -> int:
    from ..model import status

    batch = asyncio.run(status(_config(args), args.batch_id))
    counts = batch.get("request_counts") or {}
    console.print(f"batch {batch['id']}: {batch['status']} "
                  f"({counts.get('completed', 0)} done, {counts.get('failed', 0)} failed of "
                  f"{counts.get('total', 0)})")
    return 0


def _run_collect(args: argparse.Namespace, console: Console) -> int:
    from ..model import download, read_output
    from ..pipeline import collect

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
    rules = _rules(args.rules, schema)
    result = collect(config, schema, dialogues, predictions, records, rules=rules)
    return _finish(result, args.out, console)


# --- agreement, comparisons -----------------------------------------------------------------

def _add_agreement(commands: _Sub) -> None:
    p = commands.add_parser(
        "agreement", help="agreement of judge, RULE versions and human labels (kappa, CIs)",
        description="For every pair among the judge, RULE-<version> and human labels: accuracy, "
        "Cohen's kappa, confusion matrix and P/R/F1 of the 'incorrect' class, with bootstrap "
        "confidence intervals that resample dialogues.")
    p.add_argument("run", metavar="RUN_DIR", help="a judge run directory")
    p.add_argument("--human", metavar="FILE", help="human labels (JSON Lines)")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--json", dest="json_out", metavar="OUT")
    p.set_defaults(handler=_run_agreement)


def _run_agreement(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import agreement_report, load_labels
    from ..pipeline import load_run
    from ._report import print_agreement

    run = load_run(args.run)
    human = load_labels(args.human) if args.human else None
    report = agreement_report(run.rows, human, n_boot=args.n_boot, seed=args.seed,
                              confidence=args.confidence)
    print_agreement(report, console)
    _write_json(args.json_out, report, console)
    return 0


def _write_json(path: str | None, data: Any, console: Console) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {path}")


def _add_compare(commands: _Sub) -> None:
    p = commands.add_parser(
        "compare", help="judge methods side by side on the same turns (the paper's Table 2)")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--human", metavar="FILE", help="human labels to add agreement with humans")
    p.add_argument("--json", dest="json_out", metavar="OUT")
    p.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import load_labels, method_table
    from ..pipeline import load_run
    from ._report import print_methods

    runs = [load_run(path) for path in args.runs]
    human = load_labels(args.human).per_turn() if args.human else None
    table = method_table(runs, human)
    print_methods(table, console)
    _write_json(args.json_out, table, console)
    return 0


def _add_systems(commands: _Sub) -> None:
    p = commands.add_parser(
        "systems", help="DST systems under the judge and exact-match metrics (TSA, JGA), "
        "with a PNG chart (the paper's Figures 2-3)")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="one judge run per system")
    p.add_argument("--schema", required=True)
    p.add_argument("--dialogues", help="dialogues file (default: the one each run recorded)")
    p.add_argument("--names", nargs="+", help="system names (default: from the runs)")
    p.add_argument("--json", dest="json_out", metavar="OUT")
    p.add_argument("--png", metavar="OUT", help="write a bar chart")
    p.set_defaults(handler=_run_systems)


def _run_systems(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import plot_systems, system_table
    from ..pipeline import load_run
    from ._report import print_systems

    runs = [load_run(path) for path in args.runs]
    if args.names and len(args.names) != len(runs):
        raise OptionError(f"--names has {len(args.names)} names for {len(runs)} runs")
    table = system_table(runs, load_schema(args.schema), names=args.names,
                         dialogues_path=args.dialogues)
    print_systems(table, console)
    _write_json(args.json_out, table, console)
    if args.png:
        console.print(f"wrote {plot_systems(table, args.png)}")
    return 0


def _add_audit(commands: _Sub) -> None:
    p = commands.add_parser(
        "audit", help="HTML page of turns where judge and annotation disagree (for annotators)",
        description="Write one self-contained HTML file listing the turns where the judge and "
        "an annotation version disagree, grouped by slot and kind, with sorting, filtering and "
        "export of annotators' decisions.")
    p.add_argument("run", metavar="RUN_DIR")
    p.add_argument("--out", required=True, metavar="HTML")
    p.set_defaults(handler=_run_audit)


def _run_audit(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import write_audit

    count = write_audit(args.run, args.out)
    console.print(f"wrote {args.out} ({count} items)")
    return 0


def _add_labels(commands: _Sub) -> None:
    p = commands.add_parser("labels", help="human labels: import annotators' decisions")
    sub = p.add_subparsers(dest="labels_command", required=True, metavar="STEP")
    imp = sub.add_parser("import", help="turn an audit export (CSV or JSONL) with decisions "
                         "into a human-labels file")
    imp.add_argument("decisions", help="file exported from the audit page")
    imp.add_argument("--out", required=True, metavar="FILE", help="human labels (JSON Lines)")
    imp.add_argument("--annotator", help="annotator name for rows that give none")
    imp.set_defaults(handler=_run_labels_import)


def _run_labels_import(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import import_decisions, write_labels

    records = import_decisions(args.decisions, annotator=args.annotator)
    count = write_labels(records, args.out)
    console.print(f"wrote {count} human label(s) to {args.out}")
    return 0


# --- cache, validate -----------------------------------------------------------------------------

def _add_cache(commands: _Sub) -> None:
    p = commands.add_parser("cache", help="inspect or clear the reply cache")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--cache-dir", help="cache directory (default: the user cache dir)")
    p.add_argument("--config", metavar="FILE")
    p.set_defaults(handler=_run_cache)


def _run_cache(args: argparse.Namespace, console: Console) -> int:
    from ..store import ResponseCache

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
    _add_retry_errors(commands)
    _add_metrics(commands)
    _add_batch(commands)
    _add_agreement(commands)
    _add_compare(commands)
    _add_systems(commands)
    _add_audit(commands)
    _add_labels(commands)
    _add_cache(commands)
    _add_validate(commands)
    from ._local import add_local_parser
    from ._remote import add_parsers as add_remote_parsers
    from ._serve import add_parser as add_serve_parser

    add_local_parser(commands)
    add_serve_parser(commands)
    add_remote_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    from .._errors import BudgetReached

    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    try:
        return args.handler(args, console)
    except BudgetReached as exc:
        print(f"dst-judge: {exc}; finished calls are logged in the run directory: raise "
              "--budget and pass --resume to continue", file=sys.stderr)
        return 3
    except DSTJudgeError as exc:
        print(f"dst-judge: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dst-judge: interrupted", file=sys.stderr)
        return 130

