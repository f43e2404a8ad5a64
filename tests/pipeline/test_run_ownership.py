"""A run directory belongs to one run: a second process is refused while the first holds it
(exit 6, naming the holder), and no file of another run, or of no run, is ever overwritten."""

from __future__ import annotations

import hashlib
import json

import pytest

from judge.cli import main
from judge.pipeline import RunDirectory

from ..conftest import CASSETTES, EXAMPLES

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--model", "local", "--no-progress"]
REPLAY = ["--replay", str(CASSETTES / "example-two-dim.json")]


def _evaluate(out, *extra, predictions="predictions.jsonl"):
    cassette = "example-weak-two-dim.json" if "weak" in predictions else "example-two-dim.json"
    return main(["evaluate", *DATA, "--predictions", str(EXAMPLES / predictions),
                 "--replay", str(CASSETTES / cassette), "--no-cache", "--out", str(out), *extra])


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_locked_run_directory_is_refused_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "run"
    holder = RunDirectory(out)
    holder.lock()
    try:
        assert _evaluate(out) == 6
    finally:
        holder.unlock()
    err = capsys.readouterr().err
    import os
    import socket

    assert f"pid {os.getpid()} on host {socket.gethostname()}" in err
    assert "in use by another dst-judge process" in err
    assert not (out / "manifest.json").exists()
    assert _evaluate(out) == 0  # released: the same command now runs


def test_results_of_no_run_are_not_overwritten(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "judgments.jsonl").write_text('{"precious": true}\n')
    (out / "summary.json").write_text('{"mine": 1}\n')
    (out / "notes.txt").write_text("keep me")
    before = _digests(out)
    assert _evaluate(out) == 6
    assert _digests(out) == before
    assert "no manifest.json" in capsys.readouterr().err
    assert _evaluate(out, "--force") == 0
    assert (out / "notes.txt").read_text() == "keep me"  # never ours: untouched even so
    assert json.loads((out / "summary.json").read_text())["turns"] == 11


def test_another_runs_results_are_not_overwritten(tmp_path, capsys):
    out = tmp_path / "run"
    assert _evaluate(out) == 0
    before = _digests(out)
    assert _evaluate(out, predictions="predictions-weak.jsonl") == 6
    assert _digests(out) == before
    assert "inputs.predictions" in capsys.readouterr().err
    assert _evaluate(out) == 0  # the same run again: reuses its log, sends nothing
    assert _evaluate(out, "--force", predictions="predictions-weak.jsonl") in (0, 1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["predictions"].endswith("predictions-weak.jsonl")


def test_batch_collect_does_not_overwrite_a_live_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert _evaluate(out) == 0
    before = _digests(out)
    output = tmp_path / "batch_output.jsonl"
    output.write_text("")
    code = main(["batch", "collect", "--output-file", str(output), *DATA[:4], "--predictions",
                 str(EXAMPLES / "predictions.jsonl"), "--model", "local", "--out", str(out)])
    assert code == 6
    assert _digests(out) == before
    assert "evaluate run, this is a batch run" in capsys.readouterr().err


def test_collect_writes_under_its_own_manifest_and_can_collect_again(tmp_path):
    output = tmp_path / "batch_output.jsonl"
    output.write_text("")
    command = ["batch", "collect", "--output-file", str(output), *DATA[:4], "--predictions",
               str(EXAMPLES / "predictions.jsonl"), "--model", "local",
               "--out", str(tmp_path / "b")]
    assert main(command) == 4  # every line missing: nothing could be judged
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["kind"] == "batch"
    assert main(command) == 4  # its own directory: collected again
    assert _evaluate(tmp_path / "b") == 6


def test_a_corrupt_manifest_is_named(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text("{not json")
    assert _evaluate(out, "--resume") == 2
    assert "manifest.json:1" in capsys.readouterr().err


@pytest.mark.parametrize("line, field", [
    ("[1, 2]", None), ('{"custom_id": "x"}', "dimension"), ("{torn", None)])
def test_a_corrupt_run_log_line_is_named(tmp_path, capsys, line, field):
    out = tmp_path / "run"
    assert _evaluate(out) == 0
    log = out / "calls.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0], line, *lines[1:]]) + "\n")
    assert _evaluate(out, "--resume") == 2
    err = capsys.readouterr().err
    assert "calls.jsonl:2" in err and "Traceback" not in err
    if field:
        assert f"field '{field}'" in err


def test_a_torn_last_line_is_cut_before_appending(tmp_path):
    """A kill mid-write leaves half a line: resume cuts it (its call comes back from the
    ledger) instead of appending the next record onto the fragment."""
    out = tmp_path / "run"
    assert _evaluate(out) == 0
    log = out / "calls.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][:50])
    (out / "judgments.jsonl").unlink()
    assert _evaluate(out, "--resume") == 0
    again = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(again) == 22 and log.read_text().endswith("\n")
    assert len({e["custom_id"] for e in again}) == 22


def test_a_run_directory_of_the_previous_version_resumes(tmp_path):
    """calls.jsonl and manifest.json as the version before the ledger wrote them (no kind, no
    run id, no attempt keys, no ledger): resume reads them and sends nothing logged."""
    out = tmp_path / "run"
    assert _evaluate(out) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    for name in ("kind", "run_id"):
        manifest.pop(name)
    (out / "manifest.json").write_text(json.dumps(manifest))
    entries = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    for entry in entries:
        for attempt in entry["attempts"]:
            attempt.pop("key")
    kept = entries[:15]
    (out / "calls.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept))
    (out / "ledger.sqlite3").unlink()
    for name in ("judgments.jsonl", "summary.json"):
        (out / name).unlink()
    assert main(["evaluate", *DATA, "--predictions", str(EXAMPLES / "predictions.jsonl"),
                 *REPLAY, "--no-cache", "--out", str(out), "--resume"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["calls"]["resumed"] == 15 and summary["calls"]["sent"] == 7
