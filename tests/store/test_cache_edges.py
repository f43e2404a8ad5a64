"""Edges of the reply cache (judge.store._cache), in-process: the key and what it covers, the
cache directory's ledger path, the import of an old diskcache cache (each record as the
chat.completion it came from; a broken old cache is skipped, never fatal) and ``clear_cache``."""

from __future__ import annotations

import json

import diskcache
import pytest

from judge._digest import text_digest
from judge._errors import StoreError
from judge.store import cache_key
from judge.store._cache import (
    _as_chat_completion,
    cache_ledger_path,
    clear_cache,
    migrate_diskcache,
    open_cache,
)
from judge.store._ledger import SQLiteLedger

RECORD = {"text": '{"ok": 1}', "finish_reason": "stop", "refusal": "no", "model": "m-1",
          "response_id": "resp-9",
          "usage": {"prompt_tokens": 11, "completion_tokens": 3, "cached_prompt_tokens": 7}}


def test_the_key_is_the_digest_of_endpoint_body_template_and_schema():
    """The key format is the cache's contract: a changed key would re-pay every request."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_schema", "x": 1}}
    assert cache_key("https://e/v1", body, "t1") == text_digest({
        "endpoint": "https://e/v1", "body": body, "template_hash": "t1",
        "response_schema_hash": text_digest({"type": "json_schema", "x": 1})})
    plain = {"model": "m"}
    assert cache_key("e", plain, "t") == text_digest({
        "endpoint": "e", "body": plain, "template_hash": "t",
        "response_schema_hash": text_digest({})})
    keys = {cache_key("e", plain, "t"), cache_key("f", plain, "t"),
            cache_key("e", plain, "u"), cache_key("e", {"model": "n"}, "t")}
    assert len(keys) == 4


def test_the_ledger_path_is_inside_the_directory_and_a_file_is_refused(tmp_path):
    assert cache_ledger_path(tmp_path / "new") == tmp_path / "new" / "ledger.sqlite3"
    assert cache_ledger_path(str(tmp_path)) == tmp_path / "ledger.sqlite3"
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError) as caught:
        cache_ledger_path(tmp_path / "file")
    assert str(caught.value) == (f"{tmp_path / 'file'}: the cache directory is a file; pass "
                                 "another --cache-dir or --no-cache")


def test_an_old_record_becomes_the_chat_completion_it_came_from():
    """Every field of the old record lands where the OpenAI reply had it."""
    assert json.loads(_as_chat_completion(RECORD)) == {
        "id": "resp-9", "object": "chat.completion", "model": "m-1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": '{"ok": 1}',
                                 "refusal": "no"}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3,
                  "prompt_tokens_details": {"cached_tokens": 7}},
        "x_dst_judge_imported": "diskcache"}


def test_a_sparse_old_record_gets_zero_usage_and_keeps_non_ascii_text():
    raw = _as_chat_completion({"text": "Grüße"})
    assert "Grüße".encode() in raw  # UTF-8 as is, not \\u escapes
    reply = json.loads(raw)
    assert reply["usage"] == {"prompt_tokens": 0, "completion_tokens": 0,
                              "prompt_tokens_details": {"cached_tokens": 0}}
    assert reply["id"] is None and reply["model"] is None
    assert reply["choices"][0]["finish_reason"] is None
    assert reply["choices"][0]["message"]["refusal"] is None
    assert json.loads(_as_chat_completion({"usage": None}))["usage"]["prompt_tokens"] == 0


def _old_cache(folder, items):
    old = diskcache.Cache(str(folder))
    for key, value in items.items():
        old.set(key, value)
    old.close()


def test_migration_imports_dict_records_once_and_renames_the_old_file(tmp_path):
    """Dict records are imported with origin diskcache; anything else is skipped; the old file
    becomes cache.db.imported and a second open imports nothing."""
    _old_cache(tmp_path, {"k1": RECORD, "k2": {"text": "b"}, "junk": "a string", 7: [1]})
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        assert migrate_diskcache(tmp_path, ledger) == 2
        assert ledger.keys() == {"k1", "k2"}
        reply = ledger.get("k1")
        assert reply.origin == "diskcache" and reply.status == 200
        assert json.loads(reply.content)["id"] == "resp-9"
    finally:
        ledger.close()
    assert not (tmp_path / "cache.db").exists()
    assert (tmp_path / "cache.db.imported").is_file()


def test_open_cache_imports_an_old_cache_and_leaves_a_plain_directory_alone(tmp_path):
    _old_cache(tmp_path / "c", {"k": RECORD})
    ledger = open_cache(tmp_path / "c")
    try:
        assert ledger.keys() == {"k"}
    finally:
        ledger.close()
    assert (tmp_path / "c" / "cache.db.imported").is_file()
    ledger = open_cache(tmp_path / "d", lease=5.0)
    try:
        assert ledger.keys() == set() and not (tmp_path / "d" / "cache.db.imported").exists()
    finally:
        ledger.close()


def test_a_broken_old_cache_is_skipped_not_fatal(tmp_path):
    """An unreadable cache.db neither stops the run nor is renamed (``cache clear`` removes
    it)."""
    (tmp_path / "cache.db").write_bytes(b"garbage, not SQLite" * 200)
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        assert migrate_diskcache(tmp_path, ledger) == 0
    finally:
        ledger.close()
    ledger = open_cache(tmp_path)  # the same through the front door
    try:
        assert ledger.keys() == set()
    finally:
        ledger.close()
    assert (tmp_path / "cache.db").is_file()
    assert not (tmp_path / "cache.db.imported").exists()


def test_an_import_that_fails_leaves_the_old_cache_in_place(tmp_path):
    _old_cache(tmp_path, {"k": RECORD})

    class Failing:
        def import_replies(self, replies, *, origin):
            raise OSError("disk full")

    assert migrate_diskcache(tmp_path, Failing()) == 0
    assert (tmp_path / "cache.db").is_file()
    assert not (tmp_path / "cache.db.imported").exists()


def test_open_cache_closes_its_ledger_when_the_import_raises(tmp_path, monkeypatch):
    import judge.store._cache as cache_module

    _old_cache(tmp_path, {"k": RECORD})
    closed = []
    monkeypatch.setattr(SQLiteLedger, "close", lambda self: closed.append(self))

    def interrupted(cache_dir, ledger):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_module, "migrate_diskcache", interrupted)
    with pytest.raises(KeyboardInterrupt):
        open_cache(tmp_path)
    assert len(closed) == 1


def test_clear_cache_counts_replies_and_names_each_old_file(tmp_path):
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        ledger.import_replies([("a", b"1"), ("b", b"2")], origin="x")
    finally:
        ledger.close()
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db.imported"):
        (tmp_path / name).write_bytes(b"old")
    removed, notes = clear_cache(tmp_path)
    assert removed == 2
    assert notes == [f"deleted the old reply cache {tmp_path / 'cache.db.imported'}",
                     f"deleted the old reply cache {tmp_path / 'cache.db'}"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("cache")) == []
    assert clear_cache(tmp_path) == (0, [])


def test_clear_cache_deletes_an_unreadable_ledger_and_says_so(tmp_path):
    (tmp_path / "ledger.sqlite3").write_bytes(b"garbage, not SQLite" * 200)
    removed, notes = clear_cache(tmp_path)
    assert removed == 0 and len(notes) == 1
    assert notes[0].startswith(f"deleted the unreadable ledger {tmp_path / 'ledger.sqlite3'} (")
    assert " file(s)): " in notes[0]
    assert not (tmp_path / "ledger.sqlite3").exists()
    assert clear_cache(tmp_path / "nothing-here") == (0, [])
