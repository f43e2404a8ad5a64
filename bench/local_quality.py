"""Benchmark: how well a real model judges, by default the local one (`dst-judge local serve`).

Judges the first ``--dialogues-limit`` dialogues of the shared 100-dialogue MultiWOZ sample
(predictions of one ``--system``) once per prompt variant, with the two-dim method, default
semantics and the cache off (a fresh run each time), and measures against the exact-match RULE
verdicts of every annotation version in the data (2.1 and 2.4): scored and error turns, TSA,
raw agreement and Cohen's kappa with 95 % bootstrap intervals over dialogues (the
``dst-judge agreement`` computation, :func:`judge.agreement_report`), wall seconds per turn,
what the replies said (completeness replies naming a missing slot, accuracy replies calling a
value wrong), the peak RSS of this client and, when ``--base-url`` is the server
``dst-judge local serve`` started, of that llama-server (psutil samples of its pid).

The few-shot examples were written after reading the judge's errors on the first
``--examples-from`` dialogues of the sample, so the dialogues after those get their own table:
they are the fair check of the few-shot prompts. No target: the figures describe the model.

    python bench/local_quality.py [--base-url URL] [--model local] [--dialogues-limit 20]
        [--data ../shared/data] [--system original] [--variants zero-shot few-shot]
        [--concurrency 2] [--timeout 900] [--max-retries 1] [--examples-from 12] [--out DIR]

The figures go to ``bench/results/local_quality.json`` (``write_results``), which
docs/local-model.md renders.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only, peak_rss_mb, write_results  # noqa: E402

import judge  # noqa: E402 - after the path set-up
import judge.data  # noqa: E402
import judge.errors  # noqa: E402
from judge.model import local  # noqa: E402

VARIANTS = ("zero-shot", "few-shot")
SAMPLE_FILE = "sampled_dialogue_ids.txt"
RSS_INTERVAL_S = 0.5


def default_data() -> Path:
    """``shared/data`` beside the repository (or beside a folder holding the worktree)."""
    for folder in ROOT.parents:
        if (folder / "shared" / "data" / "multiwoz").is_dir():
            return folder / "shared" / "data"
    return ROOT.parent / "shared" / "data"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: the server "
                        "`dst-judge local serve` runs)")
    parser.add_argument("--model", default="local", help="model name the server knows "
                        "(default: local, the alias of `dst-judge local serve`)")
    parser.add_argument("--dialogues-limit", type=int, default=20, metavar="N",
                        help="judge the first N dialogues of the 100-dialogue sample")
    parser.add_argument("--data", type=Path, default=default_data(), metavar="DIR",
                        help="the shared data folder (holding multiwoz/), or multiwoz/ itself")
    parser.add_argument("--system", default="original", help="predictions/<system>.jsonl.gz")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    parser.add_argument("--max-retries", type=int, default=1)
    parser.add_argument("--examples-from", type=int, default=12, metavar="K",
                        help="the few-shot examples were written from the first K dialogues "
                        "of the sample; the rest are reported apart (default: 12)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="keep each variant's run directory under DIR/<variant>")
    args = parser.parse_args(argv)
    if args.dialogues_limit < 1:
        parser.error("--dialogues-limit must be at least 1")
    if args.examples_from < 0:
        parser.error("--examples-from must be 0 or more")
    return args


# --------------------------------------------------------------------------- inputs


def load_inputs(data: Path, system: str, limit: int) -> tuple[Any, Any, Any] | str:
    """Schema, the first ``limit`` sampled dialogues and their predictions, or why not."""
    folder = data / "multiwoz" if (data / "multiwoz").is_dir() else data
    needed = [folder / "schema.json", folder / "dialogues.jsonl.gz", folder / SAMPLE_FILE,
              folder / "predictions" / f"{system}.jsonl.gz"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        return (f"no MultiWOZ data at {data}: missing {', '.join(missing)} (the shared data of "
                "the development workspace, see its README.md); pass --data DIR")
    ids = judge.data.read_id_list(folder / SAMPLE_FILE)[:limit]
    schema = judge.load_schema(folder / "schema.json")
    dialogues = judge.load_dialogues(folder / "dialogues.jsonl.gz", schema=schema).subset(
        ids, source=str(folder / SAMPLE_FILE))
    predictions = judge.load_predictions(needed[3], dialogues, schema)
    return schema, dialogues, predictions


def local_server(base_url: str) -> Any:
    """The llama-server ``dst-judge local serve`` started, when it is the one at ``base_url``."""
    state = local.status()
    if state.state != "running" or state.server is None:
        return None
    return state.server if state.server.base_url.rstrip("/") == base_url.rstrip("/") else None


class PeakRss:
    """Largest RSS of another process, sampled in a thread while a run lasts (psutil)."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._process = psutil.Process(pid)
        self._errors = (psutil.Error,)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            try:
                self.peak = max(self.peak, self._process.memory_info().rss)
            except self._errors:
                return
            if self._stop.wait(RSS_INTERVAL_S):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------- one variant


