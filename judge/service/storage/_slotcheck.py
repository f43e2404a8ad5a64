"""Slot names of an uploaded predictions file that the job's schema does not have.

An upload is validated on its own, before any job says which schema it goes with, so the upload
only records the predicted slot names it holds (``info.slot_names``, from
:func:`judge.data.predicted_slot_names`); the job that pairs it with a schema names those
outside it, with the closest schema slot, as ``warnings`` in the answer to ``POST /v1/jobs``.
A warning never refuses the job: the slots count as wrong predictions, as on the command line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from ..._errors import DSTJudgeError
from ...data import describe_out_of_schema, load_schema, out_of_schema_slots, predicted_slot_names


class StoredFiles(Protocol):
    """What the check reads of the file store (``_files.FileStore``, which imports this
    module for :func:`upload_slot_names`)."""

    def get(self, project_id: str, file_id: str) -> dict[str, Any]: ...

    def local_path(self, sha256: str) -> Path: ...

log = logging.getLogger("dst_judge.service")
MAX_NAMES_KEPT = 500
"""Distinct slot names kept in an upload's ``info`` (a real schema has far fewer; a hostile
file must not make every file listing large)."""


def upload_slot_names(path: Any) -> dict[str, int]:
    """``info.slot_names`` of a predictions upload: slot name → turns holding it."""
    return dict(predicted_slot_names(path).most_common(MAX_NAMES_KEPT))


def job_warnings(files: StoredFiles, project_id: str, kind: str,
                 inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """For an evaluate or metrics job: one warning per predictions file that holds slot names
    outside the job's schema (file id and name, the slots with turn counts and suggestions, and
    the sentence the CLI prints). Empty when there is nothing to say or nothing to compare."""
    if kind not in ("evaluate", "metrics") or not inputs.get("schema"):
        return []
    ids = inputs.get("predictions") or []
    ids = [ids] if isinstance(ids, str) else list(ids)
    try:
        schema_record = files.get(project_id, inputs["schema"])
        schema = load_schema(files.local_path(schema_record["sha256"]))
    except (DSTJudgeError, OSError) as exc:  # the job itself reports it
        log.debug("no slot-name check: %s", exc)
        return []
    warnings = []
    for file_id in ids:
        try:
            record = files.get(project_id, file_id)
            names = (record.get("info") or {}).get("slot_names")
            if names is None:  # uploaded before the names were recorded
                names = upload_slot_names(files.local_path(record["sha256"]))
        except (DSTJudgeError, OSError) as exc:
            log.debug("no slot-name check of %s: %s", file_id, exc)
            continue
        outside = out_of_schema_slots(names, schema)
        if outside:
            warnings.append({"file": file_id, "name": record["name"],
                             "slots": [slot.as_dict() for slot in outside],
                             "message": f"{record['name']}: {describe_out_of_schema(outside)}"})
    return warnings
