"""Samples that prove where they came from, labels that belong to their predictions, and ties
and unsure turns stated: the CLI (issue 34, items 1, 2 and 5)."""

from __future__ import annotations

import json

import pytest

from judge.analysis import recorded_predictions_sha256
from judge.cli import main

from .test_cli_estimates import compare_labelled, flat, label_file, rows_of

NEW_FIELDS = ("n", "procedure", "run_turns_sha256", "predictions_sha256")


def draw(run, path, *extra: str) -> list[dict]:
    assert main(["labels", "sample", str(run), "--n", "5", "--seed", "3", *extra,
                 "--out", str(path)]) == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path, records: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def agreement(run, labels, sample, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["agreement", str(run), "--human", str(labels), "--sample", str(sample),
                 "--n-boot", "0", *extra])
    captured = capsys.readouterr()
    return code, flat(captured.out + captured.err)


def with_turns(header: list[dict], keys: list[tuple[str, int]]) -> list[dict]:
    """The genuine lines' header fields over other turns."""
    return [{**header[0], "dialogue_id": d, "turn_index": t} for d, t in keys]


def test_the_default_design_is_random_and_the_file_records_its_provenance(runs, tmp_path,
                                                                          capsys):
    drawn = draw(runs["good"], tmp_path / "s.jsonl")
    out = flat(capsys.readouterr().out)
    assert "Simple random sample of 5 turns" in out
    assert "records n 5, seed 3, procedure 1 and the run's and its predictions' digests" in out
    assert {d["design"] for d in drawn} == {"random"}
    assert {d["n"] for d in drawn} == {5} and {d["procedure"] for d in drawn} == {1}
    assert {d["predictions_sha256"] for d in drawn} == {recorded_predictions_sha256(runs["good"])}
    assert len({d["run_turns_sha256"] for d in drawn}) == 1


def test_a_genuine_sample_passes_and_says_how_it_was_checked(runs, tmp_path, capsys):
    sample = tmp_path / "s.jsonl"
    drawn = draw(runs["good"], sample)
    labels = label_file(tmp_path / "l.jsonl", runs["good"],
                        [(d["dialogue_id"], d["turn_index"]) for d in drawn])
    code, out = agreement(runs["good"], labels, sample, capsys)
    assert code == 0 and "sample checked: drawn again from this run" in out


def test_hand_picked_turns_under_a_genuine_header_are_refused(runs, tmp_path, capsys):
    sample = tmp_path / "s.jsonl"
    drawn = draw(runs["good"], sample)
    rows = rows_of(runs["good"])
    # every hand-picked turn is one the judge and the truth (RULE-2.4 here) call correct
    picked = [k for k, r in rows.items() if r["verdict"] and r["rule"]["2.4"]][:5]
    assert len(picked) == 5 and set(picked) != {(d["dialogue_id"], d["turn_index"])
                                                for d in drawn}
    tampered = write(tmp_path / "picked.jsonl", with_turns(drawn, picked))
    labels = label_file(tmp_path / "l.jsonl", runs["good"], picked)
    code, out = agreement(runs["good"], labels, tampered, capsys)
    assert code == 2
    first = next(i for i, k in enumerate(picked)
                 if k not in {(d["dialogue_id"], d["turn_index"]) for d in drawn})
    assert f"picked.jsonl:{first + 1}: field 'dialogue_id'" in out
    assert "is not drawn by the recorded design random" in out
    assert "hand-picked set or a review queue" in out and "Traceback" not in out


def test_a_disagreement_queue_passed_off_as_random_is_refused(runs, tmp_path, capsys):
    rows = rows_of(runs["good"])
    queue = [k for k, r in rows.items() if r["verdict"] != r["rule"]["2.1"]]
    sample = tmp_path / "s.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--n", str(len(queue)), "--seed", "3",
                 "--out", str(sample)]) == 0
    drawn = [json.loads(line) for line in sample.read_text().splitlines()]
    assert {(d["dialogue_id"], d["turn_index"]) for d in drawn} != set(queue)
    tampered = write(tmp_path / "queue.jsonl", with_turns(drawn, queue))
    labels = label_file(tmp_path / "l.jsonl", runs["good"], queue)
    code, out = agreement(runs["good"], labels, tampered, capsys)
    assert code == 2 and "not drawn by this design" in out


