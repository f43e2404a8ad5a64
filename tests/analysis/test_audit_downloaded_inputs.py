"""A run directory fetched with ``dst-judge results`` names its downloaded inputs in
``inputs.json``; audit reads its dialogues and schema from there, and only from inside it."""

from __future__ import annotations

import json
import shutil

import pytest

from judge.analysis import load_audit_inputs
from judge.cli import main
from judge.errors import OptionError
from tests.conftest import EXAMPLES, ROOT


@pytest.fixture(scope="module")
def fetched_like(tmp_path_factory):
    """A replayed run reduced to what the service's results hold (no manifest, server paths
    scrubbed from the summary)."""
    base = tmp_path_factory.mktemp("run")
    assert main(["evaluate", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions",
                 str(EXAMPLES / "predictions.jsonl"), "--model", "local", "--replay",
                 str(ROOT / "cassettes" / "example-two-dim.json"), "--out", str(base / "full"),
                 "--no-progress"]) == 0
    folder = base / "fetched"
    folder.mkdir()
    for name in ("judgments.jsonl", "summary.json"):
        shutil.copy(base / "full" / name, folder / name)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    summary["data"]["dialogues"] = "dialogues.jsonl"  # as the server writes it: a bare name
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder


def test_audit_finds_the_downloaded_dialogues_and_schema(fetched_like, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # nothing of the data set is reachable from here
    with pytest.raises(OptionError, match="pass --dialogues"):
        load_audit_inputs([fetched_like])
    for kind, name in (("dialogues", "dialogues.jsonl"), ("schema", "schema.json")):
        (fetched_like / "inputs" / kind).mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLES / name, fetched_like / "inputs" / kind / name)
    (fetched_like / "inputs.json").write_text(json.dumps(
        {"dialogues": "inputs/dialogues/dialogues.jsonl",
         "schema": "inputs/schema/schema.json"}), encoding="utf-8")
    inputs = load_audit_inputs([fetched_like])
    assert len(inputs.dialogues) == 4 and inputs.schema is not None


def test_a_pointer_out_of_the_run_directory_is_not_followed(fetched_like, monkeypatch,
                                                            tmp_path):
    monkeypatch.chdir(tmp_path)
    outside = fetched_like.parent / "outside.jsonl"
    shutil.copy(EXAMPLES / "dialogues.jsonl", outside)
    (fetched_like / "inputs.json").write_text(json.dumps({"dialogues": "../outside.jsonl"}),
                                              encoding="utf-8")
    with pytest.raises(OptionError, match="pass --dialogues"):
        load_audit_inputs([fetched_like])
