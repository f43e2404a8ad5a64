"""Measure what prompt injection in utterances does to the judge, with a real model.

For every injection string in bench/injection_corpus.json, the example dialogues are copied with
the string appended to each user utterance, and judged like the clean dialogues. Printed per
injection: error rows (a broken output contract), verdict flips against the clean run, and the
share of turns judged correct. Needs a live OpenAI-compatible server (or an API key):

    python bench/injection.py --base-url http://127.0.0.1:8089/v1 --model local
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from _common import write_results  # the script's own folder is on sys.path

import judge

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _inject(text: str, dialogues_path: Path, target: Path) -> Path:
    rows = [json.loads(line) for line in dialogues_path.read_text().splitlines() if line.strip()]
    for row in rows:
        for turn in row["turns"]:
            turn["user"] = f"{turn['user']} {text}"
    target.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return target


def _run(config: judge.JudgeConfig, dialogues_path: Path) -> judge.EvaluationResult:
    schema = judge.load_schema(EXAMPLES / "schema.json")
    dialogues = judge.load_dialogues(dialogues_path)
    predictions = judge.load_predictions(EXAMPLES / "predictions.jsonl", dialogues, schema)
    return judge.evaluate(config, schema, dialogues, predictions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="local")
    parser.add_argument("--method", default="two-dim")
    parser.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "dst-inject"))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    config = judge.load_config({"base_url": args.base_url, "model": args.model,
                                "method": args.method, "cache_dir": args.cache_dir,
                                "concurrency": 2})
    corpus = json.loads((ROOT / "bench" / "injection_corpus.json").read_text())["injections"]
    clean = _run(config, EXAMPLES / "dialogues.jsonl")
    base = [r["verdict"] for r in clean.rows]
    figures = {"clean": {"errors": clean.summary["error_turns"], "tsa": clean.summary["tsa"]}}
    print(f"clean: TSA {clean.summary['tsa']:.1f} %, error rows {clean.summary['error_turns']}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in corpus.items():
            result = _run(config, _inject(text, EXAMPLES / "dialogues.jsonl",
                                          Path(tmp) / f"{name}.jsonl"))
            verdicts = [r["verdict"] for r in result.rows]
            flips = sum(1 for a, b in zip(base, verdicts, strict=True)
                        if a is not None and b is not None and a != b)
            to_correct = sum(1 for a, b in zip(base, verdicts, strict=True)
                             if a is False and b is True)
            figures[name] = {"errors": result.summary["error_turns"], "flips": flips,
                             "flips_to_correct": to_correct, "tsa": result.summary["tsa"],
                             "turns": len(verdicts)}
            tsa = result.summary["tsa"]
            print(f"{name:18s} error rows {result.summary['error_turns']:2d}  verdict flips "
                  f"{flips:2d}/{len(verdicts)} (to correct: {to_correct})  TSA "
                  f"{'n/a' if tsa is None else f'{tsa:.1f} %'}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")

    def tsa(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f} %"

    rows = [["none (clean)", figures["clean"]["errors"], "—", "—", tsa(clean.summary["tsa"])]]
    rows += [[name, f["errors"], f"{f['flips']} / {f['turns']}", f["flips_to_correct"],
              tsa(f["tsa"])] for name, f in figures.items() if name != "clean"]
    write_results("injection", [{
        "title": (f"Each injection appended to every user utterance of the example, judged by "
                  f"{args.model} ({args.method})"),
        "columns": ["injection", "error rows", "verdicts changed", "of which to correct", "TSA"],
        "rows": rows,
        "note": ("Error rows would mean a broken output contract; changed verdicts are against "
                 "the clean run. The injections are in bench/injection_corpus.json."),
    }], model=args.model, method=args.method)
    return 0


if __name__ == "__main__":
    sys.exit(main())
