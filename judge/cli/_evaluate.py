"""``evaluate`` and ``retry-errors``: judge live (or from a cassette) into a run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._digest import file_digest
from .._errors import ExitStatus, OptionError
from .._glossary import JUDGE_JGA_DEFINITION
from .._io import check_output_dir, plural, printable
from .._names import TRANSPORT_OPTIONS
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
    prediction_paths,
    with_progress,
)
from ._report import print_estimate, print_evaluation, say

if TYPE_CHECKING:
    from ..pipeline import DryRun, EvaluationResult


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "evaluate", help="judge every turn with an LLM (two-dimensional judge) and score it",
        description="Judge each predicted turn state with an LLM (accuracy and completeness), "
        "integrate the verdicts into TSA and judge JGA, and compare with RULE verdicts.",
        epilog=JUDGE_JGA_DEFINITION)
    add_data_options(p, many=True, many_help="or directories of them: several systems are "
                     "judged together, each distinct request sent once (--out then holds one "
                     "run directory per system)")
    add_config_options(p, ALL)
    add_local_option(p)
    add_rules_option(p)
    run = p.add_argument_group("run")
    run.add_argument("--out", metavar="DIR",
                     help="run directory: judgments.jsonl, summary.json, and the run log "
                     "(calls.jsonl) with its manifest for --resume (required unless --dry-run)")
    run.add_argument("--resume", action="store_true",
                     help="continue an interrupted run in --out without repeating finished calls")
    add_force_option(run)
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


def add_force_option(parser: Any) -> None:
    parser.add_argument("--force", action="store_true",
                        help="replace the results in --out even when another run (or no run) "
                        "wrote them (default: refuse, exit status 6)")


def sources_of(args: argparse.Namespace) -> dict[str, Any]:
    """Where the run's inputs came from: absolute paths, and the schema file's digest so that
    later commands can find the schema again and know it did not change."""
    schema = Path(args.schema).resolve()
    rules = str(Path(args.rules).resolve()) if args.rules else None
    return {"schema": str(schema), "schema_sha256": file_digest(schema), "rules": rules}


def run_evaluate(args: argparse.Namespace, console: Console) -> int:
    """Judge live (or from a cassette) into a resumable run directory."""
    from ..model import cassette_client, replay_base_url
    from ..pipeline import (
        cached_request_keys,
        dry_run,
        evaluate,
        evaluate_systems,
        plan_evaluation,
        rules_for,
        system_dirs,
    )
    config = config_from_args(args, **({"use_cache": False} if args.record else {}))
    if args.replay and (replayed := replay_base_url(args.replay, config.base_url)):
        # cached replies of a replay are keyed by the cassette's contents (see replay_base_url)
        config = config.model_copy(update={"base_url": replayed})
    schema, dialogues = load_data(args)
    paths = prediction_paths(args.predictions)
    systems = [load_predictions_noted(str(path), dialogues, schema) for path in paths]
    rules = rules_for(args.rules, schema)
    if args.dry_run:
        plans = [plan_evaluation(config, schema, dialogues, p, rules=rules) for p in systems]
        figures = dry_run(plans[0], cached_keys=cached_request_keys(config), others=plans[1:])
        print_estimate(figures, console)
        if len(plans) > 1:
            print_saving(figures, system_dirs(systems), console)
        return 0
    if not args.out:
        raise OptionError("evaluate needs --out DIR (the run directory), unless --dry-run")
    if not (args.replay or config.base_url or config.api_key):
        raise OptionError("no model to ask: set OPENAI_API_KEY, pass --base-url for a local "
                          "OpenAI-compatible server, or --replay a cassette")
    check_output_dir(args.out)  # before anything is sent (and paid for)
    http_client, cassette = cassette_client(config, replay=args.replay, record=args.record)
    options = {"rules": rules, "http_client": http_client, "out_dir": args.out,
               "resume": args.resume, "sources": sources_of(args), "force": args.force,
               "handle_signals": True}
    if len(systems) == 1:
        result = with_progress(args.progress, console, lambda on_progress: evaluate(
            config, schema, dialogues, systems[0], on_progress=on_progress, **options))
    else:
        results = with_progress(args.progress, console, lambda on_progress: evaluate_systems(
            config, schema, dialogues, systems, on_progress=on_progress, **options))
    if cassette is not None:
        cassette.save()
        say(console, f"recorded {len(cassette.interactions)} exchanges into {cassette.path}")
    if len(systems) == 1:
        return finish(result, args.out, console)
    return finish_systems(results, system_dirs(systems), args.out, console)


def run_retry_errors(args: argparse.Namespace, console: Console) -> int:
    from ..pipeline import retry_errors
    overrides = {name: getattr(args, name) for name in TRANSPORT_OPTIONS
                 if getattr(args, name, None) is not None}
    result = with_progress(args.progress, console, lambda on_progress: retry_errors(
        args.run, overrides=overrides, on_progress=on_progress, handle_signals=True))
    retried = int(result.summary["calls"].get("retried", 0))
    say(console, f"re-ran {plural(retried, 'failed call')}; the others came from the run log")
    return finish(result, args.run, console)


def finish_systems(results: list[EvaluationResult], names: list[str], out: str,
                   console: Console, *, tally: str | None = None,
                   again: str = "'dst-judge retry-errors DIR/<system>' sends their calls "
                                "again") -> int:
    """Print each system's summary and what judging them together saved (``tally``, else
    the live run's request counts); ``again`` says how to redo error rows."""
    from ..pipeline import EvaluationResult
    for name, result in zip(names, results, strict=True):
        say(console, f"\nsystem {name} ({Path(out) / name})")
        print_evaluation(result.summary, console)
    if tally is None:
        group = results[0].summary["calls"].get("group", {})
        planned = sum(r.summary["calls"]["planned"] for r in results)
        tally = (f"{len(results)} systems, {planned} calls planned: {group.get('sent', 0)} "
                 f"requests sent, {group.get('cache_hits', 0)} from the cache, "
                 f"{group.get('shared', 0)} shared between systems")
    say(console, f"\n{tally}; results in {out}/<system>/")
    status = EvaluationResult.combined_status(results)
    if status is not ExitStatus.OK:
        print(f"dst-judge: some turns are error rows ({status.name.lower()}); {again}",
              file=sys.stderr)
    return int(status)


