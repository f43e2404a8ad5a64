"""``dst-judge audit``: the annotation-audit page and the ranked label-error candidates."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._errors import OptionError
from .._io import plural
from ._gold import add_corrections_option, corrected_gold, read_all

__all__ = ["add_parsers"]


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``audit`` under the main ``dst-judge`` parser."""
    p = commands.add_parser(
        "audit", help="find annotation errors: ranked label-error candidates (CSV/JSONL) and "
        "an HTML page of turns where judge and annotation disagree",
        description="Rank the (turn, slot) pairs where the gold annotation (--gold) is most "
        "likely wrong, from the evidence of one or more judge runs or plain predictions files "
        "(these need --dialogues and give exact-match evidence only; no model is called). "
        "--candidates writes the ranking; --out writes one self-contained HTML page with the "
        "judge/RULE disagreements of the first judge run (grouped by slot and kind, with "
        "sorting, filtering and export of annotators' decisions) and the same ranking.")
    p.add_argument("inputs", nargs="+", metavar="RUN_OR_PREDICTIONS",
                   help="judge run directories and/or predictions files")
    p.add_argument("--out", metavar="HTML", help="write the audit page")
    p.add_argument("--candidates", metavar="FILE",
                   help="write the ranked candidates: CSV if FILE ends in .csv, else JSON Lines; "
                   "each with its id, the dialogue up to its turn (context) and empty decision, "
                   "value and note columns to fill in for 'dst-judge corrections "
                   "from-candidates'")
    p.add_argument("--gold", metavar="VERSION",
                   help="annotation version audited (default: the dialogues file's first); "
                   "other versions are shown beside, never used as evidence")
    add_corrections_option(p, decided=True)
    p.add_argument("--order", choices=["review", "evidence"], default="review",
                   help="review (default): the order that moves JGA furthest per review, a "
                   "turn's candidates together (more wrong turns fixed early, fewer real "
                   "errors at the top); evidence: by evidence score alone, the most likely "
                   "errors first (see docs/audit.md)")
    p.add_argument("--dialogues", metavar="FILE",
                   help="dialogues file (default: the one the first judge run recorded)")
    p.add_argument("--schema", metavar="FILE",
                   help="schema, for value-set evidence (default: the one the first judge run "
                   "recorded; without one that evidence is left out)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from pathlib import Path

    from ..analysis import load_audit_inputs, open_candidates, write_audit
    from ..data import decided_slots

    if not (args.out or args.candidates):
        raise OptionError("say what to write: --candidates FILE, --out HTML, or both")
    runs = [p for p in args.inputs if Path(p).is_dir()]
    streamed = _streamed(args) if not runs else None
    if streamed is not None:
        candidates, dialogues = streamed
        _write(args, console, candidates, dialogues, runs)
        return 0
    try:
        inputs = load_audit_inputs(args.inputs, dialogues=args.dialogues, schema=args.schema)
    except OptionError as exc:
        if args.candidates or args.dialogues or len(runs) < len(args.inputs):
            raise
        # the page of a run needs no dialogues file; only its ranking does
        console.print(f"the page leaves out the ranked candidates: {exc}", markup=False,
                      style="yellow")
        items = write_audit(runs[0], args.out)
        console.print(f"wrote {args.out} ({items} judge/RULE items)", markup=False)
        return 0
    dialogues, gold, corrected = corrected_gold(inputs.dialogues, inputs.schema,
                                                args.corrections, args.gold)
    decided = decided_slots(inputs.dialogues, corrected.base, read_all(args.corrections),
                            schema=inputs.schema) if corrected is not None else set()
    candidates, dropped = open_candidates(dialogues, inputs.sources, gold=gold or
                                          dialogues.resolve_version(None),
                                          schema=inputs.schema, decided=decided,
                                          order=args.order)
    if corrected is not None:
        console.print(f"left out {plural(dropped, 'candidate')} the corrections already "
                      "decide (accepted, edited or rejected)", markup=False, soft_wrap=True)
    _write(args, console, candidates, dialogues, runs)
    return 0


def _streamed(args: argparse.Namespace) -> tuple[list[Any], Any] | None:
    """The candidates of predictions files read in step with the dialogues
    (:func:`judge.analysis.stream_candidates`: a test set of any size in bounded memory), or
    None when the files must be loaded whole (corrections, a converted format, another
    order), where every problem gets its full message."""
    from ..analysis import stream_candidates
    from ..data import NotInStep, load_schema

    if not args.dialogues or args.corrections:
        return None
    schema = load_schema(args.schema) if args.schema else None
    try:
        return stream_candidates(args.dialogues, args.inputs, schema=schema, gold=args.gold,
                                 order=args.order)
    except NotInStep:
        return None


def _write(args: argparse.Namespace, console: Console, candidates: Any, dialogues: Any,
           runs: list[str]) -> None:
    """Write the candidates file and the audit page the options ask for."""
    from ..analysis import write_audit, write_candidates

    if args.candidates:
        count = write_candidates(candidates, args.candidates, dialogues)
        console.print(f"wrote {args.candidates} ({count} candidates, ranked)", markup=False)
    if args.out:
        items = write_audit(runs[0] if runs else None, args.out, candidates=candidates,
                            order=args.order)
        what = f"{items} judge/RULE items, " if runs else ""
        console.print(f"wrote {args.out} ({what}{len(candidates)} ranked candidates)",
                      markup=False)
