"""Synthetic judge runs for the web tests and benchmarks: judgment rows shaped like the
pipeline's (dialogue, states of two annotation versions, two calls with their replies, the
filter trace, the integrated state), packed as a bundle the service imports
(``POST /v1/bundles``) — the quickest honest way to put a run of any size into a server.

``hostile=True`` fills text, slot names and the system name with markup and script-looking
strings, for the escaping tests.
"""

from __future__ import annotations

import io
import json
import random
import tarfile
import time
from typing import Any

SLOTS = {
    "hotel": ["area", "pricerange", "type", "parking", "internet", "stars", "name",
              "book day", "book people", "book stay"],
    "restaurant": ["area", "food", "pricerange", "name", "book day", "book people",
                   "book time"],
    "train": ["departure", "destination", "day", "leaveat", "arriveby", "book people"],
    "taxi": ["departure", "destination", "leaveat", "arriveby"],
    "attraction": ["area", "type", "name"],
}
VALUES = ["north", "south", "centre", "cheap", "moderate", "expensive", "guesthouse", "hotel",
          "yes", "no", "dontcare", "friday", "saturday", "2", "3", "4", "19:00", "cambridge",
          "london kings cross", "italian", "chinese", "museum", "college", "the gonville hotel"]
SENTENCE = ("i need a place to stay in the north with free parking please . can you book it "
            "for three people on friday ? i am also looking for a train to cambridge that "
            "leaves after noon . what about a cheap italian restaurant in the centre")
WORDS = SENTENCE.split(" ")

XSS = '<script>window.pwned = 1</script>'
XSS_LINK = 'javascript:window.pwned=2'
XSS_IMG = '<img src=x onerror="window.pwned = 3">'


def _sentence(rng: random.Random, size: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(size))


def _reply(rng: random.Random, flagged: list[str], dimension: str) -> str:
    key = "incorrect_domain_slot" if dimension == "accuracy" else "missed_domain_slot"
    return json.dumps({"explanation": _sentence(rng, 24),
                       key: {s: rng.choice(VALUES) for s in flagged}})


