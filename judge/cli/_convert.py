"""``dst-judge convert`` and the one-line notes every data-reading command prints when it
converted a file on the fly or renamed slots to the schema's names."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._io import printable
from .._names import FORMAT_NAMES, KINDS
from ._report import say

if TYPE_CHECKING:
    from ..data import DialogueSet, PredictionSet, Schema

_TITLES = {"native": "native", "native-schema": "native"}


def announce(*loaded: Any, label: str = "") -> None:
    """One stderr line per input read from a foreign format, and one per input whose slot
    names were renamed to the schema's (with the most frequent renamings)."""
    from ..data import get_format
    for item in loaded:
        fmt = getattr(item, "source_format", "native")
        path = getattr(item, "path", None) or label
        if fmt not in _TITLES:
            print(f"dst-judge: read {path} as {get_format(fmt).title}, converted on the fly "
                  "('dst-judge convert' writes a native file)", file=sys.stderr)
        renamed = getattr(item, "renamed", None)
        if renamed:
            shown = ", ".join(f"{k} ×{n}" for k, n in renamed.most_common(3))
            more = f", +{len(renamed) - 3} more" if len(renamed) > 3 else ""
            print(f"dst-judge: {path}: {sum(renamed.values())} slot names renamed to the "
                  f"schema's ({shown}{more})", file=sys.stderr)


def load_schema_noted(path: str) -> Schema:
    from ..data import load_schema
    schema = load_schema(path)
    if schema.source_format != "native-schema":
        announce(schema, label=path)
    return schema


def load_dialogues_noted(path: str, schema: Schema | None) -> DialogueSet:
    from ..data import load_dialogues
    dialogues = load_dialogues(path, schema=schema)
    announce(dialogues)
    return dialogues


def load_predictions_noted(path: str, dialogues: DialogueSet, schema: Schema | None, *,
                           warn_slots: bool = True) -> PredictionSet:
    """Predictions read with the notes of :func:`announce` and, with ``warn_slots``, a warning
    naming the predicted slot names outside the schema (``metrics`` words it in its report)."""
    from ..data import load_predictions, out_of_schema_slots
    predictions = load_predictions(path, dialogues, schema)
    announce(predictions)
    if warn_slots and schema is not None:
        warn_out_of_schema(predictions.path, out_of_schema_slots(predictions.out_of_schema,
                                                                 schema))
    return predictions


def warn_out_of_schema(path: str, slots: list[Any]) -> None:
    """One stderr warning about the slot names of ``path`` the schema does not have."""
    from ..data import describe_out_of_schema
    sentence = describe_out_of_schema(slots)
    if sentence:
        print(printable(f"dst-judge: warning: {path}: {sentence}"), file=sys.stderr)


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "convert", help="write a native file from any known format (MultiWOZ, SGD, ConvLab-3, "
        "mwzeval, TRADE, SOM-DST, TripPy, per-turn JSON Lines)",
        description="Read dialogues, predictions or a schema in any known format and write "
        "the native file (or, with --to, another known format). Every other command converts "
        "on the fly; converting once saves doing it on every run. Several dialogues files of "
        "one data set (e.g. MultiWOZ 2.1 and 2.4 data.json) merge into one file with every "
        "annotation version.")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="file(s) or folder to read")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write")
    p.add_argument("--kind", choices=KINDS, help="what the input holds (default: detected)")
    p.add_argument("--from", dest="fmt", choices=FORMAT_NAMES,
                   help="input format (default: detected)")
    p.add_argument("--to", default="native", choices=FORMAT_NAMES,
                   help="output format (default: native)")
    p.add_argument("--schema", metavar="S", help="schema: slot names are written as its names")
    p.add_argument("--version", nargs="+", default=[], metavar="V",
                   help="annotation version label of each dialogues input (e.g. 2.1 2.4); "
                   "default: from the path (MultiWOZ_2.4) or 'gold'")
    p.add_argument("--dialogues", metavar="D",
                   help="dialogues the predictions belong to (checks them; needed for "
                   "ConvLab-3 samples, which name no dialogue; gives dump formats their gold)")
    p.add_argument("--ids", metavar="FILE", help="keep only these dialogue ids (one per line, "
                   "e.g. MultiWOZ's testListFile.json)")
    p.add_argument("--system-name", help="system name written into converted predictions")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from ..data import convert, write_conversion
    schema = load_schema_noted(args.schema) if args.schema else None
    dialogues = load_dialogues_noted(args.dialogues, schema) if args.dialogues else None
    result = convert(args.inputs, args.kind, to=args.to, fmt=args.fmt, schema=schema,
                     versions=args.version, dialogues=dialogues, ids=args.ids,
                     system_name=args.system_name)
    write_conversion(result, args.out)
    source = ", ".join(sorted(set(result.formats)))
    unit = "slots" if result.kind == "schema" else "dialogues"
    say(console, f"wrote {args.out}: {result.count} {unit} ({result.kind}, {source} → "
                 f"{result.target.name})")
    if result.renamed:
        total = sum(result.renamed.values())
        say(console, f"renamed {total} slot names to the schema's: " + ", ".join(
            f"{k} ×{n}" for k, n in sorted(result.renamed.items(), key=lambda kv: -kv[1])[:5]))
    return 0
