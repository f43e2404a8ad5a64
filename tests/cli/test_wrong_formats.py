"""Every file of a corpus (each known format, and broken files) fed to every data-reading
command in every role: each run ends with exit 0 or a one-line error (exit 2), never a
traceback. The commands run in-process, so an unexpected exception fails the test."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from judge.cli import main

from ..conftest import EXAMPLES, FIXTURES

FORMATS = FIXTURES / "formats"
SCHEMA = str(EXAMPLES / "schema.json")
DIALOGUES = str(EXAMPLES / "dialogues.jsonl")
PREDICTIONS = str(EXAMPLES / "predictions.jsonl")


def _broken(folder: Path) -> list[Path]:
    files = {
        "empty.json": b"",
        "blank-lines.jsonl": b"\n\n  \n",
        "not-json.txt": b"dialogue_id,turn,state\nSNG1,0,{}\n",
        "truncated.json": b'{"sng0073": [{"state": {"taxi": {"leave": "17:',
        "numbers.json": b"[1, 2, 3]",
        "string.json": b'"just a string"',
        "null.json": b"null",
        "binary.bin": bytes(range(256)) * 4,
        "half-native.jsonl": b'{"dialogue_id": "D1", "turns": [{"turn_index": 0}]}\n{oops\n',
        "turns-not-list.jsonl": b'{"dialogue_id": "D1", "turns": {"0": {}}}\n',
        "mwzeval-bad-state.json": json.dumps({"sng0073": [{"state": ["taxi"]}]}).encode(),
        "trade-bad-turn.json": json.dumps({"D1": {"x": {"turn_belief": []}}}).encode(),
        "sgd-no-frames.json": json.dumps([{"dialogue_id": "1", "turns": [
            {"speaker": "USER", "utterance": "hi", "frames": [{"service": "A_1"}]}]}]).encode(),
        "multiwoz-odd-log.json": json.dumps({"X.json": {"log": [{"text": "hi"}]}}).encode(),
        "convlab-bad-speaker.json": json.dumps([{"dialogue_id": "c-0", "turns": [
            {"speaker": "robot", "utterance": "hi", "utt_idx": 0}]}]).encode(),
        "services-no-slots.json": json.dumps([{"service_name": "A_1"}]).encode(),
        "deep.json": ("[" * 5000 + "]" * 5000).encode(),
    }
    out = []
    for name, data in files.items():
        path = folder / name
        path.write_bytes(data)
        out.append(path)
    gz = folder / "garbage.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\x00\x01 not json at all"))
    out.append(gz)
    bad_gzip = folder / "bad-gzip.jsonl"
    bad_gzip.write_bytes(b"\x1f\x8b\x08\x00 broken")
    out.append(bad_gzip)
    out.append(folder / "does-not-exist.json")
    return out


CORPUS = [*sorted(p for p in FORMATS.iterdir() if p.suffix in (".json", ".jsonl")),
          EXAMPLES / "schema.json", EXAMPLES / "dialogues.jsonl",
          EXAMPLES / "predictions.jsonl", FIXTURES / "schema_small.json"]

COMMANDS = {
    "metrics-schema": lambda f, o: ["metrics", "--schema", f, "--dialogues", DIALOGUES,
                                    "--predictions", PREDICTIONS],
    "metrics-dialogues": lambda f, o: ["metrics", "--schema", SCHEMA, "--dialogues", f,
                                       "--predictions", PREDICTIONS],
    "metrics-predictions": lambda f, o: ["metrics", "--schema", SCHEMA, "--dialogues",
                                         DIALOGUES, "--predictions", f],
    "evaluate-schema": lambda f, o: ["evaluate", "--dry-run", "--schema", f, "--dialogues",
                                     DIALOGUES, "--predictions", PREDICTIONS, "--out", o],
    "evaluate-dialogues": lambda f, o: ["evaluate", "--dry-run", "--schema", SCHEMA,
                                        "--dialogues", f, "--predictions", PREDICTIONS,
                                        "--out", o],
    "evaluate-predictions": lambda f, o: ["evaluate", "--dry-run", "--schema", SCHEMA,
                                          "--dialogues", DIALOGUES, "--predictions", f,
                                          "--out", o],
    "batch-prepare": lambda f, o: ["batch", "prepare", "--schema", SCHEMA, "--dialogues",
                                   DIALOGUES, "--predictions", f, "--out", o + ".jsonl"],
    "validate-schema": lambda f, o: ["validate", "schema", f],
    "validate-dialogues": lambda f, o: ["validate", "dialogues", f],
    "validate-predictions": lambda f, o: ["validate", "predictions", f],
    "validate-labels": lambda f, o: ["validate", "labels", f],
    "convert": lambda f, o: ["convert", f, "--out", o + ".out"],
    "convert-predictions": lambda f, o: ["convert", f, "--kind", "predictions", "--dialogues",
                                         DIALOGUES, "--schema", SCHEMA, "--out", o + ".out"],
    "agreement": lambda f, o: ["agreement", f],
    "compare": lambda f, o: ["compare", f],
    "systems": lambda f, o: ["systems", f, "--schema", SCHEMA],
    "audit": lambda f, o: ["audit", f, "--out", o + ".html"],
    "labels-import": lambda f, o: ["labels", "import", f, "--out", o + ".labels"],
    "retry-errors": lambda f, o: ["retry-errors", f],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return CORPUS + _broken(tmp_path_factory.mktemp("broken"))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_traceback_on_any_input(command, corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DST_JUDGE_CACHE_DIR", str(tmp_path / "cache"))
    outcomes = {}
    for number, path in enumerate(corpus):
        argv = COMMANDS[command](str(path), str(tmp_path / f"out{number}"))
        code = main(argv)  # anything but a DSTJudgeError would escape as a traceback here
        captured = capsys.readouterr()
        assert code in (0, 2), (path.name, code, captured.err)
        assert "Traceback" not in captured.err + captured.out
        if code == 2:
            lines = [line for line in captured.err.splitlines()
                     if line.startswith("dst-judge: error:") or ": " in line]
            assert lines, (path.name, captured.err)
        outcomes[path.name] = code
    # the corpus is not trivially rejected: the right file in the right role passes
    if command == "metrics-predictions":
        assert outcomes["mwzeval_predictions.json"] == 2  # other dialogues than the examples
        assert outcomes["predictions.jsonl"] == 0
    if command == "validate-schema":
        assert outcomes["sgd_schema.json"] == 0 and outcomes["convlab_ontology.json"] == 0
        assert outcomes["mwzeval_predictions.json"] == 2
    if command == "convert":
        assert outcomes["trippy_pred_res.test.json"] == 0
        assert outcomes["deep.json"] == 2 and outcomes["binary.bin"] == 2


def test_unknown_format_names_field_and_lists_formats(tmp_path, capsys):
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"sng0073": [{"belief": {"taxi": {"leave": "17:15"}}}]}))
    assert main(["metrics", "--schema", SCHEMA, "--dialogues", DIALOGUES, "--predictions",
                 str(path)]) == 2
    err = capsys.readouterr().err
    assert "field 'sng0073[0].state'" in err
    assert "closest: mwzeval" in err
    for name in ("native", "mwzeval", "trade", "somdst", "trippy", "convlab-predictions",
                 "turns", "sgd", "multiwoz22"):
        assert name in err
