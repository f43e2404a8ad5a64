"""Uploaded inputs: content-addressed (sha256 of the unpacked bytes), validated on upload with
the checks and messages of the CLI, kept in the database (so every replica can read them) and
unpacked on demand into a local file cache for the loaders.

A ``.gz`` upload is unpacked while it is checked, with a cap on the unpacked size, so a gzip
bomb is refused (413) instead of filling the disk.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa

from .._errors import DSTJudgeError, InputError, ServiceError
from .._io import replace_whole
from ..analysis import load_labels, load_sample
from ..data import load_dialogues, load_schema, validate_file
from ..method import load_rules
from ._auth import new_id
from ._db import Database, blobs, files, now

FILE_KINDS = ("schema", "dialogues", "predictions", "labels", "rules", "sample")
_CHUNK = 1 << 20
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str | None, kind: str) -> str:
    """A file name fit for messages and the local disk: no directories, no odd characters."""
    base = Path(str(name or "")).name
    cleaned = _SAFE_NAME.sub("_", base).strip("._")[:120]
    return cleaned or f"{kind}.jsonl"


class FileStore:
    """Blobs in the database, unpacked copies under ``<data_dir>/files``."""

    def __init__(self, db: Database, data_dir: Path, *, max_upload: int, max_unpacked: int
                 ) -> None:
        self.db = db
        self.root = data_dir / "files"
        self.tmp = data_dir / "tmp"
        self.max_upload = max_upload
        self.max_unpacked = max_unpacked

    # --- upload -----------------------------------------------------------------------------

    def add(self, project_id: str, kind: str, name: str | None, stream: IO[bytes],
            token_id: str | None = None) -> tuple[dict[str, Any], bool]:
        """Store and validate one upload; returns its record and whether it is new."""
        if kind not in FILE_KINDS:
            raise ServiceError(f"kind must be one of {', '.join(FILE_KINDS)}", status=422,
                               field="kind")
        clean = safe_name(name, kind)
        self.tmp.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.tmp) as folder:
            raw = Path(folder) / "upload.raw"
            digest, size = _copy_limited(stream, raw, self.max_upload,
                                         "the upload is larger than")
            plain = Path(folder) / clean
            gzipped = _is_gzip(raw)
            if gzipped:
                digest, unpacked = _gunzip_limited(raw, plain, self.max_unpacked)
            else:
                raw.rename(plain)
                unpacked = size
            info = validate_upload(kind, plain, folder)
            existing = self._find(project_id, kind, digest)
            if existing is not None:
                return existing, False
            packed = (raw.read_bytes() if gzipped
                      else gzip.compress(plain.read_bytes(), compresslevel=6))
            self._keep_local(digest, plain)
            record = {"id": new_id("file"), "project_id": project_id, "kind": kind,
                      "name": clean, "sha256": digest, "size": unpacked, "info": info,
                      "token_id": token_id, "created_at": now()}
            with self.db.write() as conn:
                has_blob = conn.execute(sa.select(blobs.c.sha256)
                                        .where(blobs.c.sha256 == digest)).first()
                if has_blob is None:
                    conn.execute(blobs.insert().values(sha256=digest, size=unpacked,
                                                       data=packed, created_at=now()))
                conn.execute(files.insert().values(**record))
        return public_file(record), True

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
        replace_whole(path, lambda part: part.write_bytes(gzip.decompress(packed)))
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


def public_file(row: Any) -> dict[str, Any]:
    data = dict(row._mapping) if hasattr(row, "_mapping") else dict(row)
    return {k: data[k] for k in ("id", "kind", "name", "sha256", "size", "info", "created_at")}


def validate_upload(kind: str, path: Path, folder: str) -> dict[str, Any]:
    """The CLI's checks on one file: every schema violation (as ``dst-judge validate``), then
    the loader's own checks (as ``evaluate``). Raises 422 with the messages; returns a short
    description of the content."""
    prefix = folder.rstrip("/") + "/"
    if kind in ("schema", "dialogues", "predictions", "labels", "sample"):
        try:
            problems = validate_file(kind, path, limit=20)  # type: ignore[arg-type]
        except DSTJudgeError as exc:
            raise upload_error(exc, prefix) from None
        if problems:
            first = problems[0]
            raise ServiceError(
                _strip(str(first), prefix) + (f" (and {len(problems) - 1} more problem(s))"
                                              if len(problems) > 1 else ""),
                status=422, field=first.field) from None
    try:
        if kind == "schema":
            schema = load_schema(path)
            return {"domains": len(schema.domains), "slots": len(schema.slot_names)}
        if kind == "dialogues":
            dialogues = load_dialogues(path)
            return {"dialogues": len(dialogues), "turns": dialogues.num_turns,
                    "versions": list(dialogues.versions)}
        if kind == "labels":
            labels = load_labels(path)
            return {"labels": len(labels.records), "annotators": list(labels.annotators)}
        if kind == "sample":
            sample = load_sample(path)
            return {**sample.describe(), "strata": len(sample.strata())}
        if kind == "rules":
            rules = load_rules(path)
            return {"source": Path(rules.source).name}
        return _describe_predictions(path)
    except DSTJudgeError as exc:
        raise upload_error(exc, prefix) from None


def _describe_predictions(path: Path) -> dict[str, Any]:
    import json

    from .._io import iter_jsonl_lines

    count, names = 0, set()
    for _, text in iter_jsonl_lines(path):
        count += 1
        record = json.loads(text)
        if isinstance(record, dict) and isinstance(record.get("system_name"), str):
            names.add(record["system_name"])
    return {"dialogues": count, "system_name": names.pop() if len(names) == 1 else None}


def _strip(text: str, prefix: str) -> str:
    return text.replace(prefix, "")


def upload_error(exc: DSTJudgeError, prefix: str, status: int = 422) -> ServiceError:
    """A library error as a 422, with the server's temporary folder left out of the text."""
    field = exc.field if isinstance(exc, InputError) else None
    return ServiceError(_strip(str(exc), prefix), status=status, field=field)


def _copy_limited(stream: IO[bytes], target: Path, limit: int, too_big: str
                  ) -> tuple[str, int]:
    """Copy ``stream`` to ``target`` up to ``limit`` bytes (413 beyond: "<too_big> the
    server's limit"), hashing as it goes; returns the sha256 and the size."""
    digest = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        while block := stream.read(_CHUNK):
            size += len(block)
            if size > limit:
                raise ServiceError(f"{too_big} the server's limit of "
                                   f"{limit // (1024 * 1024)} MB", status=413)
            digest.update(block)
            out.write(block)
    return digest.hexdigest(), size


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _gunzip_limited(source: Path, target: Path, limit: int) -> tuple[str, int]:
    try:
        with gzip.open(source, "rb") as packed:
            return _copy_limited(packed, target, limit, "the upload unpacks to more than")
    except (OSError, EOFError, zlib.error) as exc:
        raise ServiceError(f"not a valid gzip file: {exc}", status=422, field="file") from None


