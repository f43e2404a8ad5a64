"""Export a finished job as a bundle another server can import: a ``.tar.gz`` holding
``bundle.json`` (format, kind, options, the inputs' names and sha256, the ``subject``: the
predictions sha256 the run judged, which keys human labels), ``manifest.json``,
``summary.json``, ``judgments.jsonl`` and the run log ``calls.jsonl`` (so the paid replies
travel with the results). Inputs themselves are not included, only their digests.

Import reads only those members, as regular files, each within the server's unpacked-size
limit, and checks every judgment row the way ``load_run`` does.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from typing import IO, Any, Protocol

import sqlalchemy as sa

from .._errors import ServiceError
from ._auth import Principal, new_id
from ._db import Database, files, job_calls, jobs, judgments
from ._jobs import JobStore, judgment_row
from ._labels import predictions_sha256
from ._settings import ServiceSettings


class BundleHost(Protocol):
    """What export and import need of the service (``_app.Service`` has it; this module does
    not import the app, which imports it)."""

    settings: ServiceSettings
    db: Database
    jobs: JobStore

BUNDLE_FORMAT = 1
MEMBERS = ("bundle.json", "manifest.json", "summary.json", "judgments.jsonl", "calls.jsonl")
_ROW_FIELDS = ("dialogue_id", "turn_index", "verdict", "rule")


def export_bundle(service: BundleHost, project_id: str, job_id: str) -> tuple[str, bytes]:
    row = service.jobs.row(project_id, job_id)
    if row.status not in ("succeeded", "stopped", "failed") or row.summary is None:
        raise ServiceError(f"job is {row.status} without results; nothing to export",
                           status=409)
    ids = [v for value in row.inputs.values()
           for v in ([value] if isinstance(value, str) else value)]
    with service.db.read() as conn:
        found = {r.id: r for r in conn.execute(sa.select(files).where(
            files.c.id.in_(ids), files.c.project_id == project_id))}
    inputs = {}
    for name, value in row.inputs.items():
        values = [value] if isinstance(value, str) else value
        described = [{"id": v, "name": found[v].name, "kind": found[v].kind,
                      "sha256": found[v].sha256} if v in found else {"id": v} for v in values]
        inputs[name] = described[0] if isinstance(value, str) else described
    meta = {"format": BUNDLE_FORMAT, "job_id": row.id, "kind": row.kind,
            "endpoint": row.endpoint, "options": row.options, "inputs": inputs,
            "subject": predictions_sha256(row.subject or ""),
            "status": row.status, "exit_code": row.exit_code,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    members = {
        "bundle.json": _json(meta),
        "manifest.json": _json(_public_manifest(row.manifest)),
        "summary.json": _json(row.summary),
        "judgments.jsonl": _lines(service.jobs.judgments(project_id, job_id)),
        "calls.jsonl": _lines(service.jobs.calls(job_id)),
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return f"{row.id}.tar.gz", buffer.getvalue()


def bundle_subject(meta: dict[str, Any]) -> str | None:
    """The predictions sha256 a bundle's run judged (its ``subject``, or the sha256 of its
    predictions input), so labels of the imported run meet those of the same predictions;
    None when the bundle does not say."""
    inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
    predictions = inputs.get("predictions")
    for value in (meta.get("subject"),
                  predictions.get("sha256") if isinstance(predictions, dict) else None):
        if isinstance(value, str) and predictions_sha256(value):
            return value
    return None


def _public_manifest(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """The manifest without server paths (sources) or server-only options."""
    if manifest is None:
        return None
    clean = {k: v for k, v in manifest.items() if k not in ("sources", "options")}
    config = dict(clean.get("config") or {})
    config.pop("endpoint", None)
    clean["config"] = config
    return clean


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _lines(rows: Any) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def import_bundle(service: BundleHost, principal: Principal, stream: IO[bytes]) -> dict[str, Any]:
    """Create a finished job from a bundle exported by this or another server."""
    limit = service.settings.max_unpacked_bytes
    members = _read_members(stream, limit)
    missing = [m for m in ("bundle.json", "summary.json", "judgments.jsonl") if m not in members]
    if missing:
        raise ServiceError(f"not a dst-judge bundle: {missing[0]} is missing", status=422,
                           field="file")
    meta = _parse_json(members["bundle.json"], "bundle.json")
    if not isinstance(meta, dict) or meta.get("format") != BUNDLE_FORMAT:
        raise ServiceError(f"bundle.json: unknown bundle format (expected {BUNDLE_FORMAT})",
                           status=422, field="format")
    if meta.get("kind") not in ("evaluate", "retry-errors"):
        raise ServiceError("bundle.json: only judge runs (evaluate, retry-errors) import",
                           status=422, field="kind")
    summary = _parse_json(members["summary.json"], "summary.json")
    if not isinstance(summary, dict):
        raise ServiceError("summary.json: must hold a JSON object", status=422, field="summary")
    rows = _parse_rows(members["judgments.jsonl"], "judgments.jsonl", check=True)
    calls = _parse_rows(members.get("calls.jsonl", b""), "calls.jsonl", check=False)
    for line, call in enumerate(calls, start=1):
        if not isinstance(call.get("custom_id"), str):
            raise ServiceError(f"calls.jsonl:{line}: a call lacks its custom_id", status=422,
                               field="custom_id")
    manifest = _parse_json(members["manifest.json"], "manifest.json") \
        if "manifest.json" in members else None
    moment = time.time()
    job_id = new_id("job")
    options = meta.get("options") if isinstance(meta.get("options"), dict) else {}
    inputs = {"bundle": {"job_id": str(meta.get("job_id")), "inputs": meta.get("inputs")}}
    subject = bundle_subject(meta)
    usage = summary.get("tokens") if isinstance(summary.get("tokens"), dict) else {}
    tokens_used = sum(int(usage.get(k, 0) or 0) for k in ("prompt_tokens", "completion_tokens")
                      if isinstance(usage.get(k, 0), int))
    record = {"id": job_id, "project_id": principal.project_id,
              "token_id": principal.token_id, "kind": "evaluate", "mode": "live",
              "status": "succeeded", "endpoint": None, "inputs": inputs, "options": options,
              "created_at": moment, "started_at": moment, "finished_at": moment,
              "updated_at": moment, "attempts": 0, "cancel_requested": False,
              "exit_code": 1 if summary.get("error_turns") else 0,
              "summary": summary, "manifest": manifest, "cost_usd": 0.0,
              "tokens_used": tokens_used, "imported": True,
              "progress": {"total": len(calls), "done": len(calls)}, "subject": subject}
    with service.db.write() as conn:
        conn.execute(jobs.insert().values(**record))
        if rows:
            conn.execute(judgments.insert(),
                         [judgment_row(job_id, i, r) for i, r in enumerate(rows)])
        if calls:
            conn.execute(job_calls.insert(), [{"job_id": job_id, "custom_id": c["custom_id"],
                                               "record": c} for c in
                                              {c["custom_id"]: c for c in calls}.values()])
    return service.jobs.get(principal.project_id, job_id)


def _read_members(stream: IO[bytes], limit: int) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=stream, mode="r:gz") as tar:
            for info in tar:
                if info.name not in MEMBERS or not info.isfile():
                    continue
                if info.size > limit:
                    raise ServiceError(f"{info.name} is larger than the server's limit",
                                       status=413)
                handle = tar.extractfile(info)
                if handle is not None:
                    members[info.name] = handle.read(limit + 1)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ServiceError(f"not a readable .tar.gz bundle: {exc}", status=422,
                           field="file") from None
    return members


def _parse_json(data: bytes, name: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ServiceError(f"{name}: invalid JSON ({exc})", status=422, field=name) from None


def _parse_rows(data: bytes, name: str, *, check: bool) -> list[dict[str, Any]]:
    rows = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ServiceError(f"{name}: not UTF-8", status=422, field=name) from None
    for line, item in enumerate(text.split("\n"), start=1):
        if not item.strip():
            continue
        try:
            row = json.loads(item)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ServiceError(f"{name}:{line}: invalid JSON ({exc})", status=422,
                               field=name) from None
        if not isinstance(row, dict):
            raise ServiceError(f"{name}:{line}: not a JSON object", status=422, field=name)
        if check:
            for wanted in _ROW_FIELDS:
                if wanted not in row:
                    raise ServiceError(f"{name}:{line}: a judgment row lacks this field",
                                       status=422, field=wanted)
        rows.append(row)
    if check and not rows:
        raise ServiceError(f"{name}: no judgment rows", status=422, field=name)
    return rows
