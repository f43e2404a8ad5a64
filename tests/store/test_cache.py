"""The reply cache is the cache directory's ledger: ``cache stats / clear`` work on it, a
corrupted database gets a clear message (and ``cache clear`` still works), and the replies
of the old diskcache cache are imported once."""

from __future__ import annotations

import json

import diskcache

from judge import load_config
from judge.cli import main
from judge.pipeline import plan_evaluation
from judge.store import cache_key

from ..conftest import CASSETTES, EXAMPLES
from ..fault_server import FaultConfig, FaultServer

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(EXAMPLES / "predictions.jsonl"),
        "--model", "local", "--no-progress"]


def _replay(tmp_path, out="run"):
    return main(["evaluate", *DATA, "--replay", str(CASSETTES / "example-two-dim.json"),
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / out)])


def test_stats_and_clear_work_on_the_ledger(tmp_path, capsys):
    assert _replay(tmp_path) == 0
    capsys.readouterr()
    assert main(["cache", "stats", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "22 cached replies" in capsys.readouterr().out
    assert main(["cache", "clear", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "removed 22 cached replies" in capsys.readouterr().out
    assert main(["cache", "stats", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "0 cached replies" in capsys.readouterr().out


def test_a_corrupted_cache_database_is_named_and_clear_still_works(tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "ledger.sqlite3").write_bytes(b"garbage, not SQLite" * 200)
    assert main(["cache", "stats", "--cache-dir", str(cache)]) == 2
    err = capsys.readouterr().err
    assert "ledger.sqlite3: the ledger database is unreadable" in err
    assert "cache clear" in err and "Traceback" not in err
    assert _replay(tmp_path) == 2  # a run says the same, before sending anything
    assert "the ledger database is unreadable" in capsys.readouterr().err
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    assert "deleted the unreadable ledger" in capsys.readouterr().out
    assert _replay(tmp_path, "run2") == 0


def test_the_old_diskcache_replies_are_imported_once(tmp_path):
    cache = tmp_path / "cache"
    schema, dialogues, predictions = _example()
    with FaultServer(FaultConfig()) as server:
        config = load_config({"model": "m", "base_url": server.url, "cache_dir": str(cache)})
        plan = plan_evaluation(config, schema, dialogues, predictions)
        old = diskcache.Cache(str(cache))
        for call in plan.calls:
            key = "incorrect_domain_slot" if call.dimension == "accuracy" else \
                "missed_domain_slot"
            old.set(cache_key(config.endpoint, call.body, call.prompt.template_hash), {
                "text": json.dumps({"explanation": "from the old cache", key: {}}),
                "finish_reason": "stop", "refusal": None, "model": "m", "response_id": "old",
                "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                          "cached_prompt_tokens": 0}})
        old.close()
        code = main(["evaluate", *DATA[:6], "--model", "m", "--base-url", server.url,
                     "--cache-dir", str(cache), "--no-progress", "--out", str(tmp_path / "r")])
        assert code == 0
        assert server.snapshot()["total"] == 0  # every answer came from the old cache
    assert (cache / "cache.db.imported").exists() and not (cache / "cache.db").exists()
    row = json.loads((tmp_path / "r" / "judgments.jsonl").read_text().splitlines()[0])
    assert row["calls"][-1]["explanation"] == "from the old cache"
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    assert not (cache / "cache.db.imported").exists()


def _example():
    from judge import load_dialogues, load_predictions, load_schema

    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    return schema, dialogues, load_predictions(EXAMPLES / "predictions.jsonl", dialogues, schema)
