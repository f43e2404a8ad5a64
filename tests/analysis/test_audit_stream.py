"""The audit of predictions files read one dialogue at a time writes what the whole-file audit
writes: the same candidates, ranks, ids, sheet and pages, in either order."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

import judge.cli._audit as audit_cli
from judge import load_schema
from judge.analysis import Candidate, Evidence, stream_candidates
from judge.analysis._review import order_by_pairs
from judge.cli import main

from ..conftest import EXAMPLES, shared_path


def _audit(out: Path, dialogues: Path, schema: Path, predictions: list[Path], order: str,
           sheet: str, *, whole: bool) -> dict[str, bytes]:
    out.mkdir()
    args = ["audit", *map(str, predictions), "--dialogues", str(dialogues), "--schema",
            str(schema), "--order", order, "--candidates", str(out / sheet), "--out",
            str(out / "audit.html")]
    if whole:
        with mock.patch.object(audit_cli, "_streamed", return_value=None):
            assert main(args) == 0
    else:
        assert main(args) == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _same_as_whole(tmp_path: Path, dialogues: Path, schema: Path, predictions: list[Path],
                   order: str, sheet: str) -> int:
    found, _ = stream_candidates(dialogues, predictions, schema=load_schema(schema),
                                 order=order)  # the files are read in step
    streamed = _audit(tmp_path / f"s-{order}", dialogues, schema, predictions, order, sheet,
                      whole=False)
    whole = _audit(tmp_path / f"w-{order}", dialogues, schema, predictions, order, sheet,
                   whole=True)
    assert list(streamed) == list(whole)
    for name in streamed:
        assert streamed[name] == whole[name], name
    return len(found)


@pytest.mark.parametrize("order", ["review", "evidence"])
@pytest.mark.parametrize("sheet", ["candidates.csv", "candidates.jsonl"])
def test_the_streamed_audit_writes_what_the_whole_audit_writes(tmp_path, order, sheet):
    found = _same_as_whole(tmp_path, EXAMPLES / "dialogues.jsonl", EXAMPLES / "schema.json",
                           [EXAMPLES / "predictions.jsonl", EXAMPLES / "predictions-weak.jsonl"],
                           order, sheet)
    assert found > 5


def test_files_out_of_step_are_loaded_whole(tmp_path):
    lines = (EXAMPLES / "predictions-weak.jsonl").read_text().splitlines()
    shuffled = tmp_path / "weak.jsonl"
    shuffled.write_text("\n".join(reversed(lines)) + "\n")
    with_step = _audit(tmp_path / "a", EXAMPLES / "dialogues.jsonl", EXAMPLES / "schema.json",
                       [EXAMPLES / "predictions.jsonl", EXAMPLES / "predictions-weak.jsonl"],
                       "review", "c.jsonl", whole=False)
    out_of_step = _audit(tmp_path / "b", EXAMPLES / "dialogues.jsonl",
                         EXAMPLES / "schema.json", [EXAMPLES / "predictions.jsonl", shuffled],
                         "review", "c.jsonl", whole=False)
    ids = [json.loads(line)["id"] for line in with_step["c.jsonl"].splitlines()]
    assert ids and ids == [json.loads(line)["id"]
                           for line in out_of_step["c.jsonl"].splitlines()]


@pytest.mark.parametrize("order", ["review", "evidence"])
def test_the_streamed_audit_of_the_shared_test_set_is_the_whole_audit(tmp_path, order):
    folder = shared_path("multiwoz")
    found = _same_as_whole(tmp_path, folder / "dialogues.jsonl.gz", folder / "schema.json",
                           [folder / "predictions" / "original.jsonl.gz",
                            folder / "predictions" / "da.jsonl.gz"], order, "candidates.csv")
    assert found > 1000


def test_review_order_ties_do_not_depend_on_how_a_set_was_built():
    # 0 and 8 share a slot of a small set's table: its order is the order they were added
    candidates = [Candidate(f"D{p}", 0, "hotel-area", "2.1", None, "north", ["a"],
                            {"a": "north"}, [Evidence("prior", 1.0, "")]) for p in range(9)]
    chance = [0.5] * 9

    def ranked(members: list[int]) -> list[str]:
        return [c.dialogue_id for c in order_by_pairs(candidates, chance,
                                                      {frozenset(members): 3})]

    assert list(frozenset([8, 0])) != list(frozenset([0, 8]))  # the premise
    assert ranked([8, 0]) == ranked([0, 8])
    assert ranked([8, 0])[:2] == ["D0", "D8"]