@dataclass
class VariantRun:
    """What one prompt variant's run gave."""

    variant: str
    wall: float
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    server_peak: int | None = None
    replies: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def truncated(self) -> int:
        return sum(1 for row in self.rows if row["error"] and "max_tokens" in row["error"])


def count_replies(rows: Sequence[Mapping[str, Any]], dimension: str, key: str) -> tuple[int, int]:
    """(replies naming at least one slot under ``key``, parsed replies) of one dimension."""
    flagged = total = 0
    for row in rows:
        for call in row["calls"]:
            if call["dimension"] != dimension or call["skipped"] or call["results"] is None:
                continue
            total += 1
            flagged += bool(call["results"].get(key))
    return flagged, total


def run_variant(args: argparse.Namespace, variant: str, data: tuple[Any, Any, Any],
                cache_dir: str, server: Any) -> VariantRun:
    config = judge.load_config({
        "base_url": args.base_url, "model": args.model, "prompt_variant": variant,
        "concurrency": args.concurrency, "timeout": args.timeout,
        "max_retries": args.max_retries, "cache_dir": cache_dir, "use_cache": False})
    out_dir = args.out / variant if args.out else None
    sampler = PeakRss(server.pid) if server is not None else None
    start = time.perf_counter()
    with sampler or contextlib.nullcontext():
        result = judge.evaluate(config, *data, out_dir=out_dir)
    run = VariantRun(variant, time.perf_counter() - start, result.summary, result.rows,
                     sampler.peak if sampler is not None else None)
    run.replies = {
        "completeness": count_replies(result.rows, "completeness", "missed_domain_slot"),
        "accuracy": count_replies(result.rows, "accuracy", "incorrect_domain_slot")}
    summary = result.summary
    print(f"{variant}: {summary['turns']} turns ({summary['scored_turns']} scored, "
          f"{summary['error_turns']} error) in {run.wall:.0f} s, "
          f"{run.wall / summary['turns']:.1f} s per turn; TSA {fmt_pct(summary['tsa'])}",
          flush=True)
    return run


# --------------------------------------------------------------------------- tables


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} %"


def fmt_kappa(figure: Mapping[str, Any], *, interval: bool = True) -> str:
    value, ci = figure["value"], figure["ci"]
    if value is None:
        return "κ n/a"
    text = f"κ {value:.2f}"
    if interval and ci is not None:
        text += f", CI {ci[0]:.2f} to {ci[1]:.2f}"
    return text


def pair(report: Mapping[str, Any], a: str, b: str) -> Mapping[str, Any]:
    return next(p for p in report["pairs"] if p["a"] == a and p["b"] == b)


def agreement_cell(report: Mapping[str, Any], version: str, *, interval: bool = True) -> str:
    entry = pair(report, "judge", f"RULE-{version}")
    return (f"{fmt_pct(entry['accuracy']['value'])} "
            f"({fmt_kappa(entry['kappa'], interval=interval)})")


def share(counts: tuple[int, int]) -> str:
    flagged, total = counts
    return f"{100 * flagged / total:.1f} % ({flagged} of {total})" if total else "no replies"


