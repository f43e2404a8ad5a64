"""Uploaded inputs: content-addressed (sha256 of the unpacked bytes), validated on upload with
the checks and messages of the CLI, kept in the database (so every replica can read them) and
unpacked on demand into a local file cache for the loaders.

A ``.gz`` upload is unpacked while it is checked (``_unpack``), with a cap on the unpacked
size, so a gzip bomb is refused (413) instead of filling the disk. One layer only: content that
is gzip again is refused (422), so what is stored, counted against the caps and the quota, and
read by the loaders is the content itself. What an upload's ``info`` says of it (names,
versions, slot names) is bounded too, since every file listing repeats it.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa
from pydantic import ValidationError

from ..._errors import DSTJudgeError, InputError, ServiceError
from ..._io import (
    MAX_NAME_CHARS,
    iter_jsonl_lines,
    parse_line,
    replace_whole,
    validation_error,
)
from ...analysis import load_labels, load_sample
from ...data import DialogueScan, PredDialogue, load_schema, read_corrections, read_foreign
from ...method import load_rules
from ..auth import new_id
from ..db import Database, UploadCaps, blobs, files, now
from ._slotcheck import upload_slot_names
from ._unpack import _CHUNK, _quota_error, unpack_upload

FILE_KINDS = ("schema", "dialogues", "predictions", "labels", "rules", "sample", "corrections")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str | None, kind: str) -> str:
    """A file name fit for messages and the local disk: no directories, no odd characters."""
    base = Path(str(name or "")).name
    cleaned = _SAFE_NAME.sub("_", base).strip("._")[:120]
    return cleaned or f"{kind}.jsonl"


class FileStore:
    """Blobs in the database, unpacked copies under ``<data_dir>/files``."""

    def __init__(self, db: Database, data_dir: Path, *, max_upload: int, max_unpacked: int,
                 caps: UploadCaps | None = None) -> None:
        self.db = db
        self.root = data_dir / "files"
        self.tmp = data_dir / "tmp"
        self.caps = caps or UploadCaps(packed=max_upload, unpacked=max_unpacked)
        self.max_upload = self.caps.packed
        self.max_unpacked = self.caps.unpacked

    # --- upload -----------------------------------------------------------------------------

    def add(self, project_id: str, kind: str, name: str | None, stream: IO[bytes],
            token_id: str | None = None) -> tuple[dict[str, Any], bool]:
        """Store and validate one upload; returns its record and whether it is new.

        The upload is unpacked as it is read, under the caps (size as sent, unpacked size,
        compression ratio, one JSON record, the project's quota), and checked record by
        record, so neither memory nor disk grows with what a small request claims to hold."""
        if kind not in FILE_KINDS:
            raise ServiceError(f"kind must be one of {', '.join(FILE_KINDS)}", status=422,
                               field="kind")
        clean = safe_name(name, kind)
        caps = self._caps_left(project_id)
        self.tmp.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.tmp) as folder:
            plain = Path(folder) / clean
            packed_path = Path(folder) / "packed.gz"
            unpacked = unpack_upload(stream, plain, packed_path, caps)
            info = bounded_info(validate_upload(kind, plain, folder))
            existing = self._find(project_id, kind, unpacked.sha256)
            if existing is not None:
                return existing, False
            self._keep_local(unpacked.sha256, plain)
            record = {"id": new_id("file"), "project_id": project_id, "kind": kind,
                      "name": clean, "sha256": unpacked.sha256, "size": unpacked.size,
                      "info": info, "token_id": token_id, "created_at": now()}
            with self.db.write() as conn:
                self._check_quota(conn, project_id, unpacked.size)
                has_blob = conn.execute(sa.select(blobs.c.sha256)
                                        .where(blobs.c.sha256 == unpacked.sha256)).first()
                if has_blob is None:
                    conn.execute(blobs.insert().values(
                        sha256=unpacked.sha256, size=unpacked.size,
                        data=packed_path.read_bytes(), created_at=now()))
                conn.execute(files.insert().values(**record))
        return public_file(record), True

    def used_bytes(self, conn: sa.Connection, project_id: str) -> int:
        """Unpacked bytes of every file of the project (what its quota counts)."""
        return int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(files.c.size), 0))
                                .where(files.c.project_id == project_id)).scalar() or 0)

    def _caps_left(self, project_id: str) -> UploadCaps:
        """The caps of this upload: the unpacked cap lowered to what the quota has left."""
        if self.caps.quota is None:
            return self.caps
        with self.db.read() as conn:
            left = self.caps.quota - self.used_bytes(conn, project_id)
        if left <= 0:
            raise _quota_error(self.caps.quota)
        if left >= self.caps.unpacked:
            return self.caps
        return replace(self.caps, unpacked=left, quota_bound=True)

    def _check_quota(self, conn: sa.Connection, project_id: str, size: int) -> None:
        """Again inside the write: uploads of one project that ran at once share the quota."""
        if self.caps.quota is not None and self.used_bytes(conn, project_id) + size > \
                self.caps.quota:
            raise _quota_error(self.caps.quota)

    def _find(self, project_id: str, kind: str, digest: str) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute(sa.select(files).where(
                files.c.project_id == project_id, files.c.kind == kind,
                files.c.sha256 == digest)).first()
        return public_file(row) if row is not None else None

    # --- reading ----------------------------------------------------------------------------

    def get(self, project_id: str, file_id: str) -> dict[str, Any]:
        """The file record; 404 when it does not exist in this project."""
        with self.db.read() as conn:
            row = conn.execute(sa.select(files).where(files.c.id == file_id,
                                                      files.c.project_id == project_id)).first()
        if row is None:
            raise ServiceError(f"no file {file_id!r} in this project", status=404)
        return public_file(row)

    def list(self, project_id: str, *, kind: str | None = None, limit: int = 100,
             offset: int = 0) -> list[dict[str, Any]]:
        query = (sa.select(files).where(files.c.project_id == project_id)
                 .order_by(files.c.created_at.desc()).limit(limit).offset(offset))
        if kind:
            query = query.where(files.c.kind == kind)
        with self.db.read() as conn:
            return [public_file(row) for row in conn.execute(query)]

    def local_path(self, sha256: str) -> Path:
        """The unpacked content on this machine's disk (fetched from the database once)."""
        path = self.root / sha256[:2] / sha256
        if path.is_file():
            return path
        with self.db.read() as conn:
            packed = conn.execute(sa.select(blobs.c.data)
                                  .where(blobs.c.sha256 == sha256)).scalar()
        if packed is None:
            raise ServiceError(f"the content {sha256} is gone (deleted)", status=410)
        replace_whole(path, lambda part: _gunzip_to(packed, part))
        return path

    def open_content(self, sha256: str) -> Iterable[bytes]:
        path = self.local_path(sha256)
        with path.open("rb") as handle:
            while block := handle.read(_CHUNK):
                yield block

    def _keep_local(self, sha256: str, plain: Path) -> None:
        path = self.root / sha256[:2] / sha256
        if not path.is_file():
            replace_whole(path, lambda part: shutil.copyfile(plain, part))

    # --- deleting ---------------------------------------------------------------------------

    def delete(self, project_id: str, file_id: str) -> None:
        record = self.get(project_id, file_id)
        with self.db.write() as conn:
            conn.execute(files.delete().where(files.c.id == file_id))
            still = conn.execute(sa.select(sa.func.count()).select_from(files)
                                 .where(files.c.sha256 == record["sha256"])).scalar()
            if not still:
                conn.execute(blobs.delete().where(blobs.c.sha256 == record["sha256"]))
        if not still:
            (self.root / record["sha256"][:2] / record["sha256"]).unlink(missing_ok=True)


def _gunzip_to(packed: bytes, target: Path) -> None:
    """Unpack a stored blob block by block (never its unpacked size in memory)."""
    with target.open("wb") as out:
        pending = packed
        while pending:
            unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not unpacker.eof:
                block = unpacker.decompress(pending, _CHUNK)
                pending = unpacker.unconsumed_tail
                if not block and not pending:
                    break
                out.write(block)
            pending = unpacker.unused_data


def public_file(row: sa.Row[Any] | Mapping[str, Any]) -> dict[str, Any]:
    data = dict(row._mapping) if hasattr(row, "_mapping") else dict(row)
    return {k: data[k] for k in ("id", "kind", "name", "sha256", "size", "info", "created_at")}


def validate_upload(kind: str, path: Path, folder: str) -> dict[str, Any]:
    """The loaders' checks on one file (the CLI's messages, naming file, line and field),
    record by record where the file is a list of records: dialogues and predictions (each
    record as ``evaluate`` reads it; predictions meet their dialogues in a job), labels and
    review samples (their loaders), a schema or a rules file (one document each, within the
    record cap). Raises 422 with the message; returns a short description of the content."""
    prefix = folder.rstrip("/") + "/"
    if kind in ("labels", "sample", "corrections"):
        _refuse_past_record_cap(kind, path)
    try:
        if kind == "dialogues":
            return _describe_dialogues(path)
        if kind == "schema":
            schema = load_schema(path)
            return {"domains": len(schema.domains), "slots": len(schema.slot_names)}
        if kind == "labels":
            labels = load_labels(path)
            return {"labels": len(labels.records), "annotators": list(labels.annotators)}
        if kind == "sample":
            sample = load_sample(path)
            return {**sample.describe(), "strata": len(sample.strata())}
        if kind == "corrections":
            return describe_corrections(path)
        if kind == "rules":
            rules = load_rules(path)
            return {"source": Path(rules.source).name}
        return _describe_predictions(path)
    except DSTJudgeError as exc:
        raise upload_error(exc, prefix) from None


MAX_INFO_BYTES = 64 * 1024
"""Largest ``info`` of one file, as JSON: every file listing repeats it (a real one is well
under 10 KB: counts, a few names, up to 500 slot names)."""


def bounded_info(info: dict[str, Any], where: str = "info") -> dict[str, Any]:
    """``info`` when every string in it (names, versions, slot names; keys too) is at most
    :data:`MAX_NAME_CHARS` long and the whole at most :data:`MAX_INFO_BYTES`; otherwise 422
    (a long string, naming where in ``info``) or 413. The loaders refuse most long names
    first, naming line and field; this catches what reaches ``info`` (or a job listing: an
    imported bundle's ``where`` is its member) by any other way."""
    stack: list[tuple[str, Any]] = [(where, info)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and len(item) > MAX_NAME_CHARS:
            raise _long_name(path, len(item))
        if isinstance(item, dict):
            for key, inner in item.items():
                if len(str(key)) > MAX_NAME_CHARS:
                    raise _long_name(f"{path} (a key)", len(str(key)))
                stack.append((f"{path}.{key}", inner))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", inner) for index, inner in enumerate(item))
    size = len(json.dumps(info, ensure_ascii=False).encode("utf-8"))
    if size > MAX_INFO_BYTES:
        largest = max(info, key=lambda k: len(json.dumps(info[k], ensure_ascii=False)))
        raise ServiceError(f"{where} is too large to list with every file or job ({size:,} "
                           f"bytes, most in {largest}; at most {MAX_INFO_BYTES:,})",
                           status=413, field=f"{where}.{largest}")
    return info


def _long_name(where: str, length: int) -> ServiceError:
    return ServiceError(f"a name is {length:,} characters long (at {where}); names are at "
                        f"most {MAX_NAME_CHARS}", status=422, field=where)


MAX_LABEL_RECORDS = 50_000
"""Records one labels, sample or corrections upload may hold. Their loaders keep every record (about
0.65 KB each in memory), and such files compress 25:1, so without a count a 1 MB upload could
make the API hold some 250 MB. 50,000 human labels is weeks of a person's work; a labelling
sample is a few hundred turns."""


def _refuse_past_record_cap(kind: str, path: Path) -> None:
    """Count the records first (no parsing), so a long labels or sample file is refused
    before any is loaded."""
    count = 0
    lines = iter_jsonl_lines(path)
    while True:
        try:
            next(lines)
        except StopIteration:
            return
        except DSTJudgeError:  # not lines of JSON text: the loader names the problem
            return
        count += 1
        if count > MAX_LABEL_RECORDS:
            raise ServiceError(f"a {kind} upload holds at most {MAX_LABEL_RECORDS:,} records; "
                               "split the file", status=413, field="file")


def describe_corrections(path: Path) -> dict[str, Any]:
    """Every correction checked as ``dst-judge validate corrections`` reads it (file, line
    and field in the message); an empty file is refused, as the CLI refuses it."""
    found = read_corrections([path])
    if not found:
        raise InputError("no corrections in the file (every line is blank)", path=path)
    return {"corrections": len(found),
            "versions": sorted({c.correction.gold for c in found}),
            "reviewers": sorted({c.correction.reviewer for c in found}),
            "adjudicated": sum(c.correction.adjudicated for c in found)}


def _describe_dialogues(path: Path) -> dict[str, Any]:
    """Every dialogue checked as the loader checks it, one at a time (never the whole file
    in memory)."""
    scan = DialogueScan(path)
    count = turns = 0
    for dialogue in scan:
        count += 1
        turns += len(dialogue.turns)
    if not count:
        raise InputError("no dialogues in file", path=path)
    return {"dialogues": count, "turns": turns, "versions": list(scan.versions or ())}


def _describe_predictions(path: Path) -> dict[str, Any]:
    """Every predicted dialogue checked as the loader reads it, one at a time."""
    found, _, read = read_foreign(path, "predictions")
    count, names = 0, set()
    if found.name == "native":
        records = (parse_line(PredDialogue, text, path=path, line=line)
                   for line, text in iter_jsonl_lines(path))
    else:
        records = (_converted(PredDialogue, record, where, path) for where, record in read())
    for record in records:
        count += 1
        if record.system_name:
            names.add(record.system_name)
    if not count:
        raise InputError("no predictions in file", path=path)
    return {"dialogues": count, "system_name": names.pop() if len(names) == 1 else None,
            "slot_names": upload_slot_names(path)}


def _converted(model: Any, record: object, where: str, path: Path) -> Any:
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        error = validation_error(exc, path=path, line=None)
        raise InputError(error.reason, path=path,
                         field=f"{where}.{error.field}" if error.field else where) from None


def _strip(text: str, prefix: str) -> str:
    return text.replace(prefix, "")


def upload_error(exc: DSTJudgeError, prefix: str, status: int = 422) -> ServiceError:
    """A library error as a 422, with the server's temporary folder left out of the text."""
    field = exc.field if isinstance(exc, InputError) else None
    return ServiceError(_strip(str(exc), prefix), status=status, field=field)
