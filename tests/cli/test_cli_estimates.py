"""CLI surface of the estimates: sample designs without gold, agreement's estimates block,
compare's difference verdict, labels plan, and clear errors."""

from __future__ import annotations

import json
import shutil

import pytest

from judge.cli import main


def flat(text: str) -> str:
    """Console output with rich's wrapping undone."""
    return " ".join(text.split())


def rows_of(run) -> dict[tuple[str, int], dict]:
    lines = (run / "judgments.jsonl").read_text().splitlines()
    return {(r["dialogue_id"], r["turn_index"]): r for r in map(json.loads, lines)}


def label_file(path, run, keys, version="2.4"):
    """Stand-in human labels: the RULE verdict against the corrected 2.4 annotation."""
    rows = rows_of(run)
    path.write_text("".join(json.dumps({
        "dialogue_id": d, "turn_index": t, "label": int(rows[(d, t)]["rule"][version]),
        "reviewer": "ana"}) + "\n" for d, t in keys))
    return path


def test_random_sample_without_gold_and_agreement_estimates(runs, tmp_path, capsys):
    sample = tmp_path / "sample.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--design", "random", "--n", "7",
                 "--seed", "1", "--out", str(sample)]) == 0
    assert "Simple random sample of 7 turns from 11" in flat(capsys.readouterr().out)
    drawn = [json.loads(line) for line in sample.read_text().splitlines()]
    assert {(d["design"], d["unit"], d["gold"]) for d in drawn} == {("random", "turn", None)}
    assert main(["validate", "sample", str(sample)]) == 0
    keys = [(d["dialogue_id"], d["turn_index"]) for d in drawn]
    extra = next(k for k in rows_of(runs["good"]) if k not in keys)
    labels = label_file(tmp_path / "labels.jsonl", runs["good"], [*keys, extra])
    report = tmp_path / "report.json"
    capsys.readouterr()
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--sample",
                 str(sample), "--n-boot", "0", "--json", str(report)]) == 0
    out = flat(capsys.readouterr().out)
    assert "Estimates (random design by turn, 95 % t intervals)" in out
    assert "1 labelled turn(s) are not in the sample file" in out
    block = json.loads(report.read_text())["population"]
    tsa = block["estimates"]["tsa"]
    assert set(tsa) == {"judge", "labels", "ppi"}
    assert tsa["judge"]["ci"] is None and "bias" in tsa["judge"]["note"]
    labelled = [rows_of(runs["good"])[k]["rule"]["2.4"] for k in keys]
    assert tsa["labels"]["value"] == pytest.approx(100 * sum(labelled) / len(labelled))
    for name in ("labels", "ppi"):
        assert tsa[name]["n_labelled"] == 7 and tsa[name]["n_turns"] == 11
        assert len(tsa[name]["ci"]) == 2
    assert block["estimation"]["left_out"]["count"] == 1
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--sample",
                 str(sample), "--n-boot", "0", "--tuning", "0.5", "--confidence", "0.9",
                 "--json", str(report)]) == 0
    tsa = json.loads(report.read_text())["population"]["estimates"]["tsa"]
    assert tsa["ppi"]["lambda"] == 0.5 and tsa["ppi"]["tuning"] == "fixed"


def test_whole_dialogue_sample_reports_jga_and_success(runs, tmp_path, capsys):
    sample = tmp_path / "dialogues.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--design", "domain", "--unit",
                 "dialogue", "--n", "3", "--out", str(sample)]) == 0
    drawn = [json.loads(line) for line in sample.read_text().splitlines()]
    assert len({d["dialogue_id"] for d in drawn}) == 3
    labels = label_file(tmp_path / "l.jsonl", runs["good"],
                        [(d["dialogue_id"], d["turn_index"]) for d in drawn])
    report = tmp_path / "r.json"
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--sample",
                 str(sample), "--n-boot", "0", "--json", str(report)]) == 0
    estimates = json.loads(report.read_text())["population"]["estimates"]
    assert set(estimates) == {"tsa", "jga", "success"}
    assert "Estimates (domain design by dialogue" in flat(capsys.readouterr().out)


