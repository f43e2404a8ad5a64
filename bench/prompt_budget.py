"""Benchmark: where the judge's prompt tokens go, and what a run costs against the paper's
reference implementation.

Prints, with the exact tokenizer of the model (o200k_base for gpt-4o):
1. per template (method × dimension): tokens of each section of the static system message,
   of the response-format schema and the chat format, and of the dialogue part (average over
   the calls of the sample);
2. the cost table on the 100-dialogue sample (system ``original``): prompt tokens, per call,
   cost live and with prefix caching, next to the reference implementation's figures;
3. with ``--full``: the full test set, each shared system alone and the three together
   (a request several systems share is sent once).

Costs use the dry run's own code (``judge.dry_run``) and its price table; replies are assumed
``--reply-tokens`` long for every row, the reference's included (its $3.93 implies about 140).

    python bench/prompt_budget.py [--data ../shared/data/multiwoz] [--model gpt-4o] [--full]
                                  [--prompts DIR] [--variant zero-shot|few-shot]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import write_results  # noqa: E402

import judge  # noqa: E402
import judge.data  # noqa: E402
import judge.pipeline  # noqa: E402
from judge.method import PromptSet  # noqa: E402
from judge.model import ASSUMED_COMPLETION_TOKENS, counter_for, load_prices, usage_cost  # noqa: E402

DEFAULT_DATA = next((p / "shared" / "data" / "multiwoz" for p in (ROOT.parent, ROOT.parent.parent)
                     if (p / "shared" / "data" / "multiwoz").is_dir()),
                    ROOT.parent / "shared" / "data" / "multiwoz")
SYSTEMS = ("original", "da", "da-p")
# The paper's reference implementation, measured on the same sample and test set with the
# o200k tokenizer at gpt-4o prices (figures of issue 13; its code is not part of this project).
REFERENCE_SAMPLE = {"calls": 1189, "accuracy_calls": 457, "completeness_calls": 732,
                    "prompt_tokens": 904_038, "per_call": 760, "accuracy": 407,
                    "completeness": 981, "live": 3.93, "cached": 3.93}
REFERENCE_FULL_ONE_SYSTEM = 39.80
_HEADING = re.compile(r"^# ", re.MULTILINE)


def _sections(text: str) -> list[tuple[str, str]]:
    """Split a message at its ``# `` headings; text before the first is the preamble."""
    starts = [m.start() for m in _HEADING.finditer(text)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    parts = []
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        chunk = text[begin:end]
        title = chunk.splitlines()[0][2:].strip() if chunk.startswith("# ") else "(preamble)"
        parts.append((title, chunk))
    return parts


def _table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    cells = [header, *[tuple(str(c) for c in row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


def _config(args: argparse.Namespace, method: str = "two-dim") -> judge.JudgeConfig:
    return judge.JudgeConfig(model=args.model, method=method, prompt_variant=args.variant,
                             use_cache=False)


def _plan(config: judge.JudgeConfig, data: tuple[Any, Any, Any],
          prompts_dir: Path | None) -> Any:
    schema, dialogues, predictions = data
    prompts = (PromptSet(schema, config.method, config.prompt_variant, prompts_dir)
               if prompts_dir else None)
    return judge.pipeline.plan_evaluation(config, schema, dialogues, predictions, prompts=prompts)


Table = dict[str, Any]


def template_sections(args: argparse.Namespace, data: tuple[Any, Any, Any]) -> list[Table]:
    """Print every template's sections; return the two-dim table and the methods' totals."""
    counter = counter_for(args.model)
    parts: dict[str, dict[str, Any]] = defaultdict(dict)  # two-dim: part -> dimension -> tokens
    totals_rows: list[list[Any]] = []
    order: list[str] = []
    for method in ("two-dim", "two-dim-cot", "direct", "cot"):
        plan = _plan(_config(args, method), data, args.prompts)
        by_dimension: dict[str, list[Any]] = defaultdict(list)
        for call in plan.calls:
            by_dimension[call.dimension].append(call)
        for dimension, calls in by_dimension.items():
            static = plan.prompts.static_messages(dimension)
            rows: list[tuple[Any, ...]] = []
            for title, chunk in _sections(static[0]["content"]):
                rows.append((f"system: {title}", counter.count(chunk)))
            for i, message in enumerate(static[1:]):
                rows.append((f"few-shot {message['role']} {i // 2 + 1}",
                             counter.count(message["content"])))
            dynamic: dict[str, list[int]] = defaultdict(list)
            totals, schema, overhead = [], 0, 0
            for call in calls:
                for title, chunk in _sections(call.body["messages"][-1]["content"]):
                    dynamic[title].append(counter.count(chunk))
                tokens = counter.request_tokens(call.body)
                totals.append(tokens.total)
                schema, overhead = tokens.schema, tokens.overhead
            rows.append(("response-format schema", schema))
            rows.append(("chat format (roles, separators, priming)", overhead))
            for title, counts in dynamic.items():
                rows.append((f"dialogue: {title} (mean)", f"{statistics.fmean(counts):.0f}"))
            rows.append(("whole request (mean over the calls)",
                         f"{statistics.fmean(totals):.0f}"))
            _table(f"{method}/{dimension} ({plan.config.prompt_variant}, {counter.encoding}, "
                   f"{len(calls)} calls on the sample)", ("section", "tokens"), rows)
            totals_rows.append([method, dimension, len(calls), f"{statistics.fmean(totals):,.0f}"])
            if method == "two-dim":
                after = -1  # a part only one dimension has goes after its predecessor there
                for label, tokens in rows:
                    if label not in order:
                        order.insert(after + 1, label)
                    after = order.index(label)
                    parts[label][dimension] = tokens
    dimensions = sorted({d for by_dim in parts.values() for d in by_dim})
    return [{
        "title": (f"Tokens per call of the two-dim template ({args.variant}, {counter.encoding}), "
                  "by part of the request; dialogue parts are means over the sample's calls"),
        "columns": ["part", *dimensions],
        "rows": [[label, *(parts[label].get(d, "—") for d in dimensions)] for label in order],
    }, {
        "title": "Whole request, mean tokens per call, every method",
        "columns": ["method", "dimension", "calls on the sample", "tokens per call (mean)"],
        "rows": totals_rows,
    }]


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def sample_costs(args: argparse.Namespace, data: tuple[Any, Any, Any]) -> Table:
    config = _config(args)
    plan = _plan(config, data, args.prompts)
    start = time.perf_counter()
    figures = judge.dry_run(plan)
    seconds = time.perf_counter() - start
    per = {d: f["prompt_tokens"] / f["calls"] for d, f in figures["per_dimension"].items()}
    price = load_prices().price(args.model)
    reply = args.reply_tokens

    def cost(prompt: int, cached: int, calls: int) -> float | None:
        return usage_cost({"prompt_tokens": prompt, "cached_prompt_tokens": cached,
                           "completion_tokens": reply * calls}, price)

    ref = REFERENCE_SAMPLE
    rows = [
        ("reference implementation (issue 13)", f"{ref['prompt_tokens']:,}",
         f"{ref['per_call']} ({ref['accuracy']} / {ref['completeness']})",
         _usd(cost(ref["prompt_tokens"], 0, ref["calls"])),
         _usd(cost(ref["prompt_tokens"], 0, ref["calls"])), f"{ref['calls']:,}"),
        ("dst-judge, these prompts", f"{figures['prompt_tokens']:,}",
         f"{figures['prompt_tokens'] / figures['to_send']:.0f} "
         f"({per.get('accuracy', 0):.0f} / {per.get('completeness', 0):.0f})",
         _usd(cost(figures["prompt_tokens"], 0, figures["to_send"])),
         _usd(cost(figures["prompt_tokens"], figures["provider_cacheable_tokens"],
                   figures["to_send"])), f"{figures['to_send']:,}"),
    ]
    title = (f"100-dialogue sample, system original, {args.model} ({figures['tokenizer']}), "
             f"replies {reply} tokens per call")
    header = ("", "prompt tokens", "per call (acc / comp)", "cost live", "with prefix caching",
              "calls")
    _table(f"{title}; dry run took {seconds:.1f} s", header, rows)
    note = f"The reference's own figure: ${ref['live']:.2f} live (its replies, ~140 tokens)."
    print(f"  {note}")
    return {"title": title, "columns": ["implementation", *header[1:]],
            "rows": [list(row) for row in rows], "note": note}


def full_costs(args: argparse.Namespace, data_dir: Path) -> Table:
    schema = judge.load_schema(data_dir / "schema.json")
    dialogues = judge.load_dialogues(data_dir / "dialogues.jsonl.gz")
    config = _config(args)
    plans = []
    rows = []
    for system in SYSTEMS:
        predictions = judge.load_predictions(data_dir / "predictions" / f"{system}.jsonl.gz",
                                             dialogues, schema)
        plan = _plan(config, (schema, dialogues, predictions), args.prompts)
        plans.append(plan)
        figures = judge.dry_run(plan)
        rows.append((system, f"{figures['to_send']:,}", f"{figures['prompt_tokens']:,}",
                     _usd(figures["cost_usd"]["live"]),
                     _usd(figures["cost_usd"]["live_with_prompt_caching"])))
    together = judge.dry_run(plans[0], others=plans[1:])
    rows.append(("three together (shared requests once)",
                 f"{together['to_send']:,} of {together['calls']:,}",
                 f"{together['prompt_tokens']:,}", _usd(together["cost_usd"]["live"]),
                 _usd(together["cost_usd"]["live_with_prompt_caching"])))
    three_ref = 3 * REFERENCE_FULL_ONE_SYSTEM
    rows.append(("reference, three separate runs (issue 13)", "", "", f"${three_ref:,.2f}", ""))
    title = (f"Full test set ({len(dialogues)} dialogues), {args.model}, replies "
             f"{ASSUMED_COMPLETION_TOKENS} tokens per call")
    header = ("systems", "requests", "prompt tokens", "cost live", "with prefix caching")
    _table(title, header, rows)
    live = together["cost_usd"]["live"]
    note = ""
    if live is not None:
        note = (f"Together / three reference runs: {live / three_ref:.1%} "
                f"(target ≤ 50 %: ≤ ${three_ref / 2:,.2f}).")
        print(f"  {note}")
    return {"title": title, "columns": list(header), "rows": [list(row) for row in rows],
            "note": note}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--prompts", type=Path, default=None, help="template folder")
    parser.add_argument("--variant", default="zero-shot", choices=("zero-shot", "few-shot"))
    parser.add_argument("--reply-tokens", type=int, default=ASSUMED_COMPLETION_TOKENS)
    parser.add_argument("--full", action="store_true", help="also the full test set")
    parser.add_argument("--sections", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"skipped: no MultiWOZ data at {args.data}; pass --data DIR")
        return 0
    schema = judge.load_schema(args.data / "schema.json")
    dialogues = judge.load_dialogues(args.data / "dialogues.jsonl.gz")
    sample = dialogues.subset(judge.data.read_id_list(args.data / "sampled_dialogue_ids.txt"))
    predictions = judge.load_predictions(args.data / "predictions" / "original.jsonl.gz",
                                         sample, schema)
    data = (schema, sample, predictions)
    tables = template_sections(args, data) if args.sections else []
    tables.append(sample_costs(args, data))
    if args.full:
        tables.append(full_costs(args, args.data))
    if args.prompts is None and args.sections:  # the project's own prompts, every table
        write_results("prompt_budget", tables, model=args.model, variant=args.variant)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
