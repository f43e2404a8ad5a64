"""``dst-judge corrections apply``: a dialogues file with a corrected gold version beside
the versions it had; ``dst-judge corrections export``: a server's reviewed candidates of a run
as a corrections file."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._errors import InputError, OptionError
from .._io import plural
from ._gold import read_all
from ._remote import add_server_option, run_corrections_export


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "corrections", help="corrected gold: apply reviewed corrections of an annotation",
        description="Corrections of a gold annotation (a JSON Lines file; see 'dst-judge "
        "validate corrections --print-schema').")
    sub = p.add_subparsers(dest="corrections_command", required=True, metavar="ACTION")
    apply = sub.add_parser(
        "apply", help="write dialogues with a corrected version added",
        description="Write a dialogues file whose gold_state_TAG / gold_turn_state_TAG are "
        "version --gold with the corrections applied (cumulative and turn states consistent), "
        "every other version as it was. Corrections that disagree on one turn and slot are "
        "refused, with the list of conflicts, unless an adjudication decides them.")
    apply.add_argument("--dialogues", required=True, help="dialogues JSON Lines file (.gz ok)")
    apply.add_argument("--gold", required=True, metavar="VERSION",
                       help="the version corrected, e.g. 2.1")
    apply.add_argument("--corrections", required=True, action="extend", nargs="+",
                       metavar="FILE", help="corrections files (repeatable)")
    apply.add_argument("--as", dest="tag", required=True, metavar="TAG",
                       help="the new version's key suffix: gold_state_TAG (e.g. 21fixed)")
    apply.add_argument("--schema", metavar="FILE",
                       help="check every corrected slot name against this schema")
    apply.add_argument("--out", required=True, metavar="FILE", help="dialogues to write")
    apply.set_defaults(handler=run_apply)
    reviewed = sub.add_parser(
        "from-candidates", help="a reviewed candidates file (CSV or JSONL) as corrections",
        description="Turn the decisions written into a candidates file from 'dst-judge audit "
        "--candidates' (no judge run or server needed) into a corrections file. Fill in each "
        "row's decision column: accept (the suggested value is right), reject (the "
        "annotation is right), edit (the right value is in the value column; empty: the "
        "slot holds none), or leave it blank to skip the row. A value with no decision is an "
        "edit. Each correction names the candidate's id and the value it replaces (was).")
    reviewed.add_argument("candidates", metavar="CANDIDATES",
                          help="the reviewed candidates file (.csv, else JSON Lines)")
    reviewed.add_argument("--reviewer", required=True, metavar="NAME",
                          help="who decided (the corrections' reviewer)")
    reviewed.add_argument("--out", required=True, metavar="FILE",
                          help="corrections file to write (JSON Lines)")
    reviewed.set_defaults(handler=run_from_candidates)
    export = sub.add_parser(
        "export", help="a judge run's reviewed candidates from a server, as corrections",
        description="Download the decisions reviewers took on a judge run's label-error "
        "candidates in the web's candidates queue, as a corrections file: accepted or edited "
        "candidates correct the annotation, rejected ones repeat its value, adjudications "
        "carry adjudicated: true.")
    export.add_argument("--job", required=True, metavar="ID", help="the judge run's job id")
    export.add_argument("--out", required=True, metavar="FILE",
                        help="corrections file to write (JSON Lines)")
    add_server_option(export)
    export.set_defaults(handler=run_corrections_export)


def run_from_candidates(args: argparse.Namespace, console: Console) -> int:
    from datetime import datetime, timezone

    from ..analysis import corrections_from_candidates
    from ..data import write_native_jsonl

    reviewer = args.reviewer.strip()
    if not reviewer:
        raise OptionError("--reviewer: give a name")
    now = datetime.now(timezone.utc).replace(microsecond=0)
    records = corrections_from_candidates(args.candidates, reviewer=reviewer, time=now)
    if not records:
        raise InputError("no decided candidates (fill in the decision column: accept, reject "
                         "or edit with a value)", path=args.candidates)
    count = write_native_jsonl(records, args.out)
    changed = sum(r["value"] != r["was"] for r in records)
    console.print(f"wrote {args.out} ({plural(count, 'correction')}: {changed} change the "
                  f"annotation, {count - changed} confirm it)", markup=False)
    return 0


def run_apply(args: argparse.Namespace, console: Console) -> int:
    from ..data import apply_corrections, load_dialogues, load_schema, write_native_jsonl
    from ..data._dialogues import version_label
    tag = args.tag.strip()
    if not tag or not all(ch.isalnum() or ch in "._-" for ch in tag):
        raise OptionError(f"--as {args.tag!r}: a tag is letters, digits, '.', '_' or '-' "
                          "(it becomes the key gold_state_TAG)")
    schema = load_schema(args.schema) if args.schema else None
    dialogues = load_dialogues(args.dialogues, schema=schema)
    located = read_all(args.corrections)
    name = version_label(tag.replace(".", ""))
    result = apply_corrections(dialogues, args.gold, located, name=name, schema=schema)
    count = write_native_jsonl((d.to_record() for d in result.dialogues.dialogues), args.out)
    console.print(
        f"wrote {args.out} ({plural(count, 'dialogue')}): version {name} = {result.base} with "
        f"{plural(result.applied, 'correction')} ({plural(result.changed_turns, 'turn')}, "
        f"{plural(result.changed_slots, 'slot')} changed; corrections digest "
        f"{result.digest[:12]})", markup=False)
    if result.other_versions:
        console.print(f"left aside {plural(result.other_versions, 'correction')} of other "
                      "versions", markup=False)
    return 0