def test_one_edited_turn_id_is_refused_naming_its_line(runs, tmp_path, capsys):
    sample = tmp_path / "s.jsonl"
    drawn = draw(runs["good"], sample)
    listed = {(d["dialogue_id"], d["turn_index"]) for d in drawn}
    other = next(k for k in rows_of(runs["good"]) if k not in listed)
    edited = [dict(d) for d in drawn]
    edited[2].update(dialogue_id=other[0], turn_index=other[1])
    tampered = write(tmp_path / "edited.jsonl", edited)
    labels = label_file(tmp_path / "l.jsonl", runs["good"],
                        [(d["dialogue_id"], d["turn_index"]) for d in edited])
    code, out = agreement(runs["good"], labels, tampered, capsys)
    assert code == 2 and "edited.jsonl:3: field 'dialogue_id'" in out
    assert (f"edited: that design draws dialogue {drawn[2]['dialogue_id']!r} turn "
            f"{drawn[2]['turn_index']} instead") in out
    # an id the run does not hold at all
    edited[2].update(dialogue_id="NOPE", turn_index=0)
    code, out = agreement(runs["good"], labels, write(tampered, edited), capsys)
    assert code == 2 and "'NOPE' turn 0 is not in this run" in out
    # a weight changed by hand
    edited = [dict(d) for d in drawn]
    for d in edited:
        d.update(stratum_size=12, weight=12 / 5, inclusion_probability=5 / 12)
    code, out = agreement(runs["good"], labels, write(tampered, edited), capsys)
    assert code == 2 and "edited.jsonl:1: field 'stratum_size'" in out and "edited" in out


def test_a_sample_of_another_run_is_refused(runs, tmp_path, capsys):
    sample = tmp_path / "weak.jsonl"
    drawn = draw(runs["weak"], sample)
    labels = label_file(tmp_path / "l.jsonl", runs["good"],
                        [(d["dialogue_id"], d["turn_index"]) for d in drawn])
    code, out = agreement(runs["good"], labels, sample, capsys)
    assert code == 2 and "weak.jsonl:1: field 'predictions_sha256'" in out
    assert "it is a sample of another run" in out


def test_a_file_of_an_older_release_stays_checkable(runs, tmp_path, capsys):
    sample = tmp_path / "s.jsonl"
    drawn = draw(runs["good"], sample)
    old = [{k: v for k, v in d.items() if k not in NEW_FIELDS} for d in drawn]
    old_file = write(tmp_path / "old.jsonl", old)
    assert main(["validate", "sample", str(old_file)]) == 0
    labels = label_file(tmp_path / "l.jsonl", runs["good"],
                        [(d["dialogue_id"], d["turn_index"]) for d in drawn])
    code, out = agreement(runs["good"], labels, old_file, capsys)
    assert code == 0 and "a file of an older release" in out
    listed = {(d["dialogue_id"], d["turn_index"]) for d in drawn}
    picked = [k for k in rows_of(runs["good"]) if k not in listed][:5]
    code, out = agreement(runs["good"], labels,
                          write(tmp_path / "old-picked.jsonl", with_turns(old, picked)), capsys)
    assert code == 2 and "a sample of another run" in out  # it cannot tell which, and says so


def test_compare_refuses_a_tampered_sample(runs, tmp_path, capsys):
    sample = tmp_path / "s.jsonl"
    drawn = draw(runs["good"], sample)
    listed = {(d["dialogue_id"], d["turn_index"]) for d in drawn}
    picked = [k for k in rows_of(runs["good"]) if k not in listed][:5]
    tampered = write(tmp_path / "picked.jsonl", with_turns(drawn, picked))
    good = label_file(tmp_path / "g.jsonl", runs["good"], picked)
    weak = label_file(tmp_path / "w.jsonl", runs["weak"], picked)
    capsys.readouterr()
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(tampered),
                 "--human", str(good), str(weak)]) == 2
    assert "picked.jsonl:1: field 'dialogue_id'" in flat(capsys.readouterr().err)


