"""Converting whole input files (``dst-judge convert``): any known format in, native (or
another known format) out.

Loading converts on the fly already; writing the native files once saves converting again on
every run and gives files the other tools (``validate``, the audit page) read as they are.
Several gold files of one data set (MultiWOZ 2.1 and 2.4 ``data.json``) merge into one
dialogues file carrying both annotation versions, so one run scores against both.

The layers: ``_convert/`` holds the formats (detection, a reader and a writer per format, one
record at a time) and knows no loader; the loaders (``_reading``, ``_load_dialogues``,
``_load_predictions``) read foreign files through it; this module sits above both, since a file
is converted by loading it (checked, slot names made the schema's, gold versions merged) and
writing it with a format's writer. Inside ``_convert/`` it would close an import circle through
the loaders, and a lazy import would not open it (``tests/test_layers.py`` counts imports
inside functions too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DataMismatchError, OptionError
from ._convert import (
    NATIVE,
    Context,
    Format,
    Kind,
    detect_kind,
    get_format,
    write_format,
)
from ._dialogues import DialogueSet, PredDialogue, dialogue_key
from ._load_dialogues import load_dialogues
from ._load_predictions import _canonical_turns, _complete_turns, load_predictions
from ._reading import _records, load_schema, read_id_list
from ._schema import Schema


@dataclass
class Conversion:
    """What a conversion read and produced."""

    kind: Kind
    formats: list[str]
    """The format of each input."""
    value: Any
    """The output: native records (a list) or the target format's JSON value."""
    target: Format
    count: int
    renamed: dict[str, int] = field(default_factory=dict)


def _dialogue_sets(inputs: Sequence[str | Path], schema: Schema | None,
                   versions: Sequence[str | None], fmt: str | None) -> list[DialogueSet]:
    if len(versions) not in (0, 1, len(inputs)):
        raise OptionError(f"--version gives {len(versions)} labels for {len(inputs)} inputs")
    labels = list(versions) if len(versions) == len(inputs) else [
        versions[0] if versions else None] * len(inputs)
    return [load_dialogues(path, schema=schema, version=label, fmt=fmt)
            for path, label in zip(inputs, labels, strict=True)]


def merge_gold(sets: Sequence[DialogueSet]) -> list[dict[str, Any]]:
    """One record per dialogue of the first set, with the gold states of every set (turn by
    turn; the dialogues and turn counts must agree)."""
    first = sets[0]
    records = [d.to_record() for d in first.dialogues]
    for other in sets[1:]:
        clash = set(other.versions) & set(first.versions)
        if clash:
            raise OptionError(f"{other.path} and {first.path} both carry version(s) "
                              f"{', '.join(sorted(clash))}; label them with --version")
        for record, dialogue in zip(records, first.dialogues, strict=True):
            match = other.get(dialogue.dialogue_id)
            if match is None:
                raise DataMismatchError(f"dialogue {dialogue.dialogue_id!r} is missing",
                                        path=other.path)
            if len(match.turns) != len(dialogue.turns):
                raise DataMismatchError(
                    f"dialogue {dialogue.dialogue_id!r} has {len(match.turns)} turns here but "
                    f"{len(dialogue.turns)} in {first.path}", path=other.path)
            for turn, extra in zip(record["turns"], match.to_record()["turns"], strict=True):
                turn.update({k: v for k, v in extra.items() if k.startswith("gold_")})
    return records


def _prediction_records(path: str | Path, schema: Schema | None,
                        dialogues: DialogueSet | None, fmt: str | None,
                        name: str | None) -> tuple[str, list[PredDialogue], dict[str, int]]:
    if dialogues is not None:
        loaded = load_predictions(path, dialogues, schema, name=name, fmt=fmt)
        ordered = [loaded.for_dialogue(d) for d in dialogues.dialogues]
        return loaded.source_format, ordered, dict(loaded.renamed)
    from collections import Counter

    renamed: Counter[str] = Counter()
    source_format, records = _records(PredDialogue, path, "predictions",
                                      Context(schema=schema, system_name=name), fmt)
    out = []
    for loc, pred in records:
        _complete_turns(pred, loc)
        if schema is not None:
            _canonical_turns(pred, schema, renamed)
        out.append(pred)
    return source_format, out, dict(renamed)


def convert(inputs: Sequence[str | Path], kind: Kind | None = None, *,
            to: str = NATIVE, fmt: str | None = None, schema: Schema | None = None,
            versions: Sequence[str | None] = (), dialogues: DialogueSet | None = None,
            ids: str | Path | None = None, system_name: str | None = None) -> Conversion:
    """Read ``inputs`` (all of one ``kind``; detected when not given) and build the output.

    ``versions`` labels the gold of each dialogues input (or all of them); several dialogues
    inputs merge into one file with every version. ``dialogues`` (already loaded) checks
    predictions against them and gives the gold side of dump formats that hold both.
    ``ids`` keeps only the dialogues listed (one id per line, e.g. ``testListFile.json``).
    """
    if not inputs:
        raise OptionError("convert needs at least one input file")
    kind = kind or detect_kind(inputs[0])
    target = get_format("native-schema" if kind == "schema" and to == NATIVE else to)
    if kind not in target.writers:
        raise OptionError(f"format {target.name} cannot hold {kind}")
    if kind != "dialogues" and len(inputs) > 1:
        raise OptionError(f"one {kind} input at a time (several inputs merge gold versions)")
    keep = {dialogue_key(i) for i in read_id_list(ids)} if ids else None
    context = Context(schema=schema)
    renamed: dict[str, int] = {}
    gold_records = [d.to_record() for d in dialogues.dialogues] if dialogues else None
    if kind == "schema":
        loaded = load_schema(inputs[0], fmt=fmt)
        record = loaded.model_dump(mode="json", exclude_none=True)
        formats = [loaded.source_format]
        value = target.writers["schema"](record, context)
        count = len(loaded.slot_names)
    elif kind == "dialogues":
        sets = _dialogue_sets(inputs, schema, versions, fmt)
        if keep is not None:
            sets = [s.subset([d.dialogue_id for d in s.dialogues
                              if dialogue_key(d.dialogue_id) in keep]) for s in sets]
        formats = [s.source_format for s in sets]
        for s in sets:
            for key, n in s.renamed.items():
                renamed[key] = renamed.get(key, 0) + n
        records = merge_gold(sets)
        value = target.writers["dialogues"](records, context)
        count = len(records)
    else:
        source_format, preds, renamed = _prediction_records(inputs[0], schema, dialogues,
                                                            fmt, system_name)
        records = [p.to_record() for p in preds
                   if keep is None or dialogue_key(p.dialogue_id) in keep]
        formats = [source_format]
        value = target.writers["predictions"](records, context, gold=gold_records)
        count = len(records)
    return Conversion(kind, formats, value, target, count, renamed)


def write_conversion(conversion: Conversion, out: str | Path) -> None:
    """Write a conversion's output (JSON Lines for native dialogues and predictions)."""
    write_format(conversion.value, conversion.target, out)


__all__ = ["Conversion", "convert", "merge_gold", "write_conversion"]
