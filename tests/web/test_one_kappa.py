"""One Cohen's κ: for the same two reviewers' labels, ``dst-judge agreement --json`` (the CLI),
the web's label panel and the service's reviewer agreement give the same κ, and the same
``None`` where κ is undefined (no shared unit, or both reviewers give every unit the same one
label). The web once said ``None`` for a single shared turn the reviewers disagree on, where
the CLI said 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.analysis import cohen_kappa
from judge.cli import main
from judge.web._agreement import quick_stats

from ..conftest import CASSETTES, EXAMPLES

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(EXAMPLES / "predictions.jsonl")]

CASES = {
    "some agreement": ([1, 0, 1, 0], [1, 0, 0, 0], 0.5),
    "all agree, both labels": ([1, 0, 1], [1, 0, 1], 1.0),
    "all agree, one label only": ([1, 1, 1], [1, 1, 1], None),
    "one reviewer uses one label": ([1, 1, 1], [1, 0, 1], 0.0),
    "each reviewer one label, not the same": ([1, 1], [0, 0], 0.0),
    "one shared turn, disagreeing": ([1], [0], 0.0),
    "one shared turn, agreeing": ([0], [0], None),
}


@pytest.fixture(scope="module")
def run_turns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[str, int]]]:
    folder = tmp_path_factory.mktemp("kappa")
    out = folder / "run"
    assert main(["evaluate", *DATA, "--model", "local", "--replay",
                 str(CASSETTES / "example-two-dim.json"), "--cache-dir", str(folder / "c"),
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()
            if line.strip()]
    return out, [(r["dialogue_id"], r["turn_index"]) for r in rows]


def _cli_kappa(run: Path, turns: list[tuple[str, int]], a: list[int], b: list[int],
               folder: Path) -> float | None:
    labels = folder / "labels.jsonl"
    labels.write_text("".join(
        json.dumps({"dialogue_id": d, "turn_index": t, "label": label, "reviewer": who,
                    "time": "2026-01-01T10:00:00Z"}) + "\n"
        for who, given in (("ann", a), ("bob", b))
        for (d, t), label in zip(turns, given, strict=False)), encoding="utf-8")
    report = folder / "report.json"
    assert main(["agreement", str(run), "--human", str(labels), "--n-boot", "0",
                 "--json", str(report)]) == 0
    pairs = json.loads(report.read_text())["human"]["inter_annotator"]["pairs"]
    assert len(pairs) == 1 and pairs[0]["n"] == len(a)
    kappa: float | None = pairs[0]["kappa"]
    return kappa


def _web_kappa(turns: list[tuple[str, int]], a: list[int], b: list[int]) -> float | None:
    labels = [{"id": number, "reviewer": who, "dialogue_id": d, "turn_index": t, "slot": None,
               "label": "correct" if label else "incorrect", "updated_at": 1.0}
              for number, (who, d, t, label) in enumerate(
                  (who, d, t, label) for who, given in (("ann", a), ("bob", b))
                  for (d, t), label in zip(turns, given, strict=False))]
    pairs = quick_stats(labels, "ann")["pairs"]
    assert len(pairs) == 1 and pairs[0]["n"] == len(a)
    kappa: float | None = pairs[0]["kappa"]
    return kappa


@pytest.mark.parametrize("case", list(CASES))
def test_cli_and_web_give_the_same_kappa(case: str, run_turns, tmp_path: Path, capsys) -> None:
    a, b, expected = CASES[case]
    run, turns = run_turns
    cli = _cli_kappa(run, turns, a, b, tmp_path)
    capsys.readouterr()
    web = _web_kappa(turns, a, b)
    assert cli == web, (case, cli, web)
    assert cli == (pytest.approx(expected) if expected is not None else None), case
    assert cohen_kappa(a, b) == cli


@pytest.mark.parametrize("case", list(CASES))
def test_the_services_reviewer_agreement_uses_the_same_kappa(case: str) -> None:
    """Whether two reviewers of a candidate changed the annotation, pooled over candidates:
    the same κ and the same undefined case as the agreement of turn labels."""
    from judge.service.storage._decisions import reviewer_agreement

    a, b, expected = CASES[case]
    decisions = []
    for number, (x, y) in enumerate(zip(a, b, strict=True)):
        for who, changes in (("ann", x), ("bob", y)):
            decisions.append({"candidate": f"c{number}", "reviewer": who, "adjudicated": False,
                              "was": "old", "value": "new" if changes else "old",
                              "decided_at": 1.0})
    kappa = reviewer_agreement(decisions)["kappa"]
    assert kappa == (pytest.approx(expected) if expected is not None else None), case