def compare_labelled(runs, tmp_path, capsys, *sample_args: str) -> tuple[str, dict]:
    """``compare`` of the good and the weak run on a sample of 11 turns drawn from the good
    run, every turn of both labelled (labels files in the runs' order): the flattened output
    and the JSON table."""
    sample = tmp_path / "shared.jsonl"
    assert main(["labels", "sample", str(runs["good"]), *sample_args, "--n", "11", "--out",
                 str(sample)]) == 0
    keys = list(rows_of(runs["good"]))
    good = label_file(tmp_path / "good.jsonl", runs["good"], keys)
    weak = label_file(tmp_path / "weak.jsonl", runs["weak"], keys)
    table = tmp_path / "compare.json"
    capsys.readouterr()
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                 "--human", str(good), str(weak), "--json", str(table)]) == 0
    return flat(capsys.readouterr().out), json.loads(table.read_text())


def test_compare_names_a_better_system_only_when_the_interval_excludes_zero(runs, tmp_path,
                                                                             capsys):
    out, table = compare_labelled(runs, tmp_path, capsys, "--design", "random")
    keys = list(rows_of(runs["good"]))
    difference = table["differences"][0]
    ppi = difference["estimates"]["tsa"]["ppi"]
    # every turn is labelled: a census, so the interval is the point (no sampling error)
    assert ppi["ci"][0] == pytest.approx(ppi["value"]) == pytest.approx(ppi["ci"][1])
    expected = [rows_of(runs["good"])[k]["rule"]["2.4"] - rows_of(runs["weak"])[k]["rule"]["2.4"]
                for k in keys]
    assert ppi["value"] == pytest.approx(100 * sum(expected) / len(expected))
    if ppi["value"] > 0:
        assert f"{runs['good']} is better than {runs['weak']}" in out
    else:
        assert "is better than" not in difference["verdict"]


def test_labels_plan(runs, tmp_path, capsys):
    out_json = tmp_path / "plan.json"
    assert main(["labels", "plan", str(runs["good"]), "--width", "17", "--disagreement",
                 "0.1", "--json", str(out_json)]) == 0
    assert "labels alone" in capsys.readouterr().out
    plan = json.loads(out_json.read_text())
    assert plan["ppi"]["labels_needed"] <= plan["labels"]["labels_needed"] <= 11


@pytest.mark.parametrize(("argv", "message"), [
    (["labels", "sample", "{run}", "--n", "3", "--design", "judge-rule", "--out",
      "{tmp}/s.jsonl"], "give --gold"),
    (["labels", "sample", "{run}", "--n", "3", "--design", "judge-rule", "--unit", "dialogue",
      "--gold", "2.1", "--out", "{tmp}/s.jsonl"], "stratifies turns"),
    (["labels", "plan", "{run}", "--width", "10"], "not both and not neither"),
    (["labels", "plan", "{run}", "--width", "10", "--sample", "{tmp}/x.jsonl"], "needs --human"),
    (["agreement", "{run}", "--tuning", "best"], "tuning must be"),
    (["compare", "{run}", "{run}", "--sample", "{tmp}/x.jsonl", "--human", "{tmp}/x.jsonl"],
     "one --human file per run"),
])
def test_errors_are_clear(runs, tmp_path, capsys, argv, message):
    args = [a.format(run=runs["good"], tmp=tmp_path) for a in argv]
    assert main(args) == 2
    err = flat(capsys.readouterr().err)
    assert message in err and "Traceback" not in err


