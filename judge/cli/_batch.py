"""``batch prepare / submit / status / collect``: judge at scale through the OpenAI Batch API."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._errors import OptionError
from .._io import check_output_dir, gzip_name, plural
from ._convert import load_predictions_noted
from ._evaluate import add_force_option, finish, finish_systems, sources_of
from ._options import (
    COST,
    ENDPOINT,
    GENERATION,
    METHOD,
    REPLIES,
    add_config_options,
    add_data_options,
    add_rules_option,
    config_from_args,
    load_data,
    prediction_paths,
)
from ._report import say

if TYPE_CHECKING:
    from ..pipeline import EvaluationPlan

_PREPARE = ("model", *GENERATION, "method", "prompt_variant", "prompt_cache_key",
            "batch_max_requests", "batch_max_bytes")
"""What shapes the request files (transport and cost options do nothing at this step)."""
_API = ("base_url", "timeout", "max_retries")


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser("batch", help="judge at scale through the OpenAI Batch API",
                            description="prepare → submit → status → collect: the same "
                            "requests, parsing, filters and integration as a live run, at the "
                            "Batch API's discount.")
    sub = p.add_subparsers(dest="batch_command", required=True, metavar="STEP")
    prep = sub.add_parser("prepare", help="write the Batch API request file(s)",
                          description="Write one request per distinct request body (calls with "
                          "identical bodies are asked once), split into numbered files at "
                          "the Batch API's limits (50,000 requests, 200 MB).")
    add_data_options(prep, many=True, many_help="or directories of them: several systems "
                     "share the request files, each distinct body written once")
    add_config_options(prep, _PREPARE)
    prep.add_argument("--out", required=True, metavar="FILE",
                      help="request file (JSON Lines); when split: FILE-001.jsonl, ...")
    prep.set_defaults(handler=run_prepare)
    up = sub.add_parser("submit", help="upload request files and create one batch each",
                        description="Submit each request file as one batch and record the "
                        "batch ids (after each submission) in a record file.")
    up.add_argument("requests", nargs="+", metavar="FILE_OR_DIR",
                    help="request files from 'batch prepare', or a directory of them")
    up.add_argument("--record", metavar="FILE",
                    help="where to record the batch ids (default: batches.json beside the "
                    "first request file)")
    up.add_argument("--resubmit", action="store_true",
                    help="submit files the record lists as submitted already (pays again)")
    add_config_options(up, _API)
    up.set_defaults(handler=run_submit)
    stat = sub.add_parser("status", help="show the status of batches")
    stat.add_argument("batch_ids", nargs="*", metavar="BATCH_ID",
                      help="ids 'batch submit' printed (or give --record)")
    stat.add_argument("--record", metavar="FILE", help="the record file of 'batch submit'")
    add_config_options(stat, _API)
    stat.set_defaults(handler=run_status)
    col = sub.add_parser("collect", help="integrate finished batches (live, or from files)",
                         description="Download the output of every batch (or read output "
                         "files), merge them and integrate the answers like a live run.")
    col.add_argument("batch_ids", nargs="*", metavar="BATCH_ID",
                     help="batches to download (or give --record or --output-file)")
    col.add_argument("--record", metavar="FILE", help="the record file of 'batch submit'")
    col.add_argument("--output-file", nargs="+", metavar="FILE",
                     help="finished batches' output (and error) files on disk")
    add_data_options(col, many=True, many_help="or directories of them, as given to "
                     "'batch prepare' (--out then holds one run directory per system)")
    add_config_options(col, (*ENDPOINT, *GENERATION, *METHOD, "prompt_cache_key", *COST,
                             "timeout", "max_retries", *REPLIES))
    add_rules_option(col)
    col.add_argument("--out", required=True, metavar="DIR", help="run directory for the results")
    add_force_option(col)
    col.set_defaults(handler=run_collect)


def _systems(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    """Schema, dialogues and every system's predictions (files, or directories of them)."""
    schema, dialogues = load_data(args)
    return schema, dialogues, [load_predictions_noted(str(path), dialogues, schema)
                               for path in prediction_paths(args.predictions)]


