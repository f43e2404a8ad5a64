"""The reviewers' agreement figures of the web interface (``web/_agreement``) called
directly: counts, the panel computed in the background, the stored review sample and the
tables against the library's agreement report."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from judge._errors import ServiceError
from judge.web import _agreement, _compare
from judge.web._index import build_index

from .views import RunRow, index_of


def _label(i: int, reviewer: str, dialogue: str, turn: int, label: str, slot: str = "",
           at: float = 0.0) -> dict[str, Any]:
    return {"id": i, "reviewer": reviewer, "dialogue_id": dialogue, "turn_index": turn,
            "label": label, "slot": slot, "updated_at": at or float(i)}


LABELS = [
    _label(1, "ann", "D1", 0, "correct"),
    _label(2, "ann", "D1", 1, "incorrect"),
    _label(3, "ann", "D2", 1, "unsure"),
    _label(4, "ann", "D1", 1, "incorrect", slot="taxi-leave"),
    _label(5, "bob", "D1", 0, "correct", at=50.5),
    _label(6, "bob", "D1", 1, "correct"),
    _label(7, "bob", "D2", 1, "correct"),
    _label(8, "cy", "D2", 1, "incorrect"),
]


def test_fingerprint_and_counts() -> None:
    """The labels' fingerprint (count, last change, ids) and the panel's headline counts."""
    assert _agreement.fingerprint(LABELS) == (8, 50.5, 36)
    assert _agreement.fingerprint([]) == (0, 0.0, 0)
    assert _agreement.label_counts(LABELS, "ann") == {"labels": 8, "turns": 3, "reviewers": 3,
                                                      "mine": 3}
    assert _agreement.label_counts(LABELS, "bob")["mine"] == 3
    assert _agreement.label_counts([], "x") == {"labels": 0, "turns": 0, "reviewers": 0,
                                                "mine": 0}
    assert _agreement.sample_name("job_1") == "review-sample-job_1.jsonl"


def test_quick_stats() -> None:
    """Per reviewer counts and the pairwise agreement on turn labels (unsure left out); κ is
    the analysis' (one disagreeing shared turn: 0, as ``dst-judge agreement`` says)."""
    stats = _agreement.quick_stats(LABELS, "ann")
    assert stats["labels"] == 8 and stats["turns"] == 3
    assert stats["reviewers"] == {
        "ann": {"turns": 3, "slots": 1, "correct": 1, "incorrect": 1, "unsure": 1},
        "bob": {"turns": 3, "slots": 0, "correct": 3, "incorrect": 0, "unsure": 0},
        "cy": {"turns": 1, "slots": 0, "correct": 0, "incorrect": 1, "unsure": 0}}
    assert stats["mine"] == stats["reviewers"]["ann"]
    assert stats["pairs"] == [
        {"a": "ann", "b": "bob", "n": 2, "agreement": 50.0, "kappa": 0.0},
        {"a": "ann", "b": "cy", "n": 0, "agreement": None, "kappa": None},
        {"a": "bob", "b": "cy", "n": 1, "agreement": 0.0, "kappa": 0.0}]
    assert _agreement.quick_stats(LABELS, "nobody")["mine"] == {"turns": 0, "slots": 0}
    assert _agreement.quick_stats([], "x") == {"labels": 0, "turns": 0, "reviewers": {},
                                               "mine": {"turns": 0, "slots": 0}, "pairs": []}


def test_compute_tables_of_the_agreement_report() -> None:
    """The library's agreement report as tables: captions, headers, human turns."""
    from judge.analysis import tables as display

    index = index_of()
    started = __import__("time").perf_counter()
    done = _agreement.compute(index, LABELS, ("m",), started)
    assert done.fingerprint == ("m",) and done.error is None
    assert done.human_turns == 1  # only D1/0 has a majority label (the others tie)
    assert done.seconds >= 0 and abs(done.at - __import__("time").time()) < 60
    captions = [t.caption for t in done.tables]
    assert captions[:2] == ["Agreement (judge, RULE, humans)", "Chance-corrected"]
    assert done.tables[0].header == tuple(display.AGREEMENT_HEADER[:4])
    assert done.tables[1].header == tuple(display.COEFFICIENT_HEADER)
    assert all(len(r) == 4 for r in done.tables[0].rows) and done.tables[0].rows
    assert done.tables[1].rows
    if "Reviewers as a group" in captions:
        table = done.tables[captions.index("Reviewers as a group")]
        assert table.header == tuple(display.REVIEWER_HEADER)


class _Labels:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list(self, project_id: str, subject: str) -> list[dict[str, Any]]:
        assert (project_id, subject) == ("lab", "job:a")
        return list(self.items)


