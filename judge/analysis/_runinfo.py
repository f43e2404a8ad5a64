"""What a judge run is a run *of*: the system and predictions file it judged, its method and
model, its dialogues and gold versions. ``compare`` names each row by these and warns when its
rows differ in more than one of them, since a difference in the table then has more than one
possible cause.

Predictions, dialogues and gold are compared by content (the judgment rows carry the predicted
turn states, the utterances and the gold turn states), so a run fetched from the service
compares with a local run of the same files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any

from .._digest import canonical_json, sha256_text
from .._errors import InputError
from ..pipeline import Run, RunDirectory

ASPECTS = ("predictions", "judge method", "model", "dialogues", "gold version")
"""What rows of one comparison should differ in, one at a time."""


def _digest(value: Any) -> str:
    return sha256_text(canonical_json(value))


def run_identity(run: Run) -> dict[str, Any]:
    """The run's system, predictions file name and, per aspect of :data:`ASPECTS`, a value
    that is equal for two runs exactly when they agree in that aspect."""
    summary = run.summary
    data = summary.get("data") or {}
    rows = sorted(run.rows, key=lambda r: (str(r["dialogue_id"]), r["turn_index"]))
    predictions = data.get("predictions")
    return {
        "system": data.get("system"),
        "predictions_file": PurePath(str(predictions)).name if predictions else None,
        "aspects": {
            "predictions": _digest([r.get("pred_turn_state") for r in rows]),
            "judge method": run.label,
            "model": (summary.get("options") or {}).get("model"),
            "dialogues": _digest([(r["dialogue_id"], r["turn_index"], r.get("system"),
                                   r.get("user")) for r in rows]),
            "gold version": _digest([sorted(summary.get("rule") or {}),
                                     [r.get("gold_turn_state") for r in rows]]),
        },
    }


def differing_aspects(identities: Sequence[dict[str, Any]]) -> list[str]:
    """The aspects in which not every run agrees, in :data:`ASPECTS` order."""
    return [aspect for aspect in ASPECTS
            if len({canonical_json(i["aspects"][aspect]) for i in identities}) > 1]


def mixed_comparison_warning(aspects: Sequence[str]) -> str | None:
    """A warning when the runs differ in more than one aspect; None otherwise."""
    if len(aspects) < 2:
        return None
    named = ", ".join(aspects[:-1]) + f" and {aspects[-1]}"
    return (f"these runs differ in {named}: a difference between two rows may come from any "
            "of them. Compare runs that differ in one thing (e.g. the judge method on the "
            "same predictions).")


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def recorded_predictions_sha256(run_dir: str | Path) -> str | None:
    """The sha256 of the predictions file a local run judged, from its manifest (what labels
    and samples name as ``predictions_sha256``); None when the run directory has no readable
    manifest (a run copied without it) or the manifest does not say."""
    try:
        manifest = RunDirectory(run_dir).read_manifest()
    except InputError:
        return None
    digest = ((manifest or {}).get("inputs") or {}).get("predictions")
    return digest if isinstance(digest, str) and _SHA256.match(digest) else None
