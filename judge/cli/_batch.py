"""``batch prepare / submit / status / collect``: judge at scale through the OpenAI Batch API."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console

from .._errors import OptionError
from ..model import download, read_output, status, submit
from ..pipeline import collect, plan_evaluation, rules_for, write_requests
from ._convert import load_predictions_noted
from ._evaluate import finish
from ._options import (
    COST,
    ENDPOINT,
    GENERATION,
    METHOD,
    add_config_options,
    add_data_options,
    add_rules_option,
    config_from_args,
    load_data,
)

_PREPARE = ("model", *GENERATION, "method", "prompt_variant", "prompt_cache_key")
"""What shapes a request line (transport and cost options do nothing at this step)."""
_API = ("base_url", "timeout", "max_retries")


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser("batch", help="judge at scale through the OpenAI Batch API",
                            description="prepare → submit → status → collect: the same "
                            "requests, parsing, filters and integration as a live run, at the "
                            "Batch API's discount.")
    sub = p.add_subparsers(dest="batch_command", required=True, metavar="STEP")
    prep = sub.add_parser("prepare", help="write the Batch API request file")
    add_data_options(prep)
    add_config_options(prep, _PREPARE)
    prep.add_argument("--out", required=True, metavar="FILE", help="request file (JSON Lines)")
    prep.set_defaults(handler=run_prepare)
    up = sub.add_parser("submit", help="upload a request file and create a batch")
    up.add_argument("requests", help="request file from 'batch prepare'")
    add_config_options(up, _API)
    up.set_defaults(handler=run_submit)
    stat = sub.add_parser("status", help="show a batch's status")
    stat.add_argument("batch_id", help="the id 'batch submit' printed")
    add_config_options(stat, _API)
    stat.set_defaults(handler=run_status)
    col = sub.add_parser("collect", help="integrate a finished batch (live, or from a file)")
    col.add_argument("batch_id", nargs="?", help="batch to download (omit with --output-file)")
    col.add_argument("--output-file", metavar="FILE", help="a finished batch's output on disk")
    add_data_options(col)
    add_config_options(col, (*ENDPOINT, *GENERATION, *METHOD, "prompt_cache_key", *COST,
                             "timeout", "max_retries"))
    add_rules_option(col)
    col.add_argument("--out", required=True, metavar="DIR", help="run directory for the results")
    col.set_defaults(handler=run_collect)


def run_prepare(args: argparse.Namespace, console: Console) -> int:
    config = config_from_args(args)
    schema, dialogues = load_data(args)
    predictions = load_predictions_noted(args.predictions, dialogues, schema)
    plan = plan_evaluation(config, schema, dialogues, predictions)
    count = write_requests(plan, args.out)
    console.print(f"wrote {count} requests to {args.out} ({len(plan.turns)} turns)",
                  markup=False)
    return 0


def run_submit(args: argparse.Namespace, console: Console) -> int:
    batch = asyncio.run(submit(config_from_args(args), args.requests))
    console.print(f"batch {batch['id']}: {batch['status']}", markup=False)
    return 0


def run_status(args: argparse.Namespace, console: Console) -> int:
    batch = asyncio.run(status(config_from_args(args), args.batch_id))
    counts = batch.get("request_counts") or {}
    console.print(f"batch {batch['id']}: {batch['status']} "
                  f"({counts.get('completed', 0)} done, {counts.get('failed', 0)} failed of "
                  f"{counts.get('total', 0)})", markup=False)
    return 0


def run_collect(args: argparse.Namespace, console: Console) -> int:
    config = config_from_args(args)
    schema, dialogues = load_data(args)
    predictions = load_predictions_noted(args.predictions, dialogues, schema)
    if args.output_file:
        files = [Path(args.output_file)]
    elif args.batch_id:
        files = asyncio.run(download(config, args.batch_id, args.out))
    else:
        raise OptionError("batch collect needs a BATCH_ID or --output-file FILE")
    records = {}
    for path in files:
        records.update(read_output(path))
    result = collect(config, schema, dialogues, predictions, records,
                     rules=rules_for(args.rules, schema))
    return finish(result, args.out, console)
