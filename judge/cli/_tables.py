"""``dst-judge report``: the tables a paper needs (both gold versions, scoring profiles,
per-domain and per-slot figures) as a terminal table, CSV or LaTeX."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._io import open_output, plain_suffix, write_text
from .._names import PROFILE_NAMES
from ._convert import (
    announce,
    load_dialogues_noted,
    load_predictions_noted,
    load_schema_noted,
    warn_out_of_schema,
)
from ._gold import add_corrections_option, corrected_versions
from ._layout import Field, fit_table
from ._report import say

if TYPE_CHECKING:
    from ..data import Schema
    from ..metrics import PaperTables


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "report", help="paper tables: JGA, final-turn JGA, per-domain JGA, per-slot "
        "accuracy/F1, scoring profiles, several gold versions; text, CSV or LaTeX",
        description="Score every predictions file against every annotation version asked for "
        "(default: all the dialogues carry, e.g. MultiWOZ 2.1 and 2.4) and print the table a "
        "paper needs. Profiles add each convention's headline figures (see docs/PROFILES.md).")
    p.add_argument("--schema", required=True)
    p.add_argument("--dialogues", required=True)
    p.add_argument("--predictions", required=True, nargs="+", metavar="P")
    p.add_argument("--gold", nargs="+", metavar="V", help="versions (default: all)")
    add_corrections_option(p)
    p.add_argument("--profile", nargs="+", default=[], metavar="NAME",
                   help=f"scoring profiles: {', '.join(PROFILE_NAMES)}, or all")
    p.add_argument("--per-slot", action="store_true", help="the per-slot table instead")
    p.add_argument("--format", choices=["table", "csv", "latex"], default=None,
                   help="output format (default: table; from --table-out's suffix when given)")
    p.add_argument("--table-out", metavar="FILE", help="write the table to FILE")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from ..metrics import paper_tables, to_csv, to_latex
    schema = load_schema_noted(args.schema)
    profiles = list(PROFILE_NAMES) if "all" in args.profile else args.profile
    tables = None if profiles or args.corrections else _streamed(args, schema)
    if tables is None:  # profiles and corrections read the dialogues whole
        dialogues = load_dialogues_noted(args.dialogues, schema)
        dialogues, versions, corrected = corrected_versions(dialogues, schema,
                                                            args.corrections, args.gold)
        systems = [load_predictions_noted(p, dialogues, schema) for p in args.predictions]
        names = [s.name for s in systems]
        for system in systems:
            if names.count(system.name) > 1:
                system.name = system.path
        tables = paper_tables(dialogues, systems, schema, versions=versions,
                              profiles=profiles, corrected=[(c.base, c.name) for c in corrected])
    columns, rows = ((tables.slot_columns, tables.slot_rows) if args.per_slot
                     else (tables.columns, tables.rows))
    fmt = args.format or _format_of(args.table_out)
    if fmt == "table":  # figures, systems and slots whole at any width (see _layout)
        table = fit_table([Field(c, "left" if c in ("system", "gold", "slot") else "right")
                           for c in columns], ([_text(v) for v in row] for row in rows),
                          title="; ".join(tables.notes))
        shown = [table]
        if tables.change_rows and not args.per_slot:
            change = fit_table(
                [Field(c, "left" if c in ("system", "gold", "corrected") else "right")
                 for c in tables.change_columns],
                ([_text(v) for v in row] for row in tables.change_rows),
                title="Corrected gold: the change for each system")
            shown.append(change)
        if args.table_out:
            with open_output(args.table_out) as handle:
                for part in shown:
                    Console(file=handle, width=200).print(part)
        else:
            for part in shown:
                console.print(part)
        return 0
    text = to_csv(columns, rows) if fmt == "csv" else to_latex(
        columns, rows, caption="; ".join(tables.notes))
    if tables.change_rows and not args.per_slot:  # the change table follows, as a second block
        text += "\n" + (to_csv(tables.change_columns, tables.change_rows, digits=4)
                        if fmt == "csv" else to_latex(tables.change_columns, tables.change_rows,
                                                      digits=2))
    if args.table_out:
        write_text(args.table_out, text)
        say(console, f"wrote {args.table_out} ({len(rows)} rows)")
    else:
        print(text, end="")
    return 0


def _streamed(args: argparse.Namespace, schema: Schema) -> PaperTables | None:
    """The tables read in step with the dialogues, a version at a time (bounded memory at any
    test-set size), or None when the files must be loaded whole."""
    from ..data import NotInStep, out_of_schema_slots
    from ..metrics import stream_paper_tables
    try:
        tables, files = stream_paper_tables(args.dialogues, args.predictions, schema,
                                            versions=args.gold)
    except NotInStep:
        return None
    announce(files.dialogues, *files.scans)
    for scan in files.scans:
        warn_out_of_schema(scan.path, out_of_schema_slots(scan.out_of_schema, schema))
    return tables


def _format_of(path: str | None) -> str:
    if path and plain_suffix(path) == ".csv":
        return "csv"
    if path and plain_suffix(path) == ".tex":
        return "latex"
    return "table"


def _text(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)
