"""``dst-judge submit | jobs | results --server URL``: use a ``dst-judge serve`` from the
command line through :class:`judge.Client` (token from ``DST_JUDGE_TOKEN``).

Local files given as inputs are uploaded first (uploads are content-addressed, so sending the
same file again is cheap); an argument that names an uploaded file's id (``file_...``) is used
as it is. ``--wait`` follows the job and exits with the job's exit code, as the local command
of the same kind would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from .._errors import OptionError
from .._io import printable
from .._names import JobStatus

if TYPE_CHECKING:
    from ..client import Client, FileKind, Job

_KINDS = ("evaluate", "metrics", "agreement", "compare", "audit", "retry-errors",
          "leaderboard")


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    sub = commands.add_parser(
        "submit", help="queue a job on a dst-judge server (--server URL, DST_JUDGE_TOKEN)",
        description="Upload the inputs and queue a job on a dst-judge server. Options use the "
        "CLI names: --model, --method, --endpoint (a name the server offers), --budget, or any "
        "other as --option NAME=VALUE (underscored; VALUE is JSON when it parses).")
    sub.add_argument("kind", choices=_KINDS)
    _server(sub)
    g = sub.add_argument_group("inputs (paths are uploaded; file_... ids are used as given)")
    g.add_argument("--schema")
    g.add_argument("--dialogues")
    g.add_argument("--predictions", nargs="+", metavar="P",
                   help="predictions files (one for evaluate; several for metrics and for an "
                   "audit of predictions files, which needs no judge run)")
    g.add_argument("--rules", help="a rule file (evaluate)")
    g.add_argument("--run", metavar="JOB_ID", help="the judge run (agreement, audit, "
                   "retry-errors)")
    g.add_argument("--runs", nargs="+", metavar="JOB_ID", help="judge runs (compare)")
    g.add_argument("--systems", nargs="+", metavar="S",
                   help="leaderboard: the systems in order, each a predictions file (uploaded), "
                   "a file_... id or a judge run's job_... id")
    g.add_argument("--human", help="human labels file (agreement, compare)")
    g.add_argument("--corrections", nargs="+", metavar="C",
                   help="corrections files (evaluate, metrics, agreement, audit); an audit "
                   "leaves out the candidates they decide")
    o = sub.add_argument_group("options")
    o.add_argument("--endpoint", help="model endpoint by name (the server's list: GET "
                   "/v1/endpoints)")
    o.add_argument("--model")
    o.add_argument("--method")
    o.add_argument("--budget", type=float, metavar="USD")
    o.add_argument("--limit", type=int, metavar="N")
    o.add_argument("-o", "--option", action="append", default=[], metavar="NAME=VALUE")
    sub.add_argument("--mode", choices=("live", "batch"), default="live",
                     help="evaluate through live calls (default) or the server's Batch API "
                     "(half price, hours of latency; the endpoint must offer it)")
    sub.add_argument("--wait", action="store_true",
                     help="follow the job to its end; exit with its exit code")
    sub.set_defaults(handler=_run_submit)

    jobs = commands.add_parser("jobs", help="list jobs on a dst-judge server, or show one")
    jobs.add_argument("job_id", nargs="?")
    _server(jobs)
    jobs.add_argument("--status", choices=typing.get_args(JobStatus))
    jobs.add_argument("--cancel", action="store_true", help="cancel JOB_ID")
    jobs.add_argument("--json", action="store_true")
    jobs.set_defaults(handler=_run_jobs)

    results = commands.add_parser("results", help="fetch a finished job's results")
    results.add_argument("job_id")
    _server(results)
    results.add_argument("--out", metavar="DIR", help="write summary.json, judgments.jsonl "
                         "and the job's schema, dialogues and predictions (inputs/, listed in "
                         "inputs.json): a run directory for agreement, compare, systems, audit")
    results.add_argument("--no-inputs", action="store_true",
                         help="with --out: leave the input files out (audit then needs "
                         "--dialogues)")
    results.add_argument("--export", metavar="FILE", help="save the job's bundle (.tar.gz)")
    results.add_argument("--json", action="store_true", help="print the summary JSON")
    results.set_defaults(handler=_run_results)


def _server(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=os.environ.get("DST_JUDGE_SERVER"),
                   help="server URL (env DST_JUDGE_SERVER); the token comes from "
                   "DST_JUDGE_TOKEN")


def _client(args: argparse.Namespace) -> Client:
    from ..client import Client
    if not args.server:
        raise OptionError("--server URL is needed (or set DST_JUDGE_SERVER)")
    if not os.environ.get("DST_JUDGE_TOKEN"):
        raise OptionError("set DST_JUDGE_TOKEN to a token from 'dst-judge serve token create'")
    return Client(args.server)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _file(client: Client, value: str, kind: FileKind) -> str:
    if value.startswith("file_") and not Path(value).exists():
        return value
    if not Path(value).is_file():
        raise OptionError(f"{value}: no such file (and not an uploaded file id)")
    return client.upload(value, kind).id


def _inputs(client: Client, args: argparse.Namespace) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    names: tuple[FileKind, ...] = ("schema", "dialogues", "rules")
    for name in names:
        if getattr(args, name):
            inputs[name] = _file(client, getattr(args, name), name)
    if args.predictions:
        ids = [_file(client, p, "predictions") for p in args.predictions]
        inputs["predictions"] = ids if args.kind in ("metrics", "audit") else ids[0]
        if args.kind not in ("metrics", "audit") and len(ids) > 1:
            raise OptionError("an evaluate job judges one predictions file")
    if args.corrections:
        inputs["corrections"] = [_file(client, c, "corrections") for c in args.corrections]
    if args.systems:
        inputs["systems"] = [s if s.startswith("job_") and not Path(s).exists()
                             else _file(client, s, "predictions") for s in args.systems]
    if args.human:
        inputs["human"] = _file(client, args.human, "labels")
    if args.run:
        inputs["run"] = args.run
    if args.runs:
        inputs["runs"] = args.runs
    return inputs


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options = {name: getattr(args, name) for name in ("endpoint", "model", "method", "budget",
                                                      "limit") if getattr(args, name) is not None}
    for item in args.option:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise OptionError(f"--option expects NAME=VALUE (got {item!r})")
        options[name.strip().replace("-", "_")] = _value(text)
    return options


def _run_submit(args: argparse.Namespace, console: Console) -> int:
    with _client(args) as client:
        job = client.submit(args.kind, _inputs(client, args), _options(args), mode=args.mode)
        console.print(f"queued {job.id} ({job.kind})", highlight=False)
        for warning in job.warnings:
            print(printable(f"dst-judge: warning: {warning.message}"), file=sys.stderr)
        if not args.wait:
            print(job.id)
            return 0
        done = client.wait(job.id, on_update=lambda j: _progress(j, console))
        return _report(done, client, console)


def _progress(job: Job, console: Console) -> None:
    p = job.progress
    batches = p.batches
    if batches and job.working:
        console.print(f"  {job.id}: {batches.ended}/{batches.files} batches ended, "
                      f"{batches.requests_done}/{batches.requests} requests done",
                      highlight=False)
    elif job.running and p.total:
        console.print(f"  {job.id}: {p.done}/{p.total} calls, {p.errors} errors, "
                      f"${p.cost_usd:.4f}", highlight=False)


def _report(job: Job, client: Client, console: Console) -> int:
    console.print(f"{job.id}: {job.status}"
                  + (f" (exit {job.exit_code}: {job.exit_meaning})"
                     if job.exit_code is not None else ""), highlight=False)
    if job.error:
        print(f"dst-judge: {job.error}", file=sys.stderr)
    if job.headline:
        h = job.headline
        console.print(f"TSA {_pct(h.tsa)} · judge JGA {_pct(h.judge_jga)} · "
                      + " · ".join(f"RULE-{escape(v)} agreement {_pct(a)}"
                                   for v, a in h.rule_agreement.items()), highlight=False)
    if job.exit_code is not None:
        return int(job.exit_code)
    return 0 if job.succeeded else 1


def _pct(value: Any) -> str:
    return f"{value:.1f} %" if isinstance(value, int | float) else "—"


def _run_jobs(args: argparse.Namespace, console: Console) -> int:
    with _client(args) as client:
        if args.job_id:
            job = client.cancel(args.job_id) if args.cancel else client.job(args.job_id)
            if args.json:
                print(job.model_dump_json(indent=2))
                return 0
            return _report(job, client, console) if job.final else _show(job, console)
        if args.cancel:
            raise OptionError("--cancel needs a JOB_ID")
        items = client.jobs(status=args.status)
        if args.json:
            print(json.dumps([j.model_dump(mode="json") for j in items], indent=2))
            return 0
        console.print(jobs_table(items))
    return 0


def jobs_table(items: Sequence[Job]) -> Any:
    """The job list. Ids (``results`` needs them), figures and times are printed whole on
    any terminal: too narrow for the row, the table turns into one block per job."""
    from ._layout import Field, fit_table

    rows = []
    for job in items:
        p = job.progress
        done = f"{p.done}/{p.total}" if p.total else ""
        created = job.created_at.replace("T", " ")[:19]  # to the second
        rows.append((job.id, job.kind, job.status, done, f"${p.cost_usd:.4f}", created))
    return fit_table(["id", "kind", "status", Field("progress", "right"),
                      Field("cost", "right"), "created"], rows)


def _show(job: Job, console: Console) -> int:
    p = job.progress
    console.print(f"{job.id} ({job.kind}): {job.status}; {p.done}/{p.total} "
                  f"calls, {p.cache_hits} cache hits, {p.errors} errors, ${p.cost_usd:.4f}"
                  + (f", about {p.eta_seconds:.0f} s left" if p.eta_seconds else ""),
                  highlight=False)
    return 0


def _run_results(args: argparse.Namespace, console: Console) -> int:
    with _client(args) as client:
        job = client.job(args.job_id)
        if args.export:
            client.export(args.job_id, args.export)
            console.print(f"wrote {escape(args.export)}")
        if args.out:
            folder = client.download_run(args.job_id, args.out, inputs=not args.no_inputs)
            console.print(f"wrote {escape(str(folder / 'judgments.jsonl'))} and "
                          f"{escape(str(folder / 'summary.json'))}"
                          + ("" if args.no_inputs else
                             f", inputs in {escape(str(folder / 'inputs'))}"))
        summary = client.results(args.job_id)
        if args.json or job.kind not in ("evaluate", "retry-errors"):
            print(json.dumps(summary, indent=2, ensure_ascii=False))
        else:
            from ._report import print_evaluation

            print_evaluation(summary, console)
    return 0


def add_server_option(p: argparse.ArgumentParser) -> None:
    """``--server`` (the token from ``DST_JUDGE_TOKEN``), for commands of other modules."""
    _server(p)


def run_corrections_export(args: argparse.Namespace, console: Console) -> int:
    """``dst-judge corrections export``: a run's decided candidates as a corrections file."""
    with _client(args) as client:
        count = client.export_corrections(args.job, args.out)
    console.print(printable(f"wrote {args.out} ({count} correction"
                            f"{'' if count == 1 else 's'} of run {args.job})"), markup=False)
    return 0