def test_compare_three_runs_on_a_domain_sample(runs, tmp_path, capsys):
    """With three runs, pairs after the first used to rebuild the domain strata from their
    own predictions and fail; every pair now uses the strata of the run the sample was drawn
    from, whichever position it has on the command line."""
    third = tmp_path / "good-again"
    shutil.copytree(runs["good"], third)
    sample = tmp_path / "domain.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--design", "domain", "--n", "10",
                 "--seed", "2", "--out", str(sample)]) == 0
    keys = [(d["dialogue_id"], d["turn_index"])
            for d in map(json.loads, sample.read_text().splitlines())]
    files = {name: label_file(tmp_path / f"{name}.jsonl", run, keys)
             for name, run in (("good", runs["good"]), ("weak", runs["weak"]),
                               ("again", third))}
    table = tmp_path / "compare.json"
    capsys.readouterr()
    assert main(["compare", str(runs["weak"]), str(runs["good"]), str(third), "--sample",
                 str(sample), "--human", str(files["weak"]), str(files["good"]),
                 str(files["again"]), "--json", str(table)]) == 0
    differences = json.loads(table.read_text())["differences"]
    assert [(d["a"], d["b"]) for d in differences] == [
        (str(runs["weak"]), str(runs["good"])), (str(runs["weak"]), str(third)),
        (str(runs["good"]), str(third))]
    same = differences[2]["estimates"]["tsa"]
    assert same["labels"]["value"] == pytest.approx(0.0)
    assert same["judge"]["value"] == pytest.approx(0.0)
    for difference in differences:
        low, high = difference["estimates"]["tsa"]["ppi"]["ci"]
        assert high - low > 0  # 10 of 11 turns: a sample, not a census


def test_compare_refuses_a_judge_rule_sample_and_names_the_design_to_use(runs, tmp_path,
                                                                          capsys):
    sample = tmp_path / "jr.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--design", "judge-rule", "--gold",
                 "2.1", "--n", "8", "--out", str(sample)]) == 0
    keys = [(d["dialogue_id"], d["turn_index"])
            for d in map(json.loads, sample.read_text().splitlines())]
    good = label_file(tmp_path / "g.jsonl", runs["good"], keys)
    weak = label_file(tmp_path / "w.jsonl", runs["weak"], keys)
    capsys.readouterr()
    assert main(["compare", str(runs["good"]), str(runs["weak"]), "--sample", str(sample),
                 "--human", str(good), str(weak)]) == 2
    err = flat(capsys.readouterr().err)
    assert "judge-rule sample cannot give the difference" in err
    assert "--design random" in err and "Traceback" not in err


def test_a_small_whole_dialogue_sample_has_a_width_and_a_warning(runs, tmp_path, capsys):
    """Labels that equal the judge's verdicts on every drawn dialogue: the interval used to
    have width 0 (JGA ppi 43.6 [43.6, 43.6])."""
    sample = tmp_path / "d.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--design", "random", "--unit",
                 "dialogue", "--n", "2", "--out", str(sample)]) == 0
    rows = rows_of(runs["good"])
    drawn = [(d["dialogue_id"], d["turn_index"])
             for d in map(json.loads, sample.read_text().splitlines())]
    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(json.dumps({
        "dialogue_id": d, "turn_index": t, "label": int(rows[(d, t)]["verdict"]),
        "reviewer": "ana"}) + "\n" for d, t in drawn))
    report = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--sample",
                 str(sample), "--n-boot", "0", "--json", str(report)]) == 0
    out = flat(capsys.readouterr().out)
    assert "Warning: only 2 labelled dialogues" in out
    estimates = json.loads(report.read_text())["population"]["estimates"]
    for metric in ("tsa", "jga", "success"):
        for name in ("labels", "ppi"):
            low, high = estimates[metric][name]["ci"]
            assert high - low > 1.0, (metric, name)


def test_labels_plan_states_its_criterion_and_plans_labels_for_a_perfect_judge(runs, tmp_path,
                                                                              capsys):
    out_json = tmp_path / "plan.json"
    assert main(["labels", "plan", str(runs["good"]), "--width", "60", "--disagreement",
                 "0", "--json", str(out_json)]) == 0
    out = flat(capsys.readouterr().out)
    assert "Criterion:" in out and "at least 80% of simple random samples" in out
    plan = json.loads(out_json.read_text())
    for key in ("labels", "ppi"):
        assert plan[key]["labels_needed"] >= 2
        assert plan[key]["width_at_share"] <= 60


