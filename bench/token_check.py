"""Benchmark: our offline token counts against the usage a real server reported.

Reads cassettes (request/response pairs recorded from a real OpenAI-compatible server, in send
order) and prints, per cassette: requests, prompt tokens we count with the model's tokenizer
(chat format and response-format schema included) against ``usage.prompt_tokens``, and the
prefix-cache tokens we estimate against ``usage.prompt_tokens_details.cached_tokens``.

    python bench/token_check.py [--model local] [CASSETTE ...]   (default: cassettes/*.json)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import write_results  # noqa: E402

from judge.model import counter_for, usage_check  # noqa: E402


def _dimension(body: dict) -> str:
    fmt = (body.get("response_format") or {}).get("json_schema") or {}
    return fmt.get("name") or (body.get("messages") or [{}])[0].get("content", "")[:80]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cassettes", nargs="*", type=Path)
    parser.add_argument("--model", default="local", help="model whose tokenizer counts")
    args = parser.parse_args()
    paths = args.cassettes or sorted((ROOT / "cassettes").glob("*.json"))
    counter = counter_for(args.model)
    rows = []
    totals = [0, 0, 0, 0, 0]
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        sent = []
        for interaction in data["interactions"]:
            body = interaction["request"]["body"]
            usage = (interaction["response"].get("body") or {}).get("usage")
            if not usage:
                continue
            details = usage.get("prompt_tokens_details") or {}
            sent.append(("", _dimension(body), body,
                         {"prompt_tokens": usage.get("prompt_tokens", 0),
                          "cached_prompt_tokens": details.get("cached_tokens", 0)}))
        check = usage_check(sent, counter)
        if not check["requests"]:
            continue
        prompt, cached = check["prompt_tokens"], check["cached_prompt_tokens"]
        rows.append((path.name, check["requests"], prompt["counted"], prompt["reported"],
                     f"{prompt['error']:+.3%}", cached["estimated"], cached["reported"]))
        for i, value in enumerate((check["requests"], prompt["counted"], prompt["reported"],
                                   cached["estimated"], cached["reported"])):
            totals[i] += value
    error = (totals[1] - totals[2]) / totals[2] if totals[2] else 0.0
    rows.append(("all", totals[0], totals[1], totals[2], f"{error:+.3%}", totals[3], totals[4]))
    header = ("cassette", "requests", "counted", "reported", "error", "cached est.",
              "cached reported")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"tokenizer {counter.encoding} ({counter.chat} chat format)")
    for n, row in enumerate([header, *rows]):
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    write_results("token_check", [{
        "title": (f"Our prompt-token counts ({counter.encoding}, {counter.chat} chat format) "
                  "against the usage the server reported, per cassette"),
        "columns": list(header),
        "rows": [list(row) for row in rows],
        "note": ("'counted' is our offline count of each request (chat format and "
                 "response-format schema included), 'reported' the server's "
                 "usage.prompt_tokens; the cached estimate assumes a cold server with one slot."),
    }], model=args.model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