def print_saving(figures: DryRun, names: list[str], console: Console) -> None:
    """What judging several systems together saves over separate runs."""
    alone = figures["calls"] - figures["already_cached"]
    saving = 1 - figures["to_send"] / alone if alone else 0.0
    say(console, f"{figures['systems']} systems ({', '.join(names)}): {figures['calls']} "
                  f"calls, {figures['to_send']} distinct requests to send, "
                  f"{figures['already_cached']} already cached (saving {saving:.1%} over "
                  "separate runs)")


def finish(result: EvaluationResult, out: str, console: Console) -> int:
    """Print a written judge run's summary; the exit status says whether every turn was
    judged (0), some are error rows (1) or none could be judged (4)."""
    folder = Path(out)
    print_evaluation(result.summary, console)
    say(console, f"wrote {folder / 'judgments.jsonl'} and {folder / 'summary.json'}")
    status = result.exit_status
    if status is ExitStatus.NOTHING_JUDGED:
        examples = result.summary.get("errors", {}).get("examples") or ["?"]
        print(printable(f"dst-judge: nothing could be judged: every turn is an error row "
                        f"(first: {examples[0]})", newlines=False), file=sys.stderr)
    elif status is ExitStatus.ERROR_ROWS:
        errors = int(result.summary.get("error_turns") or 0)
        rows = "is an error row" if errors == 1 else "are error rows"
        print(f"dst-judge: {plural(errors, 'turn')} {rows}; "
              f"'dst-judge retry-errors {printable(out, newlines=False)}' sends their calls "
              "again", file=sys.stderr)
    return int(status)
