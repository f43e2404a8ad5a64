"""The file store's unpacked copies on a replica's disk."""

from __future__ import annotations

import io
import threading
from concurrent.futures import ThreadPoolExecutor

from judge.service import Database
from judge.service.auth._auth import ensure_project
from judge.service.storage._files import FileStore
from tests.conftest import EXAMPLES

LIMIT = 10 * 2 ** 20


def test_jobs_that_unpack_one_file_at_once_each_get_the_whole_file(tmp_path):
    """Jobs on one replica that start together read the same inputs: each thread that finds
    no local copy unpacks one from the database; none may lose its copy to another's rename
    (a job failed with an internal error when two threads shared one temporary name)."""
    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    db.migrate()
    try:
        content = (EXAMPLES / "dialogues.jsonl").read_bytes()
        uploader = FileStore(db, tmp_path / "a", max_upload=LIMIT, max_unpacked=LIMIT)
        record, _ = uploader.add(ensure_project(db, "lab"), "dialogues", "dialogues.jsonl",
                                 io.BytesIO(content))
        for attempt in range(20):  # a replica whose disk has no copy yet, many times over
            replica = FileStore(db, tmp_path / f"b{attempt}", max_upload=LIMIT,
                                max_unpacked=LIMIT)
            start = threading.Barrier(8)

            def unpack(_: int, replica: FileStore = replica,
                       start: threading.Barrier = start) -> bytes:
                start.wait()
                return replica.local_path(record["sha256"]).read_bytes()

            with ThreadPoolExecutor(8) as pool:
                copies = list(pool.map(unpack, range(8)))
            assert copies == [content] * 8
            assert [p.name for p in replica.root.rglob("*")
                    if p.is_file()] == [record["sha256"]]  # no temporary file left behind
    finally:
        db.dispose()


def _store(db, folder, **caps):
    from judge.service.db._settings import UploadCaps

    limits = {"packed": LIMIT, "unpacked": LIMIT, **caps}
    return FileStore(db, folder, max_upload=LIMIT, max_unpacked=LIMIT,
                     caps=UploadCaps(**limits))


def _rows(db):
    import sqlalchemy as sa

    from judge.service.db._db import blobs, files

    with db.read() as conn:
        return [conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
                for t in (files, blobs)]


def test_a_projects_quota_stops_uploads_and_leaves_no_row(tmp_path):
    import pytest

    from judge._errors import ServiceError

    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    db.migrate()
    try:
        content = (EXAMPLES / "dialogues.jsonl").read_bytes()
        store = _store(db, tmp_path / "a", quota=len(content) + 100)
        lab, other = ensure_project(db, "lab"), ensure_project(db, "other")
        store.add(lab, "dialogues", "d.jsonl", io.BytesIO(content))
        with pytest.raises(ServiceError) as refused:
            store.add(lab, "dialogues", "d2.jsonl", io.BytesIO(content + b"\n"))
        assert refused.value.status == 413 and "quota" in refused.value.reason
        assert _rows(db) == [1, 1]
        store.add(other, "dialogues", "d.jsonl", io.BytesIO(content))  # a quota per project
    finally:
        db.dispose()


def test_a_document_over_the_record_cap_is_refused_but_long_json_lines_files_are_not(
        tmp_path):
    import json

    import pytest

    from judge._errors import ServiceError

    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    db.migrate()
    try:
        lab = ensure_project(db, "lab")
        schema = json.dumps(json.loads((EXAMPLES / "schema.json").read_text()), indent=2)
        store = _store(db, tmp_path / "a", record=len(schema) // 2)
        with pytest.raises(ServiceError) as refused:  # one document, parsed whole
            store.add(lab, "schema", "s.json", io.BytesIO(schema.encode()))
        assert refused.value.status == 413 and "per record" in refused.value.reason
        lines = (EXAMPLES / "dialogues.jsonl").read_bytes()
        longest = max(len(line) for line in lines.splitlines())
        store = _store(db, tmp_path / "b", record=longest + 1)
        record, new = store.add(lab, "dialogues", "d.jsonl", io.BytesIO(lines))
        assert new and record["info"]["dialogues"] == len(lines.splitlines())
        assert _rows(db) == [1, 1]
    finally:
        db.dispose()


def test_a_labels_upload_past_the_record_cap_is_refused_before_loading(tmp_path, monkeypatch):
    """Labels and samples are loaded whole, so their record count is capped first: a 1 MB
    upload of small label lines would otherwise make the API hold hundreds of MB."""
    import gzip
    import json

    import pytest

    from judge._errors import ServiceError
    from judge.service.storage import _files

    monkeypatch.setattr(_files, "MAX_LABEL_RECORDS", 100)
    loaded = []
    monkeypatch.setattr(_files, "load_labels", lambda path: loaded.append(path))
    lines = "".join(json.dumps({"dialogue_id": f"D{i}", "turn_index": 0, "label": 1,
                                "reviewer": "ana"}) + "\n" for i in range(101))
    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    db.migrate()
    try:
        store = _store(db, tmp_path / "a")
        lab = ensure_project(db, "lab")
        for kind in ("labels", "sample"):
            with pytest.raises(ServiceError) as refused:
                store.add(lab, kind, "l.jsonl.gz", io.BytesIO(gzip.compress(lines.encode())))
            assert refused.value.status == 413 and "at most 100 records" in refused.value.reason
        assert loaded == [] and _rows(db) == [0, 0]
    finally:
        db.dispose()


def test_a_labels_upload_that_is_not_text_is_a_422_not_a_server_error(tmp_path):
    """The record count before loading must not turn an unreadable file into a 500 (the
    loader's message names what is wrong)."""
    import pytest

    from judge._errors import ServiceError

    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    db.migrate()
    try:
        store = _store(db, tmp_path / "a")
        lab = ensure_project(db, "lab")
        for kind in ("labels", "sample"):
            with pytest.raises(ServiceError) as refused:
                store.add(lab, kind, "l.jsonl", io.BytesIO(b"\xff\xfe\x00 not text\n"))
            assert refused.value.status == 422, refused.value.reason
        assert _rows(db) == [0, 0]
    finally:
        db.dispose()