def test_labels_without_a_sample_give_agreement_but_no_population_estimate(runs, tmp_path,
                                                                            capsys):
    rows = rows_of(runs["good"])
    queue = [k for k, r in rows.items() if r["verdict"] != r["rule"]["2.1"]]
    labels = label_file(tmp_path / "l.jsonl", runs["good"], queue)
    report = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--n-boot", "0",
                 "--json", str(report)]) == 0
    out = flat(capsys.readouterr().out)
    assert "no population estimate" in out and "not a random sample" in out
    data = json.loads(report.read_text())
    assert data["population"] is None and "not a random sample" in data["population_note"]


# --------------------------------------------------------------------------- item 2


def stamped(path, run, keys, digest: str | None = None):
    """Labels of ``run``'s predictions naming them (as the service's exports do)."""
    label_file(path, run, keys)
    digest = digest or recorded_predictions_sha256(run)
    records = [json.loads(line) | {"predictions_sha256": digest}
               for line in path.read_text().splitlines()]
    return write(path, records)


def test_swapped_labels_files_are_paired_by_their_predictions(runs, tmp_path, capsys):
    sample = tmp_path / "shared.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--n", "11", "--out",
                 str(sample)]) == 0
    keys = list(rows_of(runs["good"]))
    good = stamped(tmp_path / "good.jsonl", runs["good"], keys)
    weak = stamped(tmp_path / "weak.jsonl", runs["weak"], keys)
    values = []
    for order in ((good, weak), (weak, good)):
        table = tmp_path / "t.json"
        capsys.readouterr()
        assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                     "--human", *map(str, order), "--json", str(table)]) == 0
        out = flat(capsys.readouterr().out)
        assert "paired with runs by the order" not in out
        assert "sample checked: drawn again from this run" in out
        values.append(json.loads(table.read_text())["differences"][0]["estimates"]["tsa"]
                      ["labels"]["value"])
    expected = [rows_of(runs["good"])[k]["rule"]["2.4"] - rows_of(runs["weak"])[k]["rule"]["2.4"]
                for k in keys]
    assert values[0] == values[1] == pytest.approx(100 * sum(expected) / len(expected))
    assert values[0] != 0  # so a swap by order would have flipped the sign


def test_labels_without_digests_pair_by_order_with_a_warning(runs, tmp_path, capsys):
    out, table = compare_labelled(runs, tmp_path, capsys)
    assert "warning: labels files are paired with runs by the order given" in out
    assert "paired with runs by the order" in table["labels_pairing"]


def test_labels_of_other_predictions_are_refused(runs, tmp_path, capsys):
    keys = list(rows_of(runs["good"]))
    weak = stamped(tmp_path / "weak.jsonl", runs["weak"], keys)
    capsys.readouterr()
    assert main(["agreement", str(runs["good"]), "--human", str(weak), "--n-boot", "0"]) == 2
    err = flat(capsys.readouterr().err)
    assert "weak.jsonl:1: field 'predictions_sha256'" in err and "another run's" in err
    stranger = stamped(tmp_path / "stranger.jsonl", runs["good"], keys, digest="f" * 64)
    good = stamped(tmp_path / "good.jsonl", runs["good"], keys)
    sample = tmp_path / "s.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--n", "11", "--out",
                 str(sample)]) == 0
    capsys.readouterr()
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                 "--human", str(good), str(stranger)]) == 2
    err = flat(capsys.readouterr().err)
    assert "stranger.jsonl:1: field 'predictions_sha256'" in err and "no run given" in err


# --------------------------------------------------------------------------- item 5