class _Files:
    def list(self, project_id: str, kind: str, limit: int) -> list[dict[str, Any]]:
        assert (project_id, kind) == ("lab", "sample")
        return []


class _NoSamples:
    def get(self, project_id: str, job_id: str, name: str = "estimate") -> None:
        assert (project_id, name) == ("lab", "estimate")


class _Service:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.labels, self.files, self.samples = _Labels(items), _Files(), _NoSamples()


def test_board_panel_computes_in_the_background() -> None:
    """The panel answers at once; figures follow and are reused until the labels change."""
    row = RunRow("a")
    row.subject = None  # type: ignore[attr-defined]
    service = _Service(LABELS[:2])
    board = _agreement.AgreementBoard(service)  # type: ignore[arg-type]
    try:
        first = board.panel("lab", row, index_of(), "ann")
        assert first["quick"]["labels"] == 2 and first["computed"] is None
        assert first["stale"] is True
        deadline = __import__("time").monotonic() + 30
        while board.pending:
            assert __import__("time").monotonic() < deadline
            __import__("time").sleep(0.02)
        done = board.panel("lab", row, index_of(), "ann")
        assert done["stale"] is False and done["updating"] is False
        assert done["computed"].fingerprint == (2, 2.0, 3, None)
        assert done["computed"].error is None and done["computed"].tables
        service.labels.items = LABELS[:3]
        again = board.panel("lab", row, index_of(), "ann")
        assert again["stale"] is True and again["computed"] is done["computed"]
    finally:
        board.close()
    empty = _agreement.AgreementBoard(_Service([]))  # type: ignore[arg-type]
    try:
        panel = empty.panel("lab", row, index_of(), "ann")
        assert panel["stale"] is False and panel["updating"] is False
        assert panel["computed"] is None and not empty.pending
    finally:
        empty.close()


def test_human_agreement_of_the_judge() -> None:
    """The judge's agreement with each labelled turn's majority label; turns without a
    verdict do not count; None without labels or without any counted turn."""
    index = index_of()
    labels = [_label(1, "ann", "D1", 0, "correct"), _label(2, "ann", "D1", 1, "correct"),
              _label(3, "ann", "D2", 0, "correct"), _label(4, "ann", "D2", 1, "incorrect"),
              _label(5, "bob", "D2", 1, "incorrect")]
    found = _compare.human_agreement(index, labels)
    assert found is not None
    assert found["turns"] == 3
    assert math.isclose(found["agreement"], 100.0 / 3)
    assert _compare.human_agreement(index, labels[:1]) == {"agreement": 100.0, "turns": 1}
    assert _compare.human_agreement(index, []) is None
    assert _compare.human_agreement(index, labels[2:3]) is None


