"""A sample file is checked by drawing it again (issue 34, item 1): the tampered cases of the
issue at its scale (a genuine ``--design random --seed 3`` header over 50 hand-picked turns
that the judge and the truth call correct, a disagreement queue passed off as random, one turn
id edited, a sample of another run), files of older releases, and the ties and unsure turns of
item 5 with their bounds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judge import InputError
from judge.analysis import (
    HumanLabel,
    HumanLabels,
    agreement_report,
    check_sample,
    draw_sample,
    load_sample,
    run_turns_digest,
    sample_estimates,
    write_sample,
)
from judge.errors import DataMismatchError

PREDICTIONS = "a" * 64


def run(seed: int = 0, turns: int = 400) -> tuple[list[dict], dict[tuple[str, int], int]]:
    """A run whose judge is right on 90 % of turns, with a truth of TSA about 75 %."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for n in range(turns):
        correct = bool(rng.random() < 0.75)
        judge = correct if rng.random() < 0.9 else not correct
        key = (f"D{n // 4:03d}", n % 4)
        rows.append({"dialogue_id": key[0], "turn_index": key[1], "verdict": judge,
                     "rule": {"2.1": judge if rng.random() < 0.8 else not judge},
                     "pred_turn_state": {}, "gold_turn_state": {}})
        truth[(key[0].lower(), key[1])] = int(correct)
    return rows, truth


ROWS, TRUTH = run()


def genuine(tmp_path, rows=ROWS, **options) -> tuple[object, list[dict]]:
    sample = draw_sample(rows, n=50, design="random", seed=3, predictions_sha256=PREDICTIONS,
                         **options)
    path = tmp_path / "genuine.jsonl"
    write_sample(sample, path)
    return sample, [json.loads(line) for line in path.read_text().splitlines()]


