"""Batch API request files written from an evaluation plan (the same bodies a live run sends)."""

from __future__ import annotations

import json
from pathlib import Path

from ..model import CHAT_URL
from ._plan import EvaluationPlan


def write_requests(plan: EvaluationPlan, path: str | Path) -> int:
    """Write one Batch API request line per call (skipped calls need none); returns the count."""
    count = 0
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as handle:
        for call in plan.calls:
            line = {"custom_id": call.custom_id, "method": "POST", "url": CHAT_URL,
                    "body": call.body}
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            count += 1
    return count
