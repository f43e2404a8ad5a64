"""Tables a paper needs, in plain rows that render as text, CSV or LaTeX.

One run scores every system against every annotation version asked for (MultiWOZ 2.1 and 2.4
side by side), under the exact-match suite and any scoring profiles: the main table (JGA,
final-turn JGA, slot accuracy and F1, per-domain JGA, each profile's headline figures) and the
per-slot table (accuracy, precision, recall, F1 per slot).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data import DialogueSet, PredictionSet, Schema
from ._options import MetricOptions
from ._profiles import get_profile, score_profile
from ._suite import compute_metrics

_NAMES = {"jga": "JGA", "final_turn_jga": "final JGA", "slot_accuracy": "slot acc.",
          "aga": "AGA", "slot_precision": "slot P", "slot_recall": "slot R",
          "slot_f1": "slot F1", "turn_f1": "turn F1"}


@dataclass
class PaperTables:
    """The main table and the per-slot table, as column names plus rows of cells."""

    columns: list[str]
    rows: list[list[Any]]
    slot_columns: list[str] = field(default_factory=list)
    slot_rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def paper_tables(dialogues: DialogueSet, systems: Sequence[PredictionSet], schema: Schema,
                 *, versions: Sequence[str] | None = None, profiles: Sequence[str] = (),
                 options: MetricOptions | None = None) -> PaperTables:
    """Score every system against every version (default: all in the file)."""
    options = options or MetricOptions()
    wanted = [dialogues.resolve_version(v) for v in versions] if versions else list(
        dialogues.versions)
    domains = list(schema.domain_names)
    columns = ["system", "gold", "JGA", "final JGA", "slot acc.", "slot F1",
               *[f"JGA {d}" for d in domains]]
    chosen = [get_profile(p) for p in profiles]
    for profile in chosen:
        columns += [f"{profile.name} {_NAMES[h]}" for h in profile.headline]
    rows: list[list[Any]] = []
    slot_rows: list[list[Any]] = []
    for version in wanted:
        report = compute_metrics(dialogues, list(systems), schema, options, gold=version)
        for system, result in zip(systems, report.systems, strict=True):
            m = result.metrics
            per_domain = result.per_domain or {}
            row = [system.name, version, m["jga"], m["final_turn_jga"], m["sa"], m["slot_f1"],
                   *[per_domain.get(d, {}).get("jga") for d in domains]]
            for profile in chosen:
                figures = score_profile(dialogues, system, schema, profile,
                                        gold=version)["figures"]
                row += [figures[h] for h in profile.headline]
            rows.append(row)
            for slot, stats in (result.per_slot or {}).items():
                slot_rows.append([system.name, version, slot, stats["accuracy"],
                                  stats["precision"], stats["recall"], stats["f1"],
                                  stats["gold_turns"], stats["pred_turns"]])
    notes = [f"exact-match columns: match={report.options['match']}"]
    notes += [f"{p.name}: {p.title} ({p.reference})" for p in chosen]
    return PaperTables(columns, rows,
                       ["system", "gold", "slot", "accuracy", "precision", "recall", "F1",
                        "gold turns", "pred turns"], slot_rows, notes)


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def to_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 2) -> str:
    """CSV with a header row; numbers rounded to ``digits``, undefined cells empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _cell(v, digits) for v in row])
    return out.getvalue()


_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
                  "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "\\": r"\textbackslash{}"}


def _tex(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(columns: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1,
             caption: str = "") -> str:
    """A booktabs ``tabular`` (numbers right-aligned, text escaped), ready to ``\\input``."""
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and rows
               for i in range(len(columns))]
    spec = "".join("r" if n else "l" for n in numeric)
    lines = [r"\begin{tabular}{" + spec + "}", r"\toprule",
             " & ".join(_tex(c) for c in columns) + r" \\", r"\midrule"]
    for row in rows:
        lines.append(" & ".join(_tex(_cell(v, digits)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.insert(0, "% " + caption)
    return "\n".join(lines) + "\n"
