"""Tables a paper needs, in plain rows that render as text, CSV or LaTeX.

One run scores every system against every annotation version asked for (MultiWOZ 2.1 and 2.4
side by side), under the exact-match suite and any scoring profiles: the main table (JGA,
final-turn JGA, slot accuracy and F1, per-domain JGA, each profile's headline figures) and the
per-slot table (accuracy, precision, recall, F1 per slot).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data import DialogueSet, InStep, PredictionSet, Schema
from ._options import MetricOptions
from ._profiles import Profile, get_profile, score_profile
from ._suite import MetricsReport, compute_metrics, stream_metrics

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
    change_columns: list[str] = field(default_factory=list)
    change_rows: list[list[Any]] = field(default_factory=list)
    """Each system on a version and on its corrected version: the figures, the change, and a
    paired interval of the JGA change clustered by dialogue (empty without corrections)."""


CHANGE_COLUMNS = ["system", "gold", "corrected", "JGA", "JGA corr.", "Δ JGA", "Δ low",
                  "Δ high", "slot acc.", "slot acc. corr.", "Δ slot acc.", "turns changed"]


def paired_change(before: Sequence[float], after: Sequence[float], turns: Sequence[int], *,
                  confidence: float = 0.95) -> tuple[float, float, float]:
    """A turn-weighted mean change with its interval, clustered by dialogue: each dialogue's
    ``turns × (after − before)`` is one cluster total (a ratio estimator with the
    cluster-robust variance and a t quantile on clusters − 1 degrees of freedom). numpy and
    scipy are imported here: the metrics need neither otherwise, and ``dst-judge --help``
    imports this package."""
    import numpy as np
    from scipy.stats import t as student_t

    weights = np.asarray(turns, dtype=float)
    diffs = weights * (np.asarray(after, dtype=float) - np.asarray(before, dtype=float))
    total = weights.sum()
    change = float(diffs.sum() / total)
    clusters = len(weights)
    if clusters < 2:
        return change, float("nan"), float("nan")
    residual = diffs - change * weights
    se = math.sqrt(clusters / (clusters - 1) * float((residual ** 2).sum())) / total

    half = float(student_t.ppf(0.5 + confidence / 2, clusters - 1)) * se
    return change, change - half, change + half


def _change_rows(dialogues: DialogueSet, systems: Sequence[PredictionSet], schema: Schema,
                 options: MetricOptions, corrected: Sequence[tuple[str, str]]
                 ) -> list[list[Any]]:
    per = options.model_copy(update={"per_dialogue": True, "breakdowns": False})
    rows: list[list[Any]] = []
    for base, name in corrected:
        before = compute_metrics(dialogues, list(systems), schema, per, gold=base)
        after = compute_metrics(dialogues, list(systems), schema, per, gold=name)
        changed = sum(turn.gold_states.get(base) != turn.gold_states.get(name)
                      for d in dialogues.dialogues for turn in d.turns)
        for system, b, a in zip(systems, before.systems, after.systems, strict=True):
            was, now = b.per_dialogue or {}, a.per_dialogue or {}
            turns = [was[i]["turns"] for i in was]
            jga_b = [was[i]["jga"] or 0.0 for i in was]
            jga_a = [now[i]["jga"] or 0.0 for i in was]
            delta, low, high = paired_change(jga_b, jga_a, turns)
            sa_b, sa_a = b.metrics["sa"], a.metrics["sa"]
            rows.append([system.name, base, name, b.metrics["jga"], a.metrics["jga"], delta,
                         low, high, sa_b, sa_a,
                         None if sa_b is None or sa_a is None else sa_a - sa_b, changed])
    return rows


def paper_tables(dialogues: DialogueSet, systems: Sequence[PredictionSet], schema: Schema,
                 *, versions: Sequence[str] | None = None, profiles: Sequence[str] = (),
                 options: MetricOptions | None = None,
                 corrected: Sequence[tuple[str, str]] = ()) -> PaperTables:
    """Score every system against every version (default: all in the file); with
    ``corrected`` (pairs of a version and its corrected version), also the change table."""
    options = options or MetricOptions()
    wanted = [dialogues.resolve_version(v) for v in versions] if versions else list(
        dialogues.versions)
    chosen = [get_profile(p) for p in profiles]
    reports = []
    for version in wanted:
        report = compute_metrics(dialogues, list(systems), schema, options, gold=version)
        for system, result in zip(systems, report.systems, strict=True):
            result.name = system.name  # the caller's column names
            result.profiles = [score_profile(dialogues, system, schema, profile,
                                             gold=version)["figures"] for profile in chosen]
        reports.append((version, report))
    return _tables(reports, schema, chosen,
                   _change_rows(dialogues, systems, schema, options, corrected))


def stream_paper_tables(dialogues_path: str | Path, paths: Sequence[str | Path],
                        schema: Schema, *, versions: Sequence[str] | None = None,
                        options: MetricOptions | None = None
                        ) -> tuple[PaperTables, InStep]:
    """:func:`paper_tables` without profiles or corrections, reading the files in step once
    per version (:func:`stream_metrics`): the same rows in bounded memory. Raises
    :class:`judge.data.NotInStep` when the files cannot be read in step. Systems sharing a
    name are named by their paths. Returns the first pass's reader too (its scans' notes)."""
    options = options or MetricOptions()
    first, files = stream_metrics(dialogues_path, paths, schema, options,
                                  gold=versions[0] if versions else None)
    probe = DialogueSet(str(dialogues_path), [], tuple(first.data["versions"]), {})
    wanted = ([probe.resolve_version(v) for v in versions] if versions
              else list(probe.versions))
    reports = [(wanted[0], first)]
    for version in wanted[1:]:
        reports.append((version, stream_metrics(dialogues_path, paths, schema, options,
                                                gold=version)[0]))
    names = [scan.name for scan in files.scans]
    for _, report in reports:
        for system, scan in zip(report.systems, files.scans, strict=True):
            system.name = scan.path if names.count(scan.name) > 1 else scan.name
    return _tables(reports, schema, [], []), files


def _tables(reports: Sequence[tuple[str, MetricsReport]], schema: Schema,
            chosen: Sequence[Profile], change_rows: list[list[Any]]) -> PaperTables:
    """The rows of every version's report (systems by their ``name``)."""
    domains = list(schema.domain_names)
    columns = ["system", "gold", "JGA", "final JGA", "slot acc.", "slot F1",
               *[f"JGA {d}" for d in domains]]
    for profile in chosen:
        columns += [f"{profile.name} {_NAMES[h]}" for h in profile.headline]
    rows: list[list[Any]] = []
    slot_rows: list[list[Any]] = []
    for version, report in reports:
        for result in report.systems:
            m = result.metrics
            per_domain = result.per_domain or {}
            row = [result.name, version, m["jga"], m["final_turn_jga"], m["sa"], m["slot_f1"],
                   *[per_domain.get(d, {}).get("jga") for d in domains]]
            for profile, figures in zip(chosen, result.profiles, strict=True):
                row += [figures[h] for h in profile.headline]
            rows.append(row)
            for slot, stats in (result.per_slot or {}).items():
                slot_rows.append([result.name, version, slot, stats["accuracy"],
                                  stats["precision"], stats["recall"], stats["f1"],
                                  stats["gold_turns"], stats["pred_turns"]])
    notes = [f"exact-match columns: match={reports[-1][1].options['match']}"]
    notes += [f"{p.name}: {p.title} ({p.reference})" for p in chosen]
    if change_rows:
        notes.append("Δ: corrected minus original, with a 95 % interval clustered by dialogue")
    return PaperTables(columns, rows,
                       ["system", "gold", "slot", "accuracy", "precision", "recall", "F1",
                        "gold turns", "pred turns"], slot_rows, notes,
                       list(CHANGE_COLUMNS) if change_rows else [], change_rows)


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
