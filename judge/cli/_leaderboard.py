"""``dst-judge leaderboard``: many systems (predictions files and judge runs, mixed) with
intervals clustered by dialogue, corrected pairwise tests, rank intervals and breakdowns, as a
terminal table, JSON, CSV, Markdown, LaTeX, a forest plot and one row per turn."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from .._errors import InputError, OptionError
from .._glossary import CORRECTIONS
from .._io import plain_suffix, write_text
from ._analysis import recorded_schema
from ._convert import load_dialogues_noted, load_predictions_noted, load_schema_noted
from ._gold import add_corrections_option, corrected_versions
from ._layout import Field, fit_table
from ._metrics import add_scoring_options, scoring_values
from ._options import metric_options
from ._report import say

if TYPE_CHECKING:
    from ..data import DialogueSet, Schema
    from ..metrics import MetricOptions

if TYPE_CHECKING:  # the analysis stage (numpy, scipy) loads when the command runs
    from ..analysis import LabelledTsa, Layout, Leaderboard, SystemTurns
    from ..analysis.reports import LabelledFigure

_PAIRS_SHOWN = 45
_BREAKDOWN_SYSTEMS = 4


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "leaderboard", help="many systems with intervals clustered by dialogue, corrected "
        "pairwise tests, rank intervals, breakdowns; tables for a paper",
        description="Rank DST systems (predictions files and/or judge run directories) with "
        "95%% intervals clustered by dialogue, paired tests between every two systems "
        "(Holm-corrected by default), rank intervals and groups that cannot be told apart, "
        "and breakdowns by domain, turn position, dialogue length and seen/unseen values. "
        "See docs/leaderboard.md.")
    p.add_argument("systems", nargs="+", metavar="SYSTEM",
                   help="a predictions file or a judge run directory, one per system (two "
                   "at least)")
    data = p.add_argument_group("data")
    data.add_argument("--schema", help="schema file (default with runs only: the one they "
                      "recorded)")
    data.add_argument("--dialogues", help="dialogues file (needed with predictions files; "
                      "default with runs only: the one the first run recorded)")
    data.add_argument("--dialogue-ids", metavar="FILE",
                      help="only the dialogues listed in FILE (one id per line)")
    data.add_argument("--limit", type=int, metavar="N", help="only the first N dialogues")
    data.add_argument("--gold", nargs="+", metavar="V",
                      help="annotation versions to score against, e.g. 2.1 2.4 (default: the "
                      "file's first)")
    add_corrections_option(data)
    data.add_argument("--seen", metavar="FILE",
                      help="training-set values for the seen/unseen breakdown: a dialogues "
                      "file (its slot-value pairs), a .txt file (one value per line) or a "
                      ".json list")
    p.add_argument("--names", nargs="+", metavar="NAME", help="system names, in order "
                   "(default: from the files and runs)")
    labelled = p.add_argument_group("human labels (judge runs)")
    labelled.add_argument("--human", nargs="+", metavar="FILE",
                          help="human labels of the judge runs' predictions on --sample: one "
                          "file for all runs or one per run (paired by the predictions they "
                          "name): adds each run's prediction-powered TSA and the differences")
    labelled.add_argument("--sample", metavar="FILE", help="the shared sample the labels "
                          "come from ('labels sample' on one of the runs; drawn again and "
                          "refused if it differs)")
    labelled.add_argument("--tuning", default="loo", metavar="MODE",
                          help="PPI power tuning: loo (default), plain or a fixed lambda")
    stats = p.add_argument_group("statistics")
    stats.add_argument("--confidence", type=float, default=0.95,
                       help="interval coverage; the tests use alpha = 1 - confidence "
                       "(default: 0.95)")
    stats.add_argument("--correction", choices=CORRECTIONS, default="holm",
                       help="multiplicity correction across all pairs: holm (family-wise "
                       "error) or by (Benjamini-Yekutieli, false discovery rate) (default: "
                       "holm)")
    stats.add_argument("--no-breakdowns", action="store_true",
                       help="skip the breakdowns by domain, position, length and values")
    scoring = p.add_argument_group("scoring")
    add_scoring_options(scoring)
    out = p.add_argument_group("outputs")
    out.add_argument("--json", dest="json_out", metavar="OUT", help="every figure as JSON")
    out.add_argument("--csv", metavar="OUT", help="every figure as CSV (long format)")
    out.add_argument("--markdown", metavar="OUT", help="a Markdown table for a paper")
    out.add_argument("--latex", metavar="OUT", help="a LaTeX (booktabs) table for a paper")
    out.add_argument("--png", metavar="OUT", help="a forest plot (PNG)")
    out.add_argument("--svg", metavar="OUT", help="a forest plot (SVG)")
    out.add_argument("--turns", metavar="OUT", help="one row per (system, dialogue, turn) "
                     "with every verdict: .jsonl, or .parquet (needs dst-judge[parquet])")
    p.set_defaults(handler=run_leaderboard)


def _is_run(path: str) -> bool:
    return Path(path).is_dir()


def _check_sources(args: argparse.Namespace) -> None:
    if len(args.systems) < 2:
        raise OptionError("a leaderboard compares systems: give at least two (a predictions "
                          "file or a judge run directory each)")
    if args.names and len(args.names) != len(args.systems):
        raise OptionError(f"--names has {len(args.names)} names for {len(args.systems)} "
                          "systems")
    if args.names and len(set(args.names)) != len(args.names):
        twice = sorted({n for n in args.names if args.names.count(n) > 1})
        raise OptionError(f"--names gives {', '.join(repr(n) for n in twice)} twice: each "
                          "system needs a name of its own")
    if not 0.5 <= args.confidence < 1:
        raise OptionError(f"--confidence must be in [0.5, 1), not {args.confidence}")
    for path in args.systems:
        if not Path(path).exists():
            raise InputError("no such file or run directory", path=path)
    if bool(args.human) != bool(args.sample):
        raise OptionError("--human and --sample go together: the labels and the sample they "
                          "label")
    if args.human and not any(_is_run(p) for p in args.systems):
        raise OptionError("--human labels judge runs: give at least one run directory")
    if args.turns and (plain_suffix(args.turns), args.turns.lower().endswith(".gz")) not in (
            (".jsonl", False), (".jsonl", True), (".parquet", False)):
        raise OptionError("--turns writes .jsonl (gzipped as .jsonl.gz) or .parquet (compressed "
                          f"by itself), not {Path(args.turns).name!r}")
    if not any(_is_run(p) for p in args.systems) and not (args.schema and args.dialogues):
        raise OptionError("predictions files need --schema and --dialogues")


def _data(args: argparse.Namespace) -> tuple[Schema, DialogueSet]:
    from ..data import read_id_list
    from ..pipeline import Run, load_run
    first_run = next((p for p in args.systems if _is_run(p)), None)
    if args.schema:
        schema = load_schema_noted(args.schema)
    else:
        assert first_run is not None
        schema = recorded_schema([Run(Path(first_run), {}, [])])
    if args.dialogues:
        dialogues = load_dialogues_noted(args.dialogues, schema)
    else:
        assert first_run is not None
        recorded = (load_run(first_run).summary.get("data") or {}).get("dialogues")
        if not recorded or not Path(recorded).is_file():
            raise OptionError(f"the dialogues file {first_run} recorded ({recorded}) is not "
                              "there: pass --dialogues")
        dialogues = load_dialogues_noted(recorded, schema)
    if args.dialogue_ids:
        dialogues = dialogues.subset(read_id_list(args.dialogue_ids), source=args.dialogue_ids)
    if args.limit is not None:
        if args.limit < 1:
            raise OptionError("--limit must be at least 1")
        dialogues = dialogues.subset([d.dialogue_id for d in dialogues.dialogues[: args.limit]])
    return schema, dialogues


def _streamed(args: argparse.Namespace, options: MetricOptions
              ) -> tuple[Layout, list[SystemTurns]] | None:
    """Predictions files only, the whole dialogues file, no corrections: read every file in
    step, a dialogue at a time (None when they are not in step: loaded whole instead)."""
    from ..analysis import load_seen, stream_predictions
    from ..data import NotInStep

    if (any(_is_run(p) for p in args.systems) or args.dialogue_ids or args.limit is not None
            or args.corrections):
        return None
    schema = load_schema_noted(args.schema)
    seen = load_seen(args.seen, schema) if args.seen else None
    try:
        return stream_predictions(args.dialogues, args.systems, schema, versions=args.gold,
                                  options=options, names=args.names, seen=seen)
    except NotInStep:
        return None


def run_leaderboard(args: argparse.Namespace, console: Console) -> int:
    from ..analysis import Layout, load_seen, score_predictions, score_run
    from ..pipeline import load_run

    _check_sources(args)
    options = metric_options(**scoring_values(args), breakdowns=False)
    streamed = _streamed(args, options)
    if streamed is not None:
        return _finish(args, options, *streamed, console, streamed=True)
    schema, dialogues = _data(args)
    wanted = args.gold or [dialogues.resolve_version(None)]
    dialogues, versions, _ = corrected_versions(dialogues, schema, args.corrections, wanted)
    versions = [dialogues.resolve_version(v) for v in (versions or wanted)]
    seen = load_seen(args.seen, schema) if args.seen else None
    layout = Layout.of(dialogues, schema, versions, seen=seen,
                       separator=schema.multi_value_separator)
    systems: list[SystemTurns] = []
    for position, source in enumerate(args.systems):
        name = args.names[position] if args.names else None
        if _is_run(source):
            system = score_run(load_run(source), dialogues, schema, versions=versions,
                               options=options, name=name)
        else:
            predictions = load_predictions_noted(source, dialogues, schema, warn_slots=False)
            system = score_predictions(dialogues, predictions, schema, versions=versions,
                                       options=options, name=name)
            del predictions
        systems.append(system)
        gc.collect()  # one system's states at a time: free them before the next is read
    del dialogues
    return _finish(args, options, layout, systems, console, streamed=False)


def _finish(args: argparse.Namespace, options: MetricOptions, layout: Layout,
            systems: list[SystemTurns], console: Console, *, streamed: bool) -> int:
    from ..analysis import build_leaderboard

    recorded = {"options": options.model_dump(mode="json", exclude={"per_dialogue",
                                                                   "breakdowns"}),
                "reading": ("in step, a dialogue at a time" if streamed
                            else "dialogues whole, one system at a time")}
    board = build_leaderboard(layout, systems, options=options, confidence=args.confidence,
                              correction=args.correction, breakdowns=not args.no_breakdowns,
                              recorded=recorded)
    if args.human:
        board.labelled = _labelled(args, systems)
    print_leaderboard(board, console)
    _write_outputs(args, board, layout, systems, console)
    return 0


def _labelled(args: argparse.Namespace, systems: list[SystemTurns]) -> LabelledTsa:
    """The judge runs' prediction-powered TSA from the labels (runs read again: the rows of
    the sampled turns are what the estimates need)."""
    from ..analysis import check_tuning, labelled_tsa, load_labels, load_sample
    from ..pipeline import load_run

    check_tuning(args.tuning)
    judged = [s for s in systems if s.kind == "run"]
    runs = [load_run(s.source) for s in judged]
    return labelled_tsa(runs, [s.name for s in judged],
                        [load_labels(path) for path in args.human], load_sample(args.sample),
                        sample_path=args.sample, confidence=args.confidence,
                        tuning=args.tuning)


def _write_outputs(args: argparse.Namespace, board: Leaderboard, layout: Layout,
                   systems: list[SystemTurns], console: Console) -> None:
    from ..analysis import plot_leaderboard, write_turns
    from ..analysis.tables import leaderboard_csv, leaderboard_latex, leaderboard_markdown

    if args.json_out:
        board.write_json(args.json_out)
        say(console, f"wrote {args.json_out}")
    for path, render in ((args.csv, leaderboard_csv), (args.markdown, leaderboard_markdown),
                         (args.latex, leaderboard_latex)):
        if path:
            write_text(path, render(board))
            say(console, f"wrote {path}")
    for path in (args.png, args.svg):
        if path:
            say(console, f"wrote {plot_leaderboard(board, path)}")
    if args.turns:
        rows = write_turns(args.turns, layout, systems)
        say(console, f"wrote {args.turns} ({rows} rows)")


def print_leaderboard(board: Leaderboard, console: Console) -> None:
    """The systems (one table per gold version, then the judge's metrics), the pairs of the
    rank metric and, for a few systems, the breakdowns; every figure whole at 80 columns."""
    from ..analysis.tables import caption, figure_text, metric_label

    groups: dict[str, list[str]] = {}
    for key in board.metrics:
        groups.setdefault(key.partition("@")[2] if "@" in key else
                          ("judge" if key in ("tsa", "judge_jga") else ""), []).append(key)
    for group, keys in groups.items():
        title = ("Leaderboard" + (f", gold {group}" if group not in ("", "judge") else "")
                 + (": the judge's verdicts" if group == "judge" else ""))
        fields = [Field("rank", "right"), Field("system"), Field("group")]
        fields += [Field(metric_label(k).split(" ")[0] if group not in ("", "judge")
                         else metric_label(k), "right") for k in keys]
        rows = []
        for s in board.systems:
            if not any(k in s.metrics for k in keys):
                continue
            low, high = s.rank_ci
            rank = f"{s.rank} ({low}-{high})" if low != high else str(s.rank)
            rows.append([rank, s.name, s.group, *[figure_text(s.metrics.get(k)) for k in keys]])
        console.print(fit_table(fields, rows, title=title))
    say(console, caption(board), soft_wrap=False)
    shown = [p for p in board.pairs if p.metric == board.rank_metric]
    if len(shown) <= _PAIRS_SHOWN:
        fields = [Field("pair"), Field("difference", "right"), Field("p", "right"),
                  Field(f"p {board.method['correction']}", "right"), Field("verdict")]
        rows = [[f"{p.a} - {p.b}", figure_text(p.difference), _p(p.p), _p(p.p_adjusted),
                 f"{p.a} > {p.b}" if p.significant else "not told apart"] for p in shown]
        console.print(fit_table(fields, rows, title=f"Pairs, {metric_label(board.rank_metric)}"))
    else:
        held = sum(p.significant for p in shown)
        say(console, f"{len(shown)} pairs on {metric_label(board.rank_metric)}: {held} hold "
                     "after correction (every pair and metric: --json or --csv)")
    if board.labelled is not None:
        _print_labelled(board.labelled, console)
    if board.breakdowns and len(board.systems) <= _BREAKDOWN_SYSTEMS:
        key = board.rank_metric
        names = [s.name for s in board.systems]
        fields = [Field("by"), Field("group"), Field("turns", "right")]
        fields += [Field(n, "right") for n in names]
        rows = [[b.dimension, b.group, str(b.turns),
                 *[figure_text(b.figures.get(n), 1) for n in names]]
                for b in board.breakdowns if b.metric == key]
        console.print(fit_table(fields, rows, title=f"Breakdowns, {metric_label(key)}"))


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _print_labelled(labelled: LabelledTsa, console: Console) -> None:
    def cell(figure: LabelledFigure) -> str:
        value, ci = figure.get("value"), figure.get("ci")
        if value is None:
            return "-"
        return f"{value:.2f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")

    fields = [Field("system"), Field("TSA (PPI)", "right"), Field("labels only", "right"),
              Field("judge", "right")]
    rows = [[s["name"], cell(s["tsa"]), cell(s["labels_only"]), cell(s["judge"])]
            for s in labelled["systems"]]
    console.print(fit_table(fields, rows, title="Prediction-powered TSA from human labels "
                            f"({labelled['sample']})"))
    for pair in labelled["pairs"]:
        say(console, pair["verdict"])
    for system in labelled["systems"]:
        if system.get("warning"):
            say(console, f"{system['name']}: {system['warning']}")
