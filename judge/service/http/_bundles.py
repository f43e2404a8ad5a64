"""Export a finished job as a bundle another server can import: a ``.tar.gz`` holding
``bundle.json`` (format, kind, options, the inputs' names and sha256, the ``subject``: the
predictions sha256 the run judged, which keys human labels), ``manifest.json``,
``summary.json``, ``judgments.jsonl`` and the run log ``calls.jsonl`` (so the paid replies
travel with the results). Inputs themselves are not included, only their digests.

Import reads only those members, as regular files, all of them together within the server's
unpacked-size limit, and checks every judgment row the way ``load_run`` does.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, Protocol

import sqlalchemy as sa

from ..._errors import ServiceError
from ..auth import Principal, new_id
from ..db import (
    Database,
    JudgmentRecord,
    ServiceSettings,
    UploadCaps,
    files,
    job_calls,
    jobs,
    judgment_row,
    judgments,
)
from ..jobs import (
    WITH_RESULTS,
    JobStatus,
    JobStore,
    PublicJob,
    check_bundle_options,
    new_job_status,
)
from ..storage import bounded_info, predictions_sha256, unpack_upload


class BundleHost(Protocol):
    """What export and import need of the service (``_app.Service`` has it; this module does
    not import the app, which imports it)."""

    settings: ServiceSettings
    db: Database
    jobs: JobStore

BUNDLE_FORMAT = 1
MEMBERS = ("bundle.json", "manifest.json", "summary.json", "judgments.jsonl", "calls.jsonl")
_ROW_FIELDS = ("dialogue_id", "turn_index", "verdict", "rule")
_BATCH = 500
INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1


def export_bundle(service: BundleHost, project_id: str, job_id: str) -> tuple[str, bytes]:
    row = service.jobs.row(project_id, job_id)
    if row.status not in WITH_RESULTS or row.summary is None:
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


def _object(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def bundle_subject(meta: dict[str, Any]) -> str | None:
    """The predictions sha256 a bundle's run judged (its ``subject``, or the sha256 of its
    predictions input), so labels of the imported run meet those of the same predictions;
    None when the bundle does not say."""
    inputs = _object(meta.get("inputs"))
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


def _lines(rows: Iterable[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def import_bundle(service: BundleHost, principal: Principal, stream: IO[bytes]
                  ) -> PublicJob:
    """Create a finished job from a bundle exported by this or another server.

    The bundle is unpacked to disk under the upload caps (its members together within the
    unpacked cap, the compression ratio, one line or document within the record cap), every
    member is checked (no NaN or Infinity anywhere, row fields of the right types) before
    the one transaction that writes the job, its judgments and calls; rows are read from
    disk a batch at a time."""
    caps = service.settings.upload_caps()
    scratch = service.settings.data_dir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        members = _unpack_members(stream, Path(folder), caps)
        missing = [m for m in ("bundle.json", "summary.json", "judgments.jsonl")
                   if m not in members]
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
            raise ServiceError("summary.json: must hold a JSON object", status=422,
                               field="summary")
        bounded_info({"inputs": meta.get("inputs")}, "bundle.json")  # every job listing
        if isinstance(summary.get("rule"), dict):  # shows these (the headline's versions)
            bounded_info({"rule": list(summary["rule"])}, "summary.json")
        manifest = (_parse_json(members["manifest.json"], "manifest.json")
                    if "manifest.json" in members else None)
        judged = members["judgments.jsonl"]
        calls = members.get("calls.jsonl")
        total = sum(1 for _ in _rows(judged, "judgments.jsonl", check=True))
        if not total:
            raise ServiceError("judgments.jsonl: no judgment rows", status=422,
                               field="judgments.jsonl")
        last_of = _last_calls(calls)
        given = meta.get("options")
        options, endpoint = check_bundle_options({} if given is None else given,
                                                 service.settings)
        record = _job_record(principal, meta, summary, manifest, len(last_of))
        record.update(options=options, endpoint=endpoint)
        with service.db.write() as conn:
            conn.execute(jobs.insert().values(**record))
            _insert_rows(conn, record["id"], judged, calls, last_of)
    return service.jobs.get(principal.project_id, record["id"])


def _job_record(principal: Principal, meta: dict[str, Any], summary: dict[str, Any],
                manifest: Any, calls: int) -> dict[str, Any]:
    moment = time.time()
    inputs = {"bundle": {"job_id": str(meta.get("job_id"))[:100], "inputs": meta.get("inputs")}}
    usage = _object(summary.get("tokens"))
    tokens_used = sum(value for key in ("prompt_tokens", "completion_tokens")
                      if _whole(value := usage.get(key, 0), 0, INT64_MAX))
    return {"id": new_id("job"), "project_id": principal.project_id,
            "token_id": principal.token_id, "kind": "evaluate", "mode": "live",
            "status": new_job_status(JobStatus.SUCCEEDED), "endpoint": None, "inputs": inputs,
            "options": {},
            "created_at": moment, "started_at": moment, "finished_at": moment,
            "updated_at": moment, "attempts": 0, "cancel_requested": False,
            "exit_code": 1 if summary.get("error_turns") else 0,
            "summary": summary, "manifest": manifest, "cost_usd": 0.0,
            "tokens_used": min(tokens_used, INT64_MAX), "imported": True,
            "progress": {"total": calls, "done": calls}, "subject": bundle_subject(meta)}


def _insert_rows(conn: Any, job_id: str, judged: Path, calls: Path | None,
                 last_of: dict[str, int]) -> None:
    """The judgments and the calls (the last line of each custom_id), a batch at a time."""
    batch: list[JudgmentRecord] = []
    for seq, row in enumerate(_rows(judged, "judgments.jsonl", check=True)):
        batch.append(judgment_row(job_id, seq, row))
        if len(batch) >= _BATCH:
            conn.execute(judgments.insert(), batch)
            batch = []
    if batch:
        conn.execute(judgments.insert(), batch)
    logged: list[dict[str, Any]] = []
    for line, call in enumerate(_rows(calls, "calls.jsonl", check=False), start=1):
        if last_of.get(call["custom_id"]) != line:
            continue
        logged.append({"job_id": job_id, "custom_id": call["custom_id"], "record": call})
        if len(logged) >= _BATCH:
            conn.execute(job_calls.insert(), logged)
            logged = []
    if logged:
        conn.execute(job_calls.insert(), logged)


def _last_calls(calls: Path | None) -> dict[str, int]:
    """custom_id → the number of its last row in calls.jsonl (a later row replaces one)."""
    last: dict[str, int] = {}
    for line, call in enumerate(_rows(calls, "calls.jsonl", check=False), start=1):
        custom_id = call.get("custom_id")
        if not isinstance(custom_id, str) or not 0 < len(custom_id) <= 300:
            raise ServiceError(f"calls.jsonl:{line}: a call lacks its custom_id (a string of "
                               "1 to 300 characters)", status=422, field="custom_id")
        last[custom_id] = line
    return last


def _unpack_members(stream: IO[bytes], folder: Path, caps: UploadCaps) -> dict[str, Path]:
    """Unpack the .tar.gz to ``folder`` under the caps and copy out the members a bundle
    has (regular files only); returns name → path."""
    tar_path = folder / "bundle.tar"
    unpack_upload(stream, tar_path, folder / "bundle.packed",
                  replace(caps, record=caps.unpacked))  # a tar is not text: no line cap
    members: dict[str, Path] = {}
    try:
        with tarfile.open(tar_path, mode="r:") as tar:
            for info in tar:
                if info.name not in MEMBERS or not info.isfile() or info.name in members:
                    continue
                source = tar.extractfile(info)
                if source is None:
                    continue
                target = folder / f"member-{len(members)}"
                with target.open("wb") as out:
                    _copy_member(source, out, info.name, caps)
                members[info.name] = target
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ServiceError(f"not a readable .tar.gz bundle: {exc}", status=422,
                           field="file") from None
    return members


def _copy_member(source: IO[bytes], out: IO[bytes], name: str, caps: UploadCaps) -> None:
    """One member to disk; a line (or a whole JSON document) over the record cap is 413."""
    document = name.endswith(".json")
    written = line = 0
    while block := source.read(1 << 16):
        written += len(block)
        first = block.find(b"\n")
        longest = line + (len(block) if first < 0 else first)
        line = longest if first < 0 else len(block) - block.rfind(b"\n") - 1
        if (written if document else max(longest, line)) > caps.record:
            what = "document" if document else "line"
            raise ServiceError(f"{name}: a {what} is larger than the server's limit of "
                               f"{caps.record // (1024 * 1024)} MB", status=413)
        out.write(block)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (NaN and Infinity are refused)")


def _loads(text: str | bytes) -> Any:
    """JSON without NaN or Infinity (which the database and every client would choke on)."""
    return json.loads(text, parse_constant=_no_constant)


def _parse_json(path: Path, name: str) -> Any:
    try:
        return _loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ServiceError(f"{name}: invalid JSON ({exc})", status=422, field=name) from None


def _rows(path: Path | None, name: str, *, check: bool) -> Iterator[dict[str, Any]]:
    """The rows of a JSON Lines member, read from disk one line at a time and checked."""
    if path is None:
        return
    with path.open("rb") as handle:
        for line, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                row = _loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise ServiceError(f"{name}:{line}: invalid JSON ({exc})", status=422,
                                   field=name) from None
            if not isinstance(row, dict):
                raise ServiceError(f"{name}:{line}: not a JSON object", status=422, field=name)
            if check:
                _check_row(row, name, line)
            yield row


def _check_row(row: dict[str, Any], name: str, line: int) -> None:
    for wanted in _ROW_FIELDS:
        if wanted not in row:
            raise ServiceError(f"{name}:{line}: a judgment row lacks this field", status=422,
                               field=wanted)
    if not isinstance(row["dialogue_id"], str) or not 0 < len(row["dialogue_id"]) <= 300:
        raise ServiceError(f"{name}:{line}: dialogue_id must be a string of 1 to 300 "
                           "characters", status=422, field="dialogue_id")
    if not _whole(row["turn_index"], 0, INT32_MAX):
        raise ServiceError(f"{name}:{line}: turn_index must be a whole number from 0 to "
                           f"{INT32_MAX}", status=422, field="turn_index")


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
