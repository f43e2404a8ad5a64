"""CLI surface of the judge: missing credentials, cache management, option errors."""

from __future__ import annotations

import json

from judge.cli import main

from ..conftest import CASSETTES, EXAMPLES

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(EXAMPLES / "predictions.jsonl")]


def test_no_model_to_ask_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("DST_JUDGE_API_KEY", raising=False)
    monkeypatch.delenv("DST_JUDGE_BASE_URL", raising=False)
    code = main(["evaluate", *DATA, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "set OPENAI_API_KEY, pass --base-url" in err
    assert not (tmp_path / "run").exists()


def test_bad_judge_option_names_the_option(tmp_path, capsys):
    code = main(["evaluate", *DATA, "--temperature", "7", "--replay",
                 str(CASSETTES / "example-two-dim.json"), "--out", str(tmp_path / "r")])
    assert code == 2 and "temperature" in capsys.readouterr().err


def test_replay_miss_is_reported_and_nothing_is_scored(tmp_path, capsys):
    code = main(["evaluate", *DATA, "--model", "some-other-model", "--replay",
                 str(CASSETTES / "example-two-dim.json"), "--cache-dir", str(tmp_path / "c"),
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "request not in cassette" in err
    assert "Traceback" not in err and not (tmp_path / "r" / "summary.json").exists()


def test_cache_stats_and_clear(tmp_path, capsys):
    cache = str(tmp_path / "cache")
    assert main(["evaluate", *DATA, "--model", "local", "--replay",
                 str(CASSETTES / "example-two-dim.json"), "--cache-dir", cache,
                 "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["cache", "stats", "--cache-dir", cache]) == 0
    assert capsys.readouterr().out.startswith("22 cached replies")
    assert main(["cache", "clear", "--cache-dir", cache]) == 0
    assert "removed 22" in capsys.readouterr().out
    assert main(["cache", "stats", "--cache-dir", cache]) == 0
    assert capsys.readouterr().out.startswith("0 cached replies")


def test_limit_and_dialogue_ids_select_turns(tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("EX002\n")
    for extra, turns in ((["--limit", "1"], 3), (["--dialogue-ids", str(ids)], 2)):
        out = tmp_path / f"r{turns}"
        assert main(["evaluate", *DATA, "--model", "local", "--replay",
                     str(CASSETTES / "example-two-dim.json"), "--cache-dir",
                     str(tmp_path / "c"), "--out", str(out), *extra]) == 0
        assert json.loads((out / "summary.json").read_text())["turns"] == turns


def test_audit_and_labels_import_through_the_cli(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["evaluate", *DATA, "--model", "local", "--replay",
                 str(CASSETTES / "example-two-dim.json"), "--cache-dir", str(tmp_path / "c"),
                 "--out", str(run)]) == 0
    html = tmp_path / "audit.html"
    assert main(["audit", str(run), "--out", str(html)]) == 0
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text(json.dumps({"dialogue_id": "EX001.json", "turn_index": 1,
                                     "decision": "incorrect", "note": "type is right"}) + "\n")
    labels = tmp_path / "labels.jsonl"
    assert main(["labels", "import", str(decisions), "--out", str(labels),
                 "--annotator", "ann1"]) == 0
    record = json.loads(labels.read_text())
    assert record == {"dialogue_id": "EX001.json", "turn_index": 1, "label": 0,
                      "annotator": "ann1", "note": "type is right"}
    assert main(["agreement", str(run), "--human", str(labels), "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert "Accuracy after human re-evaluation" in out and "judge vs human" in out


def test_a_re_recorded_cassette_is_never_answered_from_the_cache(tmp_path, capsys):
    """A reply cached while replaying one recording must not answer for another recording of
    the same requests (a cassette re-recorded, a newer checkout), nor for a live run: cached
    replays are keyed by the cassette's bytes. Here every reply of the second recording calls
    the prediction correct and nothing missed; a stale cache would keep the first verdicts."""
    cache = str(tmp_path / "cache")
    first = CASSETTES / "example-two-dim.json"
    assert main(["evaluate", *DATA, "--model", "local", "--replay", str(first),
                 "--cache-dir", cache, "--out", str(tmp_path / "r1"), "--no-progress"]) == 0
    data = json.loads(first.read_text(encoding="utf-8"))
    for item in data["interactions"]:
        message = item["response"]["body"]["choices"][0]["message"]
        reply = json.loads(message["content"])
        reply = {key: ({} if isinstance(value, dict) else value) for key, value in reply.items()}
        message["content"] = json.dumps(reply)
    second = tmp_path / "re-recorded.json"
    second.write_text(json.dumps(data), encoding="utf-8")
    assert main(["evaluate", *DATA, "--model", "local", "--replay", str(second),
                 "--cache-dir", cache, "--out", str(tmp_path / "r2"), "--no-progress"]) == 0
    summaries = [json.loads((tmp_path / run / "summary.json").read_text(encoding="utf-8"))
                 for run in ("r1", "r2")]
    assert summaries[0]["tsa"] < 100.0  # the real recording finds errors
    assert summaries[1]["tsa"] == 100.0, summaries[1]  # every verdict from the second file
    capsys.readouterr()
    assert main(["cache", "stats", "--cache-dir", cache]) == 0
    assert capsys.readouterr().out.startswith("44 cached replies")  # 22 per recording
