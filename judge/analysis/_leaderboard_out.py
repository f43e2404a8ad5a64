"""A leaderboard's outputs beside its JSON: CSV (long, one row per figure), Markdown and
LaTeX tables for a paper (intervals and marks explained in a caption line), a forest plot,
and one row per (system, dialogue, turn) as JSON Lines or Parquet for pandas, Polars or
DuckDB."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import OptionError
from .._io import open_output, plain_suffix
from ._leaderboard import METRIC_LABELS, Figure, Leaderboard
from ._leaderboard_systems import Layout, SystemTurns


def metric_label(key: str) -> str:
    """``jga@2.4`` → ``JGA 2.4``."""
    metric, _, version = key.partition("@")
    return METRIC_LABELS.get(metric, metric) + (f" {version}" if version else "")


def figure_text(figure: Figure | None, digits: int = 2) -> str:
    """``48.12 ± 1.21`` (the intervals are symmetric: t times the clustered SE)."""
    if figure is None or figure.value is None:
        return "–"
    if figure.low is None or figure.high is None:
        return f"{figure.value:.{digits}f}"
    return f"{figure.value:.{digits}f} ± {(figure.high - figure.low) / 2:.{digits}f}"


def caption(board: Leaderboard) -> str:
    """One line saying what the intervals and marks mean."""
    m = board.method
    level = round(100 * m["confidence"], 1)
    correction = {"holm": "Holm", "by": "Benjamini-Yekutieli"}[m["correction"]]
    return (f"Values in percent ± half-width of {level:g}% intervals clustered by dialogue "
            f"(CR1 cluster-robust variance, t with {m['dialogues'] - 1} df; GCA by cluster "
            f"jackknife) over {m['dialogues']} dialogues, {m['turns']} turns. Rank: interval "
            f"from paired {metric_label(board.rank_metric)} tests clustered by dialogue, "
            f"{correction}-corrected across all pairs at alpha = {m['alpha']:g}; systems "
            "sharing a letter are not significantly different.")


def _table_rows(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    columns = ["rank", "system", *[metric_label(k) for k in board.metrics]]
    rows = []
    for system in board.systems:
        low, high = system.rank_ci
        rank = f"{system.rank} ({low}–{high})" if low != high else str(system.rank)
        rows.append([rank, f"{system.name} ({system.group})",
                     *[figure_text(system.metrics.get(k)) for k in board.metrics]])
    return columns, rows


def _pair_rows(board: Leaderboard) -> list[list[str]]:
    rows = []
    for pair in board.pairs:
        if pair.metric != board.rank_metric:
            continue
        verdict = f"{pair.a} > {pair.b}" if pair.significant else "not told apart"
        rows.append([f"{pair.a} − {pair.b}", figure_text(pair.difference),
                     _p(pair.p), _p(pair.p_adjusted), verdict])
    return rows


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def leaderboard_markdown(board: Leaderboard) -> str:
    """The systems table and the pairwise differences of the rank metric, as Markdown."""
    columns, rows = _table_rows(board)
    lines = ["| " + " | ".join(columns) + " |",
             "| " + " | ".join("---" if c in ("rank", "system") else "---:" for c in columns)
             + " |"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    lines += ["", f"*{caption(board)}*", ""]
    pair_columns = ["pair", f"difference ({metric_label(board.rank_metric)})", "p",
                    f"p ({board.method['correction']})", "verdict"]
    lines += ["| " + " | ".join(pair_columns) + " |",
              "| --- | ---: | ---: | ---: | --- |"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in _pair_rows(board)]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
                  "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "\\": r"\textbackslash{}"}


def _tex(text: str) -> str:
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    return out.replace("±", r"$\pm$").replace("–", "--").replace("−", "$-$")


def leaderboard_latex(board: Leaderboard) -> str:
    """A booktabs table: one row per system, ``value $\\pm$ half-width`` per metric, the rank
    interval and the group letters, with the caption line."""
    columns, rows = _table_rows(board)
    spec = "ll" + "r" * (len(columns) - 2)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}",
             r"\toprule", " & ".join(_tex(c) for c in columns) + r" \\", r"\midrule"]
    lines += [" & ".join(_tex(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{_tex(caption(board))}}}",
              r"\end{table}"]
    return "\n".join(lines) + "\n"


def leaderboard_csv(board: Leaderboard) -> str:
    """Long format, one row per figure: systems, pairs and breakdowns, values in points."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["kind", "system", "other", "metric", "group", "value", "ci_low",
                     "ci_high", "se", "p", "p_adjusted", "significant", "rank", "rank_low",
                     "rank_high"])

    def num(value: float | None) -> str:
        return "" if value is None else repr(round(value, 10))

    for s in board.systems:
        for key, f in s.metrics.items():
            writer.writerow(["system", s.name, "", key, s.group, num(f.value), num(f.low),
                             num(f.high), num(f.se), "", "", "", s.rank, s.rank_ci[0],
                             s.rank_ci[1]])
    for p in board.pairs:
        d = p.difference
        writer.writerow(["pair", p.a, p.b, p.metric, "", num(d.value), num(d.low),
                         num(d.high), num(d.se), num(p.p), num(p.p_adjusted),
                         str(p.significant).lower(), "", "", ""])
    for b in board.breakdowns:
        for name, f in b.figures.items():
            writer.writerow([f"breakdown:{b.dimension}", name, "", b.metric, b.group,
                             num(f.value), num(f.low), num(f.high), num(f.se), "", "", "", "",
                             "", ""])
    return buffer.getvalue()