def quality_table(runs: Sequence[VariantRun], reports: Mapping[str, Mapping[str, Any]],
                  versions: Sequence[str], title: str, memory: str,
                  args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for run in runs:
        s = run.summary
        errors = f"{s['error_turns'] / s['turns'] * 100:.1f} %"
        rows.append([run.variant, f"{s['scored_turns']} / {s['error_turns']} ({errors})",
                     fmt_pct(s["tsa"]),
                     *(agreement_cell(reports[run.variant], v) for v in versions),
                     f"{run.wall / s['turns']:.1f}"])
    rule_pairs = [pair(reports[runs[0].variant], f"RULE-{a}", f"RULE-{b}")
                  for a, b in itertools.pairwise(versions)]
    between = "".join(f" {p['a']} and {p['b']} agree with each other on "
                      f"{fmt_pct(p['accuracy']['value'])} of the turns "
                      f"({fmt_kappa(p['kappa'], interval=False)})." for p in rule_pairs)
    truncated = ", ".join(f"{run.variant} {run.truncated} of {run.summary['error_turns']}"
                          for run in runs)
    max_tokens = runs[0].summary["options"]["max_tokens"]
    return {
        "title": title,
        "columns": ["prompts", "scored / error turns", "TSA",
                    *(f"agreement with RULE-{v} (κ, 95 % CI)" for v in versions),
                    "seconds per turn (wall)"],
        "rows": rows,
        "note": (f"Agreement and κ are over the scored turns; the intervals are 95 % "
                 f"percentile bootstrap intervals over dialogues ({args.n_boot:,} replicates, "
                 f"the computation of `dst-judge agreement`).{between} Error turns are "
                 f"reported, not scored; those whose reply was cut at `max_tokens` "
                 f"({max_tokens:,}): {truncated}. {memory}"),
    }


def replies_table(runs: Sequence[VariantRun]) -> dict[str, Any]:
    return {
        "title": "What the replies said (parsed replies, before the rule filters)",
        "columns": ["prompts", "completeness replies naming a missing slot",
                    "accuracy replies calling a value wrong"],
        "rows": [[run.variant, share(run.replies["completeness"]),
                  share(run.replies["accuracy"])] for run in runs],
    }


def held_out_table(runs: Sequence[VariantRun], held_out: Sequence[str],
                   versions: Sequence[str], first: int, args: argparse.Namespace
                   ) -> dict[str, Any]:
    keep = set(held_out)
    rows = []
    for run in runs:
        subset = [row for row in run.rows if row["dialogue_id"] in keep]
        report = judge.agreement_report(subset, n_boot=args.n_boot, seed=args.seed)
        rows.append([run.variant, f"{report['judged_turns']} / {report['error_turns']}",
                     *(agreement_cell(report, v) for v in versions)])
    last = first + len(held_out) - 1
    return {
        "title": (f"The fair check: dialogues {first}–{last} of the sample (the few-shot "
                  f"examples were written from the errors on dialogues 1–{first - 1})"),
        "columns": ["prompts", "scored / error turns",
                    *(f"agreement with RULE-{v} (κ, 95 % CI)" for v in versions)],
        "rows": rows,
    }


def memory_note(runs: Sequence[VariantRun], server: Any) -> str:
    client = f"the client's peak RSS was {peak_rss_mb():.0f} MiB"
    peaks = [run.server_peak for run in runs if run.server_peak]
    if server is None or not peaks:
        return (f"Memory: {client}; the server's was not measured (--base-url is not the "
                f"server `dst-judge local serve` started).")
    return (f"Memory: the server's peak RSS during the runs was {max(peaks) / 2**30:.2f} GiB "
            f"(llama-server pid {server.pid}, sampled every {RSS_INTERVAL_S:g} s), {client}.")


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    local_only()
    if args.base_url is None:
        args.base_url = local.local_base_url()
        if args.base_url is None:
            print("local_quality: no healthy local server: run `dst-judge local serve` first "
                  "(or pass --base-url URL)", file=sys.stderr)
            return 2
    loaded = load_inputs(args.data, args.system, args.dialogues_limit)
    if isinstance(loaded, str):
        print(f"local_quality: {loaded}", file=sys.stderr)
        return 2
    schema, dialogues, predictions = loaded
    versions = list(dialogues.versions)
    server = local_server(args.base_url)
    print(f"{len(dialogues)} dialogues, {dialogues.num_turns} turns, system {args.system!r}; "
          f"server {args.base_url} (model {args.model!r}"
          + (f", llama-server pid {server.pid}" if server is not None else "") + ")", flush=True)
    runs: list[VariantRun] = []
    try:
        with tempfile.TemporaryDirectory(prefix="dst-judge-quality-") as cache_dir:
            for variant in args.variants:
                runs.append(run_variant(args, variant, (schema, dialogues, predictions),
                                        cache_dir, server))
    except judge.DSTJudgeError as exc:
        print(f"local_quality: {exc}", file=sys.stderr)
        return int(judge.errors.exit_status_for(exc))
    empty = [run for run in runs if not run.summary["scored_turns"]]
    if empty:
        examples = "; ".join(empty[0].summary["errors"]["examples"][:1])
        print(f"local_quality: nothing judged with {', '.join(r.variant for r in empty)} "
              f"prompts (every turn is an error row, e.g. {examples}); no figures written",
              file=sys.stderr)
        return 1
    reports = {run.variant: judge.agreement_report(run.rows, n_boot=args.n_boot,
                                                   seed=args.seed) for run in runs}
    options = runs[0].summary["options"]
    title = (f"The first {len(dialogues)} dialogues ({dialogues.num_turns} turns) of the "
             f"100-dialogue sample, system {args.system}: method {options['method']}, "
             f"semantics {options['semantics']}, RULE matching {options['effective_rule_match']}"
             f", model {args.model!r}, concurrency {args.concurrency}, timeout "
             f"{args.timeout:g} s, max retries {args.max_retries}")
    if server is not None:
        title += (f"; llama-server with model {server.model}, {server.parallel} slots, "
                  f"{server.threads} threads, context {server.ctx}")
    tables = [quality_table(runs, reports, versions, title, memory_note(runs, server), args),
              replies_table(runs)]
    ids = [d.dialogue_id for d in dialogues.dialogues]
    if args.examples_from < len(ids):
        tables.append(held_out_table(runs, ids[args.examples_from:], versions,
                                     args.examples_from + 1, args))
    for table in tables:
        print(f"\n{table['title']}\n  " + " | ".join(table["columns"]))
        for row in table["rows"]:
            print("  " + " | ".join(row))
        if table.get("note"):
            print(f"  {table['note']}")
    facts: dict[str, Any] = {"system": args.system, "dialogues": len(dialogues),
                             "turns": dialogues.num_turns}
    if server is not None:
        facts["server"] = {"model": server.model, "ctx": server.ctx,
                           "parallel": server.parallel, "threads": server.threads}
    write_results("local_quality", tables, **facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
