"""The file store's unpacked copies on a replica's disk."""

from __future__ import annotations

import io
import threading
from concurrent.futures import ThreadPoolExecutor

from judge.service import Database
from judge.service._auth import ensure_project
from judge.service._files import FileStore
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
