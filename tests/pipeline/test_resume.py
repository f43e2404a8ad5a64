"""Resumable runs: the run log and manifest, budget stops, refusing changed inputs,
retry-errors. Model traffic replays the real recording (example-two-dim.json)."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from judge import evaluate, load_config
from judge._errors import RunConflict
from judge.cli import main
from judge.errors import BudgetReached, OptionError

from ..conftest import CASSETTES, EXAMPLES, mount_cassette


def _config(tmp_path, **values):
    return load_config({"model": "local", "cache_dir": str(tmp_path / "cache"),
                        "use_cache": False, "concurrency": 1, **values})


def _priced(tmp_path):
    """A price table that makes the local model cost something, to hit a budget."""
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"batch_discount": 0.5, "models": {
        "local": {"input": 1000.0, "cached_input": 1000.0, "output": 1000.0}}}))
    return str(path)


def _run(config, data, out, **options):
    schema, dialogues, predictions = data
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "example-two-dim.json")
        try:
            result = evaluate(config, schema, dialogues, predictions,
                              http_client=httpx.AsyncClient(), out_dir=out, **options)
        except BudgetReached:
            result = None
        return result, router.calls.call_count


def test_budget_stop_then_resume_repeats_no_finished_call(tmp_path, example_data):
    out = tmp_path / "run"
    prices = _priced(tmp_path)
    # each call costs about 1.2 USD at these prices: stop after a few
    stopped, first = _run(_config(tmp_path, budget=3.0, prices=prices), example_data, out)
    assert stopped is None and 0 < first < 22
    logged = (out / "calls.jsonl").read_text().splitlines()
    assert len(logged) == first
    resumed, second = _run(_config(tmp_path, budget=1000.0, prices=prices), example_data, out,
                           resume=True)
    assert first + second == 22  # nothing sent twice, nothing missing
    assert resumed.summary["calls"]["resumed"] == first
    full, _ = _run(_config(tmp_path), example_data, tmp_path / "fresh")
    assert [r["verdict"] for r in resumed.rows] == [r["verdict"] for r in full.rows]
    assert resumed.summary["tokens"] == full.summary["tokens"]  # paid work is counted once
    assert (out / "summary.json").exists() and (out / "manifest.json").exists()


def test_resume_refuses_changed_inputs(tmp_path, example_data):
    out = tmp_path / "run"
    first, _ = _run(_config(tmp_path), example_data, out)
    with pytest.raises(RunConflict, match=r"another run.*config\.temperature"):
        _run(_config(tmp_path, temperature=0.7), example_data, out, resume=True)
    with pytest.raises(RunConflict, match=r"another run.*config\.temperature"):
        _run(_config(tmp_path, temperature=0.7), example_data, out)  # without --resume too
    again, sent = _run(_config(tmp_path), example_data, out)  # same inputs: reuse, send nothing
    assert sent == 0 and again.summary["calls"]["resumed"] == 22
    assert [r["verdict"] for r in again.rows] == [r["verdict"] for r in first.rows]
    with pytest.raises(OptionError, match="nothing to resume"):
        _run(_config(tmp_path), example_data, tmp_path / "empty", resume=True)


def test_resume_refuses_changed_data_files(tmp_path, example_data):
    from judge import load_dialogues, load_predictions, load_schema

    out = tmp_path / "run"
    _run(_config(tmp_path), example_data, out)
    changed = tmp_path / "predictions.jsonl"
    changed.write_text((EXAMPLES / "predictions.jsonl").read_text().replace("cheap", "moderate"))
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    data = (schema, dialogues, load_predictions(changed, dialogues, schema))
    with pytest.raises(RunConflict, match=r"inputs\.predictions"):
        _run(_config(tmp_path), data, out, resume=True)


def test_torn_last_log_line_is_ignored(tmp_path, example_data):
    out = tmp_path / "run"
    _run(_config(tmp_path, budget=3.0, prices=_priced(tmp_path)), example_data, out)
    lines = (out / "calls.jsonl").read_text().splitlines()
    (out / "calls.jsonl").write_text("\n".join(lines) + "\n" + lines[-1][:40])  # killed mid-write
    resumed, sent = _run(_config(tmp_path), example_data, out, resume=True)
    assert sent == 22 - len(lines) and resumed.summary["error_turns"] == 0


def test_retry_errors_sends_only_the_failed_calls(tmp_path, capsys):
    data = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions",
            str(EXAMPLES / "predictions.jsonl"), "--model", "local", "--no-cache",
            "--base-url", "http://127.0.0.1:8997/v1", "--max-retries", "0", "--concurrency", "1"]
    out = tmp_path / "run"
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "example-two-dim.json")
        # make the first two calls fail with a fixture 503, the rest replay the recording
        failing = router.routes[0]
        original = failing.return_value
        failing.side_effect = [httpx.Response(503, json={"error": {"message": "busy"}})]
        assert main(["evaluate", *data, "--out", str(out)]) == 1  # finished with error rows
        summary = json.loads((out / "summary.json").read_text())
        assert summary["error_turns"] >= 1
        before = router.calls.call_count
        failing.side_effect = None
        failing.return_value = original
        assert main(["retry-errors", str(out), "--base-url", "http://127.0.0.1:8997/v1"]) == 0
        assert router.calls.call_count - before == summary["calls"]["failed"]
    assert json.loads((out / "summary.json").read_text())["error_turns"] == 0
    assert "re-ran 1 failed call;" in capsys.readouterr().out


def test_dry_run_makes_no_call_and_counts_cached_calls(tmp_path, capsys):
    data = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions",
            str(EXAMPLES / "predictions.jsonl"), "--model", "local",
            "--cache-dir", str(tmp_path / "cache")]
    with respx.mock(assert_all_mocked=True) as router:
        assert main(["evaluate", *data, "--dry-run", "--out", str(tmp_path / "d")]) == 0
        assert router.calls.call_count == 0
    assert "22 / 0 / 22" in capsys.readouterr().out
    replay = ["--replay", str(CASSETTES / "example-two-dim.json")]
    assert main(["evaluate", *data, *replay, "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["evaluate", *data, *replay, "--dry-run", "--out", str(tmp_path / "d")]) == 0
    assert "22 / 22 / 0" in capsys.readouterr().out
    # replies cached from a cassette never count for (nor answer) a run against a live server
    assert main(["evaluate", *data, "--dry-run", "--out", str(tmp_path / "d")]) == 0
    assert "22 / 0 / 22" in capsys.readouterr().out


def test_run_log_keeps_replies_with_unicode_line_separators(tmp_path):
    """U+2028, U+0085 and U+001E are written raw by json.dumps(ensure_ascii=False); reading
    the log back must not split a record at them (it would look torn and be paid for again).
    A lone surrogate (a reply may hold the escape) is written as its escape."""
    from types import SimpleNamespace

    from judge.pipeline import RunDirectory

    run = RunDirectory(tmp_path / "run")
    run.start({"inputs": {}, "config": {}, "templates": {}}, resume=False)
    text = "line one\u2028line two\x85three\x1efour\ud800lone surrogate"  # UTF-8 cannot carry
    entry = {"dimension": "accuracy", "custom_id": "D::0::accuracy", "template_hash": "t",
             "prompt_hash": "p", "explanation": text, "error": None}
    run.append(SimpleNamespace(**entry))
    run.close()
    assert RunDirectory(tmp_path / "run").read_log() == [entry]