def test_board_records_a_failed_computation(monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """A failing computation is kept as an error on the panel, with no tables, and logged
    with the job's id."""
    def broken(*args: Any) -> Any:
        raise ValueError("no variation")

    monkeypatch.setattr(_agreement, "compute", broken)
    board = _agreement.AgreementBoard(_Service([]))  # type: ignore[arg-type]
    try:
        board.pending.add("a")
        before = __import__("time").time()
        with caplog.at_level("ERROR", logger="dst_judge.web"):
            board._compute("a", index_of(), LABELS, ("m",),
                           __import__("time").perf_counter())
        assert "agreement of job a failed" in caplog.text
        result = board.results["a"]
        assert result.error == "no variation" and result.tables == []
        assert result.fingerprint == ("m",) and result.human_turns == 0
        assert 0 <= result.seconds < 5 and before - 1 <= result.at <= before + 5
        assert board.pending == set()
    finally:
        board.close()


class _StoredFiles:
    """Files of kind 'sample' kept in a folder, content-addressed as the service's store is
    (the same bytes again are the first record)."""

    def __init__(self, root: Any) -> None:
        self.root, self.records, self.deleted, self.made = root, {}, [], 0

    def add(self, project_id: str, kind: str, name: str, stream: Any,
            token_id: str | None = None) -> Any:
        data = stream.read()
        sha = f"sha{abs(hash(data))}"
        found = next((r for r in self.records.values() if r["sha256"] == sha), None)
        if found is not None:
            return found, False
        (self.root / sha).write_bytes(data)
        self.made += 1
        record = {"name": name, "id": f"file{self.made}", "sha256": sha}
        self.records[record["id"]] = record
        return record, True

    def get(self, project_id: str, file_id: str) -> Any:
        return self.records[file_id]

    def delete(self, project_id: str, file_id: str) -> None:
        self.deleted.append(self.records.pop(file_id)["name"])

    def local_path(self, sha256: str) -> Any:
        return self.root / sha256


class _Samples:
    """The service's references of runs' samples, by file id."""

    def __init__(self, files: _StoredFiles) -> None:
        self.files, self.refs = files, {}

    def get(self, project_id: str, job_id: str, name: str = "estimate") -> Any:
        ref = self.refs.get((project_id, job_id, name))
        if ref is None:
            return None
        record = self.files.records[ref[0]]
        return {"file_id": ref[0], "created_at": ref[1], "sha256": record["sha256"],
                "file_name": record["name"]}

    def put(self, project_id: str, job_id: str, name: str, file_id: str,
            token_id: str | None = None) -> Any:
        old = self.refs.get((project_id, job_id, name), (None,))[0]
        self.refs[(project_id, job_id, name)] = (file_id, 1000.0 + len(self.refs))
        return old if old != file_id else None


class _Jobs:
    def __init__(self, samples: _Samples) -> None:
        self.samples = samples

    def refuse_if_in_use(self, project_id: str, file_id: str) -> None:

        if any(ref[0] == file_id for ref in self.samples.refs.values()):
            raise ServiceError("in use", status=409)


def _sample_service(root: Any, items: list[dict[str, Any]] | None = None) -> Any:
    files = _StoredFiles(root)
    samples = _Samples(files)
    return type("S", (), {"files": files, "samples": samples, "jobs": _Jobs(samples),
                          "labels": _Labels(items or [])})()


def test_store_and_read_back_a_review_sample(tmp_path: Any) -> None:
    """The sample is stored under the run's name and referenced by file id, read back as the
    same sample; a byte-identical sample of another run is the same file referenced twice; a
    replaced estimate sample's file goes unless another run references it."""
    from judge.web._queues import draw

    sample = draw(index_of(), 2, seed=1)
    service = _sample_service(tmp_path)
    assert _agreement.store_sample(service, "lab", "job_1", sample) == 1000.0
    file_id, back = _agreement.stored_sample(service, "lab", "job_1")
    assert file_id == "file1" and back.path == "review-sample-job_1.jsonl"
    assert [(t.dialogue_id, t.turn_index) for t in back.turns] == [
        (t.dialogue_id, t.turn_index) for t in sample.turns]
    assert _agreement.stored_sample(service, "lab", "job_2") == (None, None)
    _agreement.store_sample(service, "lab", "job_2", sample)
    assert _agreement.stored_sample(service, "lab", "job_2")[0] == "file1"
    # job_1 draws anew: its old file stays, job_2's sample
    _agreement.store_sample(service, "lab", "job_1", draw(index_of(), 3, seed=1))
    assert _agreement.stored_sample(service, "lab", "job_1")[0] == "file2"
    assert service.files.deleted == []
    # job_2 draws anew: nothing references file1 any more, so it goes
    _agreement.store_sample(service, "lab", "job_2", draw(index_of(), 3, seed=2))
    assert service.files.deleted == ["review-sample-job_1.jsonl"]
    # a separate draw is referenced by its n and seed, beside the estimate sample
    _agreement.store_sample(service, "lab", "job_1", draw(index_of(), 2, seed=5), 2, 5)
    separate_id, separate = _agreement.stored_sample(service, "lab", "job_1", 2, 5)
    assert separate_id == "file4" and separate.path == "review-sample-job_1-n2-seed5.jsonl"
    assert _agreement.stored_sample(service, "lab", "job_1")[0] == "file2"


def test_compute_matches_the_library_report_with_a_sample() -> None:
    """The panel's tables are the library's agreement report (as ``dst-judge agreement``
    prints it) of the run's verdicts, RULE verdicts and labels, with the population estimates
    of the reviewed sample; a sample none of whose turns is labelled is left out."""
    from judge import analysis
    from judge.analysis import tables as display
    from judge.web._labelfile import human_labels, label_records
    from judge.web._queues import draw

    from .synthetic import synthetic_rows

    index = build_index("j", 1, iter(synthetic_rows(60, seed=3)), {})
    sample = draw(index, 8, seed=1)
    verdicts = {(e.dialogue_id, e.turn_index): e.verdict for e in index.entries}
    labels, i = [], 0
    for turn in sample.turns:
        for reviewer, label in (("ann", "correct" if verdicts[turn.dialogue_id,
                                                                turn.turn_index] else "incorrect"),
                                ("bob", "correct")):
            i += 1
            labels.append(_label(i, reviewer, turn.dialogue_id, turn.turn_index, label))
    rows = [{"dialogue_id": e.dialogue_id, "turn_index": e.turn_index, "verdict": e.verdict,
             "rule": {v: ok for v, ok in e.rule if ok is not None}} for e in index.entries]
    report = analysis.agreement_report(rows, human_labels(label_records(labels)),
                                       sample=sample, n_boot=200, seed=0)
    done = _agreement.compute(index, labels, ("m",), 0.0, sample)
    assert [t.caption for t in done.tables] == [
        "Agreement (judge, RULE, humans)", "Chance-corrected", "Reviewers as a group",
        _agreement.alt_test_caption(report["alt_test"]),
        "Population agreement from the " + display.sample_words(report["population"]),
        "Estimates of TSA: the judge's own figure, labels alone and prediction-powered "
        "(95 % t intervals)"]
    assert done.tables[0].rows == [tuple(r[:4]) for r in display.format_agreement(report)]
    assert done.tables[1].rows == [tuple(r) for r in display.format_coefficients(report)]
    assert done.tables[2].header == tuple(display.REVIEWER_HEADER)
    assert done.tables[2].rows == [tuple(r) for r in display.format_reviewers(report)]
    # two reviewers on 8 shared turns: the alternative-annotator test says it needs more
    assert done.tables[3].header == tuple(display.ALT_TEST_HEADER)
    assert "not enough overlap" in done.tables[3].caption
    assert "at least 30 labelled turns" in done.tables[3].caption
    assert done.tables[4].header == tuple(display.POPULATION_HEADER[:4])
    assert done.tables[4].rows == [tuple(r[:4]) for r in display.format_population(report)]
    assert done.tables[5].header == tuple(display.ESTIMATE_HEADER)
    assert done.tables[5].rows == [tuple(r) for r in
                                   display.format_estimates(report.get("population"))]
    assert done.human_turns == report["human"]["turns"] > 0
    unlabelled = [_label(1, "ann", "nowhere", 0, "correct")]
    plain = _agreement.compute(index, unlabelled, ("m",), 0.0, sample)
    assert len(plain.tables) == 2 and plain.human_turns == 0


def test_the_panel_tests_the_judge_against_reviewers_who_share_enough_turns() -> None:
    """Three reviewers on 40 shared turns: the panel shows each reviewer's and the judge's
    agreement with the others, the p-values and the verdict of the alternative-annotator
    test, as the library computes them."""
    from judge import analysis
    from judge.analysis import tables as display
    from judge.web._labelfile import human_labels, label_records

    from .synthetic import synthetic_rows

    index = build_index("j", 1, iter(synthetic_rows(60, seed=3)), {})
    entries = index.entries[:40]
    labels, i = [], 0
    for position, e in enumerate(entries):
        for reviewer, flip in (("ann", position % 9 == 0), ("bob", position % 7 == 1),
                               ("cy", position % 5 == 2)):
            i += 1
            correct = e.verdict != flip
            labels.append(_label(i, reviewer, e.dialogue_id, e.turn_index,
                                 "correct" if correct else "incorrect"))
    rows = [{"dialogue_id": e.dialogue_id, "turn_index": e.turn_index, "verdict": e.verdict,
             "rule": {v: ok for v, ok in e.rule if ok is not None}} for e in index.entries]
    report = analysis.agreement_report(rows, human_labels(label_records(labels)), n_boot=200,
                                       seed=0)
    block = report["alt_test"]
    assert block["enough_overlap"] and block["winning_rate"] == 1.0
    done = _agreement.compute(index, labels, ("m",), 0.0, None)
    table = next(t for t in done.tables if t.header == tuple(display.ALT_TEST_HEADER))
    assert table.rows == [tuple(r) for r in display.format_alt_test(block)]
    assert [r[0] for r in table.rows] == ["ann", "bob", "cy"]
    assert "ω = 1.00" in table.caption and "may stand in" in table.caption


def test_board_panel_fingerprints_the_runs_stored_sample(tmp_path: Any) -> None:
    """The panel's figures are keyed by the labels and by the run's own stored sample."""
    from judge.web._queues import draw

    service = _sample_service(tmp_path, LABELS[:2])
    _agreement.store_sample(service, "lab", "a", draw(index_of(), 2, seed=1))
    row = RunRow("a")
    row.subject = None  # type: ignore[attr-defined]
    board = _agreement.AgreementBoard(service)  # type: ignore[arg-type]
    try:
        board.panel("lab", row, index_of(), "ann")
        deadline = __import__("time").monotonic() + 30
        while board.pending:
            assert __import__("time").monotonic() < deadline
            __import__("time").sleep(0.02)
        assert list(board.results) == ["a"]
        done = board.panel("lab", row, index_of(), "ann")
        assert done["computed"].fingerprint == (2, 2.0, 3, "file1")
        assert done["stale"] is False
    finally:
        board.close()
