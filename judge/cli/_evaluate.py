"""``evaluate`` and ``retry-errors``: judge live (or from a cassette) into a run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from .._digest import file_digest
from .._errors import OptionError
from .._io import check_output_dir, printable
from ..model import cassette_client
from ..pipeline import (
    TRANSPORT_OPTIONS,
    EvaluationResult,
    cached_request_keys,
    estimate,
    evaluate,
    plan_evaluation,
    retry_errors,
    rules_for,
)
from ._convert import load_predictions_noted
from ._options import (
    ALL,
    add_config_options,
    add_data_options,
    add_local_option,
    add_progress_option,
    add_rules_option,
    config_from_args,
    load_data,
    with_progress,
)
from ._report import print_estimate, print_evaluation, say


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "evaluate", help="judge every turn with an LLM (two-dimensional judge) and score it",
        description="Judge each predicted turn state with an LLM (accuracy and completeness), "
        "integrate the verdicts into TSA and judge JGA, and compare with RULE verdicts.")
    add_data_options(p)
    add_config_options(p, ALL)
    add_local_option(p)
    add_rules_option(p)
    run = p.add_argument_group("run")
    run.add_argument("--out", metavar="DIR",
                     help="run directory: judgments.jsonl, summary.json, and the run log "
                     "(calls.jsonl) with its manifest for --resume (required unless --dry-run)")
    run.add_argument("--resume", action="store_true",
                     help="continue an interrupted run in --out without repeating finished calls")
    run.add_argument("--dry-run", action="store_true",
                     help="estimate calls, tokens and cost; make no call")
    add_progress_option(run)
    run.add_argument("--replay", metavar="CASSETTE",
                     help="answer from recorded traffic (no key needed)")
    run.add_argument("--record", metavar="CASSETTE",
                     help="record the traffic with a real server into CASSETTE (cache off)")
    p.set_defaults(handler=run_evaluate)

    p = commands.add_parser(
        "retry-errors", help="re-run only the failed calls of a run directory",
        description="Send again only the calls that ended in an error (transport, refusal, "
        "truncation, invalid output); every other call is taken from the run log. Data and "
        "options come from the run's manifest; only transport options may be given anew.")
    p.add_argument("run", metavar="RUN_DIR", help="a run directory written by 'evaluate'")
    add_config_options(p, TRANSPORT_OPTIONS, title="transport (default: as the run had them)",
                       config_file=False)
    add_progress_option(p)
    p.set_defaults(handler=run_retry_errors)


def _sources(args: argparse.Namespace) -> dict[str, Any]:
    """Where the run's inputs came from: absolute paths, and the schema file's digest so that
    later commands can find the schema again and know it did not change."""
    schema = Path(args.schema).resolve()
    rules = str(Path(args.rules).resolve()) if args.rules else None
    return {"schema": str(schema), "schema_sha256": file_digest(schema), "rules": rules}


def run_evaluate(args: argparse.Namespace, console: Console) -> int:
    """Judge live (or from a cassette) into a resumable run directory."""
    config = config_from_args(args, **({"use_cache": False} if args.record else {}))
    schema, dialogues = load_data(args)
    predictions = load_predictions_noted(args.predictions, dialogues, schema)
    rules = rules_for(args.rules, schema)
    if args.dry_run:
        plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
        print_estimate(estimate(plan, cached_keys=cached_request_keys(config)), console)
        return 0
    if not args.out:
        raise OptionError("evaluate needs --out DIR (the run directory), unless --dry-run")
    if not (args.replay or config.base_url or config.api_key):
        raise OptionError("no model to ask: set OPENAI_API_KEY, pass --base-url for a local "
                          "OpenAI-compatible server, or --replay a cassette")
    check_output_dir(args.out)  # before anything is sent (and paid for)
    http_client, cassette = cassette_client(config, replay=args.replay, record=args.record)
    result = with_progress(args.progress, console, lambda on_progress: evaluate(
        config, schema, dialogues, predictions, rules=rules, http_client=http_client,
        out_dir=args.out, resume=args.resume, sources=_sources(args), on_progress=on_progress))
    if cassette is not None:
        cassette.save()
        say(console, f"recorded {len(cassette.interactions)} exchanges into {cassette.path}")
    return finish(result, args.out, console, written=True)


def run_retry_errors(args: argparse.Namespace, console: Console) -> int:
    overrides = {name: getattr(args, name) for name in TRANSPORT_OPTIONS
                 if getattr(args, name, None) is not None}
    result = with_progress(args.progress, console, lambda on_progress: retry_errors(
        args.run, overrides=overrides, on_progress=on_progress))
    say(console, f"re-ran {result.summary['calls'].get('retried', 0)} failed call(s); the "
                  "others came from the run log")
    return finish(result, args.run, console, written=True)


def finish(result: EvaluationResult, out: str, console: Console, *,
           written: bool = False) -> int:
    """Write a judge run's files (unless the run already did) and print its summary."""
    folder = Path(out)
    if not written:
        result.write(folder)
    print_evaluation(result.summary, console)
    say(console, f"wrote {folder / 'judgments.jsonl'} and {folder / 'summary.json'}")
    # every turn judged: 0; some error rows: 1; none judged: 4 (the README's exit table)
    summary = result.summary
    if not summary.get("error_turns"):
        return 0
    first = (summary.get("errors", {}).get("examples") or ["?"])[0]
    if not summary.get("scored_turns"):
        print(printable(f"dst-judge: nothing could be judged: every turn is an error row "
                        f"(first: {first})", newlines=False), file=sys.stderr)
        return 4
    print(f"dst-judge: {summary['error_turns']} turn(s) are error rows; 'dst-judge "
          f"retry-errors {printable(out, newlines=False)}' sends their calls again",
          file=sys.stderr)
    return 1