def run_prepare(args: argparse.Namespace, console: Console) -> int:
    from ..pipeline import plan_evaluation, system_dirs, write_requests
    if gzip_name(args.out):  # the Batch APIs read the uploaded file as plain JSON Lines
        raise OptionError(f"--out {args.out}: the Batch API takes plain JSON Lines, not gzip; "
                          "give a name without .gz")
    config = config_from_args(args)
    schema, dialogues, systems = _systems(args)
    plans: list[EvaluationPlan] = [plan_evaluation(config, schema, dialogues, p)
                                   for p in systems]
    if len(plans) == 1:
        written = write_requests(plans[0], args.out)
        one = written.duplicates == 1
        shared = (f"; {plural(written.duplicates, 'call')} {'shares' if one else 'share'} a "
                  f"body with another and {'is' if one else 'are'} asked once"
                  if written.duplicates else "")
        say(console, f"wrote {plural(written.requests, 'request')} for "
                     f"{plural(written.calls, 'call')} "
                     f"({plural(len(plans[0].turns), 'turn')}){shared}")
    else:
        names = system_dirs(systems)
        written = write_requests(plans, args.out, names=names)
        saving = 1 - written.requests / written.separate if written.separate else 0.0
        say(console, f"{len(plans)} systems ({', '.join(names)}): {written.calls} calls, "
                     f"{written.requests} distinct requests written; separate request files "
                     f"would hold {written.separate} (saving {saving:.1%})")
    for path, count, size in zip(written.files, written.counts, written.sizes, strict=True):
        say(console, f"  {path}: {count} requests, {size:,} bytes")
    return 0


def _ids(args: argparse.Namespace) -> list[str]:
    from ..pipeline import record_ids
    ids = list(args.batch_ids or [])
    if args.record:
        ids += [i for i in record_ids(args.record) if i not in ids]
    return ids


def run_submit(args: argparse.Namespace, console: Console) -> int:
    from ..pipeline import default_record, request_files, submit_files
    files = request_files(args.requests)
    record = Path(args.record) if args.record else default_record(files)
    config = config_from_args(args)

    def submitted(entry: dict[str, Any]) -> None:
        found = " (already at the provider, not recorded: recorded now, not paid again)" \
            if entry.get("found") else ""
        say(console, f"batch {entry['id']}: {entry['status']} ({entry['requests']} requests "
                     f"from {entry['file']}){found}")

    asyncio.run(submit_files(config, files, record, resubmit=args.resubmit,
                             on_submitted=submitted))
    say(console, f"recorded the batch id(s) in {record}")
    return 0


def run_status(args: argparse.Namespace, console: Console) -> int:
    from ..model import status
    ids = _ids(args)
    if not ids:
        raise OptionError("batch status needs BATCH_ID(s) or --record FILE")
    config = config_from_args(args)
    for batch_id in ids:
        batch = asyncio.run(status(config, batch_id))
        counts = batch.get("request_counts") or {}
        say(console, f"batch {batch['id']}: {batch['status']} "
                     f"({counts.get('completed', 0)} done, {counts.get('failed', 0)} failed of "
                     f"{counts.get('total', 0)})")
    return 0


def run_collect(args: argparse.Namespace, console: Console) -> int:
    from ..model import ReplyLimits, download, read_output
    from ..pipeline import collect, collect_systems, rules_for, system_dirs
    config = config_from_args(args)
    schema, dialogues, systems = _systems(args)
    check_output_dir(args.out)
    files = [Path(f) for f in args.output_file or []]
    ids = _ids(args)
    if not files and not ids:
        raise OptionError("batch collect needs BATCH_ID(s), --record FILE or --output-file FILE")
    limits = ReplyLimits.from_config(config)
    options: dict[str, Any] = {"rules": rules_for(args.rules, schema), "out_dir": args.out,
                               "force": args.force, "sources": sources_of(args)}
    with tempfile.TemporaryDirectory(prefix="dst-judge-batch-") as downloads:
        fetched: list[Path] = []
        for batch_id in ids:
            fetched += asyncio.run(download(config, batch_id, downloads))
        records = {}
        for path in [*files, *fetched]:
            records.update(read_output(path, limits=limits, secret=config.secret))
        if len(systems) == 1:
            result = collect(config, schema, dialogues, systems[0], records,
                             keep_files=fetched, **options)
        else:
            results = collect_systems(config, schema, dialogues, systems, records,
                                      keep_files=fetched, **options)
    if len(systems) == 1:
        return finish(result, args.out, console)
    planned = sum(r.summary["calls"]["planned"] for r in results)
    shared = sum(r.summary["calls"]["batch_lines_shared"] for r in results)
    missing = sum(r.summary["calls"]["batch_lines_missing"] for r in results)
    tally = (f"{len(results)} systems, {planned} calls: {planned - shared - missing} answered "
             f"by their own line, {shared} by the line of a call with the same body, "
             f"{missing} without a line")
    return finish_systems(results, system_dirs(systems), args.out, console, tally=tally,
                          again="each system's summary.json names the first of them")