def forest_figure(board: Leaderboard, metrics: Sequence[str] | None = None) -> Any:
    """One panel per metric: each system's value and interval, best on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(metrics or board.metrics)
    names = [s.name for s in board.systems]
    cols = min(4, len(keys))
    lines = -(-len(keys) // cols)
    height = max(2.0, 0.35 * len(names) + 1.2)
    figure, axes = plt.subplots(lines, cols, figsize=(2.8 * cols + 1.5, height * lines),
                                sharey=True, squeeze=False)
    y = np.arange(len(names))[::-1]
    for axis in axes.flat[len(keys):]:
        axis.set_visible(False)
    for axis, key in zip(axes.flat, keys, strict=False):
        values = [s.metrics[key].value if key in s.metrics else np.nan for s in board.systems]
        lows = [s.metrics[key].low if key in s.metrics else np.nan for s in board.systems]
        highs = [s.metrics[key].high if key in s.metrics else np.nan for s in board.systems]
        v = np.array(values, dtype=float)
        err = np.array([v - np.array(lows, dtype=float), np.array(highs, dtype=float) - v])
        axis.errorbar(v, y, xerr=err, fmt="o", capsize=3, color="#1f4e79")
        axis.set_title(metric_label(key), fontsize=9)
        axis.grid(axis="x", alpha=0.3)
        axis.tick_params(labelsize=8)
    labels = [f"{n} ({s.group})" for n, s in zip(names, board.systems, strict=True)]
    for row in axes:
        row[0].set_yticks(y, labels)
    level = round(100 * board.method["confidence"], 1)
    figure.suptitle(f"{level:g}% intervals clustered by dialogue", fontsize=9)
    figure.tight_layout()
    return figure


def plot_leaderboard(board: Leaderboard, path: str | Path) -> Path:
    """Write the forest plot as PNG or SVG (by the file's suffix)."""
    import matplotlib.pyplot as plt

    fmt = "svg" if plain_suffix(path) == ".svg" else "png"
    figure = forest_figure(board)
    try:
        with open_output(path, "wb") as handle:
            figure.savefig(handle, dpi=120, format=fmt)
    finally:
        plt.close(figure)
    return Path(path)


def turn_columns(layout: Layout, system: SystemTurns) -> dict[str, np.ndarray]:
    """Every verdict of one system, one entry per turn (the columns of :func:`write_turns`)."""
    columns: dict[str, np.ndarray] = {}
    many = len(layout.versions) > 1
    for version, verdicts in system.golds.items():
        tail = f"@{version}" if many else ""
        columns[f"jga{tail}"] = verdicts.jga
        columns[f"sa{tail}"] = verdicts.sa
        columns[f"fga{tail}"] = verdicts.fga
        for k, name in enumerate("cwom"):
            columns[f"gca_{name}{tail}"] = verdicts.changes[:, k]
    for name, column in (("tsa", system.tsa), ("judge_jga", system.judge_jga)):
        if column is not None:
            columns[name] = column
    return columns


def _turn_records(layout: Layout, system: SystemTurns,
                  judged: bool) -> Iterator[dict[str, Any]]:
    columns = turn_columns(layout, system)
    lists = {k: v.tolist() for k, v in columns.items()}
    position = layout.position.tolist()
    cluster = layout.cluster.tolist()
    for row in range(layout.num_turns):
        record: dict[str, Any] = {"system": system.name,
                                  "dialogue_id": layout.dialogue_ids[cluster[row]],
                                  "turn_index": position[row]}
        for name, values in lists.items():
            value = values[row]
            if name in ("tsa", "judge_jga"):
                value = None if value < 0 else bool(value)
            record[name] = value
        if judged:  # every row has the judge's columns when some system is a run
            record.setdefault("tsa", None)
            record.setdefault("judge_jga", None)
        yield record


def write_turns(path: str | Path, layout: Layout, systems: Sequence[SystemTurns]) -> int:
    """One row per (system, dialogue, turn) with every verdict: ``.jsonl`` or ``.parquet``
    (pyarrow, the ``parquet`` extra), written one system at a time. Returns the rows."""
    suffix = plain_suffix(path)
    if suffix == ".parquet" and not str(path).lower().endswith(".gz"):
        return _write_parquet(path, layout, systems)
    if suffix != ".jsonl":
        raise OptionError("--turns writes .jsonl (gzipped as .jsonl.gz) or .parquet (compressed "
                          f"by itself), not {Path(path).name!r}")
    rows = 0
    judged = any(s.kind == "run" for s in systems)
    with open_output(path) as handle:
        for system in systems:
            for record in _turn_records(layout, system, judged):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                rows += 1
    return rows


def _write_parquet(path: str | Path, layout: Layout, systems: Sequence[SystemTurns]) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise OptionError("writing .parquet needs pyarrow: pip install 'dst-judge[parquet]' "
                          "(or write --turns FILE.jsonl)") from None
    judged = any(s.kind == "run" for s in systems)
    dialogue_ids = pa.array(layout.dialogue_ids)
    ids = pa.DictionaryArray.from_arrays(pa.array(layout.cluster), dialogue_ids)
    rows = 0
    with open_output(path, "wb") as handle:
        writer = None
        try:
            for system in systems:
                columns = turn_columns(layout, system)
                arrays: dict[str, Any] = {
                    "system": pa.DictionaryArray.from_arrays(
                        pa.array(np.zeros(layout.num_turns, np.int32)), pa.array([system.name])),
                    "dialogue_id": ids, "turn_index": pa.array(layout.position)}
                for key, values in columns.items():
                    if key in ("tsa", "judge_jga"):
                        arrays[key] = pa.array(values == 1, mask=values < 0)
                    else:
                        arrays[key] = pa.array(values)
                if judged:
                    for key in ("tsa", "judge_jga"):
                        arrays.setdefault(key, pa.nulls(layout.num_turns, pa.bool_()))
                table = pa.table(arrays)  # the same columns in the same order for all
                if writer is None:
                    writer = pq.ParquetWriter(handle, table.schema)
                writer.write_table(table)
                rows += table.num_rows
        finally:
            if writer is not None:
                writer.close()
    return rows
