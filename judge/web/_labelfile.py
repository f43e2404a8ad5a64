"""Labels of the service database as the human labels file format.

One record per (reviewer, turn): the turn label (1 correct, 0 incorrect, null with
``unsure: true``), ``reviewer``, ``time`` (ISO 8601, the last change), ``note``,
``predictions_sha256`` (what was labelled, when the run's predictions are known), ``blind``
(whether the page hid the verdicts and the gold, when every label of the turn says the same)
and ``slots``
with per-slot labels (label, unsure, the predicted ``value`` the reviewer saw, note). A
reviewer who labelled only slots gets the turn label those imply: 0 when a slot is wrong,
otherwise null and unsure (they judged parts, not the whole turn).

Every record is checked by the format's own model (:class:`judge.analysis.HumanLabel`) before
it is used for statistics, so an export is always a file ``dst-judge agreement --human`` reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..analysis import HumanLabel, HumanLabels
from ..service import predictions_sha256

_VALUE = {"correct": 1, "incorrect": 0, "unsure": None}


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _grouped(items: Iterable[Mapping[str, Any]]
             ) -> dict[tuple[str, str, int], list[Mapping[str, Any]]]:
    groups: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for item in items:
        key = (str(item["reviewer"]), str(item["dialogue_id"]), int(item["turn_index"]))
        groups.setdefault(key, []).append(item)
    return groups


def label_records(items: Iterable[Mapping[str, Any]],
                  predicted: Mapping[tuple[str, int], Mapping[str, Any]] | None = None
                  ) -> list[dict[str, Any]]:
    """Records of the labels file from the service's label rows (``GET /v1/labels``).

    ``predicted`` maps (dialogue id, turn index) to the run's predicted turn state, for the
    ``value`` of slot labels."""
    out = []
    for (reviewer, dialogue_id, turn_index), group in sorted(_grouped(items).items(),
                                                              key=lambda g: (g[0][1], g[0][2],
                                                                             g[0][0])):
        turn = next((i for i in group if not i["slot"]), None)
        slots = sorted((i for i in group if i["slot"]), key=lambda i: str(i["slot"]))
        record: dict[str, Any] = {"dialogue_id": dialogue_id, "turn_index": turn_index}
        if turn is not None:
            record["label"] = _VALUE[turn["label"]]
            if turn["label"] == "unsure":
                record["unsure"] = True
        elif any(i["label"] == "incorrect" for i in slots):
            record["label"] = 0
        else:
            record["label"] = None
            record["unsure"] = True
        record["reviewer"] = reviewer
        record["time"] = _iso(max(float(i["updated_at"]) for i in group))
        sha = predictions_sha256(str(group[0].get("subject") or ""))
        if sha is not None:
            record["predictions_sha256"] = sha
        if turn is not None and turn.get("note"):
            record["note"] = turn["note"]
        shown = {item.get("blind") for item in group}
        if len(shown) == 1 and None not in shown:  # every label of the turn says the same
            record["blind"] = bool(shown.pop())
        if slots:
            state = (predicted or {}).get((dialogue_id, turn_index)) or {}
            record["slots"] = {}
            for item in slots:
                entry: dict[str, Any] = {"label": _VALUE[item["label"]]}
                if item["label"] == "unsure":
                    entry["unsure"] = True
                value = state.get(item["slot"])
                entry["value"] = value if isinstance(value, str) else None
                if item.get("note"):
                    entry["note"] = item["note"]
                record["slots"][str(item["slot"])] = entry
        out.append(record)
    return out


def human_labels(records: list[dict[str, Any]]) -> HumanLabels | None:
    """The records as :class:`HumanLabels` for the agreement statistics (None when empty)."""
    if not records:
        return None
    return HumanLabels([HumanLabel.model_validate(r) for r in records], path="(service labels)")