def test_agreement_tests_the_judge_against_two_reviewers_and_says_when_overlap_is_short(
        runs, tmp_path, capsys):
    rows = rows_of(runs["good"])
    labels = tmp_path / "two.jsonl"
    labels.write_text("".join(
        json.dumps({"dialogue_id": d, "turn_index": t, "label": int(r["rule"][version]),
                    "reviewer": name}) + "\n"
        for (d, t), r in rows.items() for name, version in (("ana", "2.4"), ("bo", "2.1"))))
    report = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--n-boot", "50",
                 "--epsilon", "0.2", "--json", str(report)]) == 0
    out = flat(capsys.readouterr().out)
    assert "alternative-annotator test (ε = 0.2, Benjamini-Yekutieli at q = 0.05" in out
    assert "not enough overlap" in out and "at least 30 labelled turns" in out
    block = json.loads(report.read_text())["alt_test"]
    assert block["epsilon"] == 0.2 and block["enough_overlap"] is False
    assert [(e["reviewer"], e["shared_turns"]) for e in block["reviewers"]] == [
        ("ana", 11), ("bo", 11)]
    capsys.readouterr()
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--epsilon",
                 "1"]) == 2
    assert "epsilon must be a number in [0, 1)" in flat(capsys.readouterr().err)


def test_compare_labels_two_systems_of_one_method_apart(runs, capsys):
    """Two systems judged by one method were both labelled ``two-dim`` in compare's text:
    each run's rows, its description and its calls now carry a label of its own."""
    assert main(["compare", str(runs["good"]), str(runs["weak"])]) == 0
    out = capsys.readouterr().out
    heads = [line.split("  ")[0].strip() for line in out.splitlines()
             if line.startswith("two-dim")]
    assert heads[:2] == ["two-dim · good", "two-dim · weak"], out
    assert "two-dim · good: system example-dst" in flat(out)
    assert "two-dim · weak: system weaker-dst" in flat(out)
    assert "two-dim · good 22 /" in flat(out) and "two-dim · weak 22 /" in flat(out)


def test_method_labels_are_distinct_whatever_the_runs_share():
    from judge.cli._report import method_labels

    assert method_labels([{"method": "a", "run": "x"}, {"method": "b", "run": "y"}]) == ["a", "b"]
    same_folder = [{"method": "a", "run": "x/r", "system": "s"},
                   {"method": "a", "run": "y/r", "system": "t"}, {"method": "b", "run": "z"}]
    assert method_labels(same_folder) == ["a · s", "a · t", "b"]
    same_system = [{"method": "a", "run": "x/r", "system": "s"},
                   {"method": "a", "run": "y/r", "system": "s"}]
    assert method_labels(same_system) == ["a · x/r", "a · y/r"]
    twice = [{"method": "a", "run": "x", "system": "s"}] * 2
    assert method_labels(twice) == ["a #1", "a #2"]


@pytest.mark.parametrize("width", (80, 60))
def test_the_estimate_comes_first_whole_and_named_for_its_design(runs, tmp_path, capsys,
                                                                 monkeypatch, width):
    """At 80 columns the estimates table comes before the agreement tables with every header
    word whole (not ``metr`` / ``ic``); a simple random sample is not called stratified; the
    labels-only figure printed twice (bootstrap and t) says which is the estimate."""
    from judge.analysis.tables import LABELS_ONLY_NOTE

    sample = tmp_path / "sample.jsonl"
    assert main(["labels", "sample", str(runs["good"]), "--design", "random", "--n", "7",
                 "--seed", "1", "--out", str(sample)]) == 0
    keys = [(d["dialogue_id"], d["turn_index"])
            for d in map(json.loads, sample.read_text().splitlines())]
    labels = label_file(tmp_path / "labels.jsonl", runs["good"], keys)
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["agreement", str(runs["good"]), "--human", str(labels), "--sample",
                 str(sample), "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= width
    assert out.index("Estimates (") < out.index("Agreement (")
    for word in ("metric", "estimate", "labelled", "turns", "judge", "labels", "ppi"):
        assert word in out.split(), (word, out)
    assert "from the simple random sample" in flat(out)
    assert "design)" not in out and "from the stratified" not in flat(out)
    assert flat(LABELS_ONLY_NOTE) in flat(out)


def test_labels_plan_on_a_small_run_says_why(runs, capsys):
    """On a run of 11 turns the plan is every turn and a width of 0.0: it says why."""
    assert main(["labels", "plan", str(runs["good"]), "--width", "10", "--disagreement",
                 "0.1"]) == 0
    out = flat(capsys.readouterr().out)
    assert "Why: this run has only 11 judged turns, fewer than the 50" in out
    assert "no sampling error" in out