def test_ties_and_unsure_turns_are_stated_with_bounds(runs, tmp_path, capsys):
    sample = tmp_path / "s.jsonl"
    drawn = draw(runs["good"], sample)
    keys = [(d["dialogue_id"], d["turn_index"]) for d in drawn]
    records = []
    for position, (d, t) in enumerate(keys):
        if position < 2:  # ana and ben split
            records += [{"dialogue_id": d, "turn_index": t, "label": 1, "reviewer": "ana"},
                        {"dialogue_id": d, "turn_index": t, "label": 0, "reviewer": "ben"}]
        elif position == 2:  # unsure
            records.append({"dialogue_id": d, "turn_index": t, "label": None, "unsure": True,
                            "reviewer": "ana"})
        else:
            records += [{"dialogue_id": d, "turn_index": t, "label": 1, "reviewer": r}
                        for r in ("ana", "ben")]
    labels = write(tmp_path / "l.jsonl", records)
    report = tmp_path / "r.json"
    code, out = agreement(runs["good"], labels, sample, capsys, "--json", str(report))
    assert code == 0
    assert f"2 sampled turn(s) without a label because the reviewers split evenly: " \
           f"{keys[0][0]} turn {keys[0][1]}, {keys[1][0]} turn {keys[1][1]}" in out
    assert f"1 sampled turn(s) without a label because every label is unsure: " \
           f"{keys[2][0]} turn {keys[2][1]}" in out
    assert "have no label yet" not in out  # they are not counted as unlabelled
    assert "2 sampled turn(s) by the reviewers' majority, 0 adjudicated" in out
    data = json.loads(report.read_text())
    estimation = data["population"]["estimation"]
    assert estimation["unlabelled_sampled_turns"]["count"] == 0
    undecided = estimation["undecided_sampled_turns"]
    assert (undecided["tied"]["count"], undecided["unsure"]["count"]) == (2, 1)
    bounds = undecided["bounds"]["tsa"]
    # labels alone on a simple random sample: the share of correct labels
    assert bounds["upper"]["labels"]["value"] == pytest.approx(100.0)
    assert bounds["lower"]["labels"]["value"] == pytest.approx(40.0)
    assert data["population"]["estimates"]["tsa"]["labels"]["value"] == pytest.approx(100.0)
    assert data["human"]["undecided"]["tied"]["count"] == 2
    # an adjudicator decides the tied turns
    adjudicated = write(tmp_path / "adj.jsonl", [*records, *(
        {"dialogue_id": d, "turn_index": t, "label": 0, "reviewer": "cy"} for d, t in keys[:2])])
    code, out = agreement(runs["good"], adjudicated, sample, capsys, "--adjudicator", "cy",
                          "--json", str(report))
    assert code == 0 and "2 adjudicated" in out
    data = json.loads(report.read_text())
    assert data["population"]["estimates"]["tsa"]["labels"]["value"] == pytest.approx(50.0)
    code, out = agreement(runs["good"], adjudicated, sample, capsys, "--adjudicator", "zed")
    assert code == 2 and "no labels by adjudicator 'zed'" in out


def test_compare_states_ties_and_bounds_the_difference(runs, tmp_path, capsys):
    sample = tmp_path / "shared.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--n", "11", "--out",
                 str(sample)]) == 0
    keys = list(rows_of(runs["good"]))
    good = stamped(tmp_path / "good.jsonl", runs["good"], keys)
    weak = stamped(tmp_path / "weak.jsonl", runs["weak"], keys)
    split = json.loads(weak.read_text().splitlines()[0])  # a second reviewer splits on it
    weak.write_text(weak.read_text() + json.dumps(
        split | {"reviewer": "ben", "label": 1 - split["label"]}) + "\n")
    table = tmp_path / "t.json"
    capsys.readouterr()
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                 "--human", str(good), str(weak), "--json", str(table)]) == 0
    out = flat(capsys.readouterr().out)
    assert "1 sampled turn(s) without a label because the reviewers split evenly" in out
    undecided = json.loads(table.read_text())["differences"][0]["undecided_sampled_turns"]
    assert undecided["tied"]["count"] == 1 and "first run's favour" in undecided["treatment"]
    bounds = undecided["bounds"]["tsa"]
    # labels alone over 11 turns: the tied turn moves the difference by 100/11 each way
    assert (bounds["upper"]["labels"]["value"] - bounds["lower"]["labels"]["value"]
            == pytest.approx(100 / 11))