def synthetic_rows(turns: int, *, seed: int = 0, hostile: bool = False,
                   versions: tuple[str, ...] = ("2.1", "2.4")) -> list[dict[str, Any]]:
    """``turns`` judgment rows in dialogues of 4 to 11 turns."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    number = 0
    while len(rows) < turns:
        number += 1
        dialogue_id = f"SYN{number:05d}.json"
        if hostile and number == 1:
            dialogue_id = f"D<b>1</b>/{XSS}?#x"
        domains = rng.sample(sorted(SLOTS), rng.randint(1, 2))
        state: dict[str, str] = {}
        for turn in range(min(rng.randint(4, 11), turns - len(rows))):
            domain = rng.choice(domains)
            names = [f"{domain}-{s}" for s in rng.sample(SLOTS[domain], 2)]
            if hostile and turn == 0:
                names.append(f"hotel-{XSS_IMG}")
            pred = {n: rng.choice(VALUES) for n in names}
            gold = {v: dict(pred) for v in versions}
            wrong = rng.random() < 0.15
            if wrong:
                gold[versions[0]][names[0]] = rng.choice(VALUES)
            if rng.random() < 0.1:
                gold[versions[-1]][names[-1]] = rng.choice(VALUES)
            verdict: bool | None = not (wrong and rng.random() < 0.7)
            error = None
            if rng.random() < 0.01:
                verdict, error = None, "the model's reply was not valid JSON after 1 re-ask"
            flagged = [names[0]] if verdict is False else []
            state.update(pred)
            user = _sentence(rng, rng.randint(8, 20))
            system = _sentence(rng, rng.randint(8, 20)) if turn else ""
            if hostile:
                user = f"{XSS} {user} <a href=\"{XSS_LINK}\">click</a> {XSS_LINK}"
                system = f"{XSS_IMG} {system}" if turn else system
            calls = [{"dimension": d, "custom_id": f"{dialogue_id}::{turn}::{d}",
                      "template_hash": "0" * 64, "prompt_hash": "1" * 64, "skipped": False,
                      "attempts": [{"text": (f"{XSS} " if hostile else "")
                                    + _reply(rng, flagged, d),
                                    "finish_reason": "stop", "refusal": None,
                                    "usage": {"prompt_tokens": 1300, "completion_tokens": 40,
                                              "cached_prompt_tokens": 1100},
                                    "model": "synthetic-judge", "response_id": f"r{len(rows)}",
                                    "cached": False}],
                      "explanation": _sentence(rng, 12),
                      "results": {"incorrect_domain_slot" if d == "accuracy" else
                                  "missed_domain_slot": {s: "x" for s in flagged}},
                      "error": error} for d in ("accuracy", "completeness")]
            trace = [{"step": "prediction", "key": n, "slot": n, "value": v, "decision": "kept",
                      "reason": "passes every check; recorded as correct"}
                     for n, v in pred.items()]
            rows.append({
                "dialogue_id": dialogue_id, "turn_index": turn, "system": system, "user": user,
                "pred_turn_state": pred, "verdict": verdict,
                "jga": verdict if verdict is None else verdict and rng.random() < 0.9,
                "error": error, "incorrect": flagged, "missed": [],
                "rule": {v: gold[v] == pred for v in versions},
                "gold_turn_state": gold, "calls": calls, "trace": trace,
                "state": {"incorrect": flagged, "missed": [], "correct": dict(state)},
            })
    return rows


def summary_of(rows: list[dict[str, Any]], system: str = "synthetic-dst",
               versions: tuple[str, ...] = ("2.1", "2.4")) -> dict[str, Any]:
    scored = [r for r in rows if r["verdict"] is not None]
    tsa = 100.0 * sum(r["verdict"] for r in scored) / len(scored)
    rule = {}
    for v in versions:
        ok = [r["rule"][v] for r in rows]
        agree = [r["rule"][v] == r["verdict"] for r in scored]
        rule[v] = {"tsa": 100.0 * sum(ok) / len(ok), "agreement": 100.0 * sum(agree) / len(agree)}
    return {"method": "two-dim", "semantics": "default", "turns": len(rows),
            "scored_turns": len(scored), "error_turns": len(rows) - len(scored), "tsa": tsa,
            "judge_jga": tsa - 1.0, "rule": rule, "rule_match": "nospace",
            "calls": {"planned": 2 * len(rows)},
            "tokens": {"prompt_tokens": 1300 * 2 * len(rows),
                       "completion_tokens": 40 * 2 * len(rows)},
            "cost_usd": 0.0004 * len(rows),
            "data": {"system": system, "num_dialogues": len({r["dialogue_id"] for r in rows}),
                     "versions": list(versions)},
            "options": {"model": "synthetic-judge", "method": "two-dim"}}


def bundle(rows: list[dict[str, Any]], *, system: str = "synthetic-dst",
           method: str = "two-dim", predictions_sha256: str = "0" * 64) -> bytes:
    """A ``.tar.gz`` bundle of a finished evaluate job holding ``rows``, judged on the
    predictions file of that digest (what its human labels belong to)."""
    summary = summary_of(rows, system)
    summary["method"] = method
    meta = {"format": 1, "job_id": "job_synthetic", "kind": "evaluate", "endpoint": None,
            "options": {"model": "synthetic-judge", "method": method},
            "inputs": {"predictions": {"id": "file_x", "name": system, "kind": "predictions",
                                       "sha256": predictions_sha256}},
            "status": "succeeded", "exit_code": 0, "exported_at": "2025-01-01T00:00:00Z"}
    members = {"bundle.json": json.dumps(meta), "summary.json": json.dumps(summary),
               "judgments.jsonl": "".join(json.dumps(r) + "\n" for r in rows)}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