def tampered(tmp_path, name: str, records: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return load_sample(path)


def keys_of(records) -> list[tuple[str, int]]:
    return [(r["dialogue_id"], r["turn_index"]) for r in records]


def test_the_genuine_file_is_drawn_again_exactly(tmp_path):
    sample, records = genuine(tmp_path)
    loaded = load_sample(tmp_path / "genuine.jsonl")
    assert loaded.turns == sample.turns
    assert check_sample(loaded, ROWS, predictions_sha256=PREDICTIONS).startswith(
        "drawn again from this run with design random")
    assert {r["n"] for r in records} == {50} and {r["procedure"] for r in records} == {1}
    assert {r["run_turns_sha256"] for r in records} == {run_turns_digest(ROWS)}


def test_fifty_hand_picked_correct_turns_under_a_genuine_header_are_refused(tmp_path):
    _, records = genuine(tmp_path)
    drawn = set(keys_of(records))
    picked = [r for r in ROWS if r["verdict"] and TRUTH[(r["dialogue_id"].lower(),
                                                        r["turn_index"])]
              and (r["dialogue_id"], r["turn_index"]) not in drawn][:50]
    assert len(picked) == 50
    fake = tampered(tmp_path, "picked.jsonl", [
        {**records[0], "dialogue_id": r["dialogue_id"], "turn_index": r["turn_index"]}
        for r in picked])
    labels = HumanLabels([HumanLabel(dialogue_id=r["dialogue_id"], turn_index=r["turn_index"],
                                     label=1) for r in picked])
    with pytest.raises(DataMismatchError) as info:
        agreement_report(ROWS, labels, sample=fake, n_boot=0, predictions_sha256=PREDICTIONS)
    error = info.value
    assert (error.line, error.field) == (1, "dialogue_id")
    assert "not drawn by this design (50 of the file's 50 turns are not)" in str(error)
    # without the sample the same labels give agreement figures and say why no estimate
    report = agreement_report(ROWS, labels, n_boot=0)
    assert report["population"] is None and "not a random sample" in report["population_note"]


def test_a_disagreement_queue_passed_off_as_random_is_refused(tmp_path):
    _, records = genuine(tmp_path)
    queue = [r for r in ROWS if r["verdict"] != r["rule"]["2.1"]][:50]
    fake = tampered(tmp_path, "queue.jsonl", [
        {**records[0], "dialogue_id": r["dialogue_id"], "turn_index": r["turn_index"]}
        for r in queue])
    with pytest.raises(DataMismatchError, match="a hand-picked set or a review queue"):
        sample_estimates(fake, [ROWS], [TRUTH])


def test_one_edited_turn_id_is_named_with_the_turn_the_design_draws(tmp_path):
    _, records = genuine(tmp_path)
    drawn = set(keys_of(records))
    other = next(k for k in ((r["dialogue_id"], r["turn_index"]) for r in ROWS)
                 if k not in drawn)
    edited = [dict(r) for r in records]
    edited[17].update(dialogue_id=other[0], turn_index=other[1])
    with pytest.raises(DataMismatchError) as info:
        check_sample(tampered(tmp_path, "edited.jsonl", edited), ROWS)
    assert info.value.line == 18
    assert (f"edited: that design draws dialogue {records[17]['dialogue_id']!r} turn "
            f"{records[17]['turn_index']} instead") in str(info.value)


STRATUM_FIELDS = ("stratum", "judge", "rule", "stratum_size", "stratum_sample",
                  "inclusion_probability", "weight")


def test_an_edit_deep_in_a_genuine_file_is_refused_at_its_line(tmp_path):
    """Edits far past the first lines, each consistent enough to pass the file's own checks:
    two turns' strata (and so their weights) swapped at lines 40 and 45, and the last line's
    turn id changed. Each is refused naming the edited line, not merely some line."""
    sample = draw_sample(ROWS, n=50, design="judge-rule", gold="2.1", seed=3,
                         predictions_sha256=PREDICTIONS)
    write_sample(sample, tmp_path / "strata.jsonl")
    records = [json.loads(line) for line in (tmp_path / "strata.jsonl").read_text().splitlines()]
    check_sample(load_sample(tmp_path / "strata.jsonl"), ROWS)  # the genuine file passes
    a, b = records[39], records[44]
    assert a["stratum"] != b["stratum"] and a["weight"] != b["weight"]
    swapped = [dict(r) for r in records]
    for name in STRATUM_FIELDS:
        swapped[39][name], swapped[44][name] = b[name], a[name]
    edited = tampered(tmp_path, "swapped.jsonl", swapped)  # the file's own checks pass
    with pytest.raises(DataMismatchError) as info:
        check_sample(edited, ROWS)
    assert (info.value.line, info.value.field) == (40, "stratum")
    assert f"dialogue {a['dialogue_id']!r} turn {a['turn_index']} has stratum" in str(info.value)
    with pytest.raises(DataMismatchError):
        sample_estimates(edited, [ROWS], [TRUTH])

    _, plain = genuine(tmp_path)
    drawn = set(keys_of(plain))
    other = next(k for k in ((r["dialogue_id"], r["turn_index"]) for r in reversed(ROWS))
                 if k not in drawn)
    last = [dict(r) for r in plain]
    last[-1].update(dialogue_id=other[0], turn_index=other[1])
    with pytest.raises(DataMismatchError) as info:
        check_sample(tampered(tmp_path, "last.jsonl", last), ROWS)
    assert (info.value.line, info.value.field) == (50, "dialogue_id")


def test_a_sample_of_another_run_is_refused_by_predictions_or_by_the_run_digest(tmp_path):
    other_rows, _ = run(seed=1)
    sample, _ = genuine(tmp_path, rows=other_rows)
    with pytest.raises(DataMismatchError, match="it is a sample of another run") as info:
        check_sample(sample, ROWS, predictions_sha256="b" * 64)
    assert info.value.field == "predictions_sha256"
    # predictions unknown: the run digest says why the turns differ
    fewer = [dict(r) for r in ROWS]
    for r in fewer[::7]:
        r["verdict"] = None  # error turns leave the population
    with pytest.raises(DataMismatchError, match="the sample was drawn from another run"):
        check_sample(load_sample(tmp_path / "genuine.jsonl"), fewer)


def test_older_files_are_drawn_again_as_procedure_one(tmp_path):
    _, records = genuine(tmp_path)
    old = [{k: v for k, v in r.items()
            if k not in ("n", "procedure", "run_turns_sha256", "predictions_sha256")}
           for r in records]
    sample = tampered(tmp_path, "old.jsonl", old)
    assert not sample.recorded
    assert check_sample(sample, ROWS).startswith("a file of an older release")
    old[0] = {**old[0], "turn_index": (old[0]["turn_index"] + 1) % 4}
    with pytest.raises(DataMismatchError, match=r"drawn from another run|not drawn by|edited"):
        check_sample(tampered(tmp_path, "old-edited.jsonl", old), ROWS)
    newer = [{**r, "procedure": 9} for r in records]
    with pytest.raises(InputError, match="procedure 9") as info:
        tampered(tmp_path, "newer.jsonl", newer)
    assert info.value.field == "procedure"


def test_ties_and_unsure_sampled_turns_are_named_with_bounds(tmp_path):
    sample, records = genuine(tmp_path)
    keys = keys_of(records)
    labels = []
    for position, (d, t) in enumerate(keys):
        truth = TRUTH[(d.lower(), t)]
        if position < 4:  # two reviewers split
            labels += [HumanLabel(dialogue_id=d, turn_index=t, label=1, reviewer="ana"),
                       HumanLabel(dialogue_id=d, turn_index=t, label=0, reviewer="ben")]
        elif position < 6:
            labels.append(HumanLabel(dialogue_id=d, turn_index=t, label=None, unsure=True,
                                     reviewer="ana"))
        else:
            labels.append(HumanLabel(dialogue_id=d, turn_index=t, label=truth,
                                     reviewer="ana"))
    human = HumanLabels(labels)
    resolution = human.resolve()
    assert len(resolution.tied) == 4 and len(resolution.unsure) == 2
    result = sample_estimates(sample, [ROWS], [resolution.labels], resolutions=[resolution])
    undecided = result["undecided_sampled_turns"]
    assert (undecided["tied"]["count"], undecided["unsure"]["count"], undecided["count"]) == (
        4, 2, 6)
    assert result["unlabelled_sampled_turns"]["count"] == 0
    assert undecided["labels_by"] == {"majority": 44, "adjudicated": 0}
    labelled = [TRUTH[(d.lower(), t)] for d, t in keys[6:]]
    tsa = undecided["bounds"]["tsa"]
    assert tsa["upper"]["labels"]["value"] == pytest.approx(100 * (sum(labelled) + 6) / 50)
    assert tsa["lower"]["labels"]["value"] == pytest.approx(100 * sum(labelled) / 50)
    estimate = result["estimates"]["tsa"]["labels"]["value"]
    assert tsa["lower"]["labels"]["value"] <= estimate <= tsa["upper"]["labels"]["value"]
    assert tsa["lower"]["ppi"]["value"] <= tsa["upper"]["ppi"]["value"]
    # an adjudicator decides the tied turns; unsure ones stay open
    ruled = HumanLabels([*labels, *(HumanLabel(dialogue_id=d, turn_index=t, label=0,
                                               reviewer="cy") for d, t in keys[:4])])
    decided = ruled.resolve("cy")
    assert decided.tied == [] and sum(h == "adjudicated" for h in decided.how.values()) == 4
