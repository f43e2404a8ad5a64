"""The annotation-audit page: item classification, rendering of real runs, and decision import.

Real run directories come from replaying the recorded cassettes, so the page is tested on the
judgments the judge actually writes, not on a guess of their shape.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import httpx
import pytest
import respx

from judge import (
    InputError,
    evaluate,
    load_config,
    load_dialogues,
    load_predictions,
    load_schema,
)
from judge.analysis._audit import (
    ACCEPTED_RECOMMENDATION,
    JUDGE_FLAG,
    KINDS,
    MISSED_DONTCARE,
    STALE_CARRY_OVER,
    SURFACE_VARIANT,
    VALUE_ERROR,
    VERSION_DISAGREEMENT,
    audit_items,
    embed_json,
    load_run_dir,
    surface_form,
    write_audit,
    write_labels,
)
from judge.analysis._audit_decisions import import_decisions

from ..conftest import (
    EXAMPLES,
    STALE_CASSETTES,
    assert_located,
    mount_cassette,
    require_cassette,
    write_jsonl,
)

RUNS = {"two-dim": "example-two-dim.json", "direct": "example-direct.json",
        "two-dim-cot": "example-two-dim-cot.json"}
DATA_BLOCK = re.compile(
    r'<script type="application/json" id="audit-data">(.*?)</script>', re.DOTALL)


def example_inputs():
    """The project's example schema, dialogues and predictions."""
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    return schema, dialogues, load_predictions(EXAMPLES / "predictions.jsonl", dialogues, schema)


def judge_run(out: Path, method: str, data) -> Path:
    """A real run directory: the judge replayed offline from the method's cassette."""
    schema, dialogues, predictions = data
    config = load_config({"model": "local", "method": method, "cache_dir": str(out / "cache")})
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, RUNS[method])
        result = evaluate(config, schema, dialogues, predictions,
                          http_client=httpx.AsyncClient())
    result.write(out / "run")
    return out / "run"


def row(turn_index: int = 0, *, pred: dict | None = None, gold: dict | None = None,
        verdict: bool | None = True, rule: dict | None = None, system: str = "",
        user: str = "", dialogue_id: str = "D1", **extra) -> dict:
    """A hand-made judgment row; RULE defaults to exact equality of the turn states."""
    pred = pred or {}
    gold = gold if gold is not None else {"2.1": {}, "2.4": {}}
    rule = rule if rule is not None else {v: g == pred for v, g in gold.items()}
    return {"dialogue_id": dialogue_id, "turn_index": turn_index, "system": system,
            "user": user, "pred_turn_state": pred, "verdict": verdict, "jga": verdict,
            "error": None if verdict is not None else "accuracy: timeout",
            "incorrect": [], "missed": [], "rule": rule, "gold_turn_state": gold,
            "calls": [], "trace": [], "state": {}, **extra}


def both(state: dict) -> dict:
    return {"2.1": dict(state), "2.4": dict(state)}


def kinds_of(items) -> dict[str, str]:
    return {item.slot: item.kind for item in items}


def write_run(folder: Path, rows: list[dict], summary: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "judgments.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps(summary or {}), encoding="utf-8")
    return folder


def embedded(html: str) -> dict:
    match = DATA_BLOCK.search(html)
    assert match, "the page embeds its data as JSON"
    return json.loads(match.group(1))


# --- classification on hand-made rows -----------------------------------------------------


def test_missed_dontcare_when_gold_says_dontcare_and_prediction_lacks_it():
    rows = [row(pred={"restaurant-food": "italian"},
                gold={"2.1": {"restaurant-food": "italian"},
                      "2.4": {"restaurant-food": "italian", "attraction-name": "dontcare"}},
                verdict=False, rule={"2.1": True, "2.4": False}),
            row(1, pred={"hotel-area": "north"}, gold=both({"hotel-area": "dontcare"}))]
    items = audit_items(rows)
    assert [(i.turn_index, i.slot, i.kind) for i in items] == [
        (0, "attraction-name", MISSED_DONTCARE), (1, "hotel-area", MISSED_DONTCARE)]
    assert items[0].gold == {"2.1": None, "2.4": "dontcare"} and items[0].predicted is None


@pytest.mark.parametrize(("predicted", "gold"), [
    ("the gonville hotel", "gonville hotel"),       # leading article
    ("pizza hut fen ditton", "pizza hut fenditton"),  # spacing
    ("Cheap", "cheap"),                             # case
    ("guesthouse", "guest house"),
    ("7pm", "19:00"), ("1715", "17:15"), ("9:30", "09:30"),  # time format
    ("9:45", "10:00|09:45"),                        # against one of the gold alternatives
])
def test_surface_variant(predicted, gold):
    items = audit_items([row(pred={"slot-x": predicted}, gold=both({"slot-x": gold}))])
    assert kinds_of(items) == {"slot-x": SURFACE_VARIANT}


def test_surface_form_keeps_real_differences_apart():
    assert surface_form("The  Acorn Guesthouse") == surface_form("acorn guest house")
    assert surface_form("theatre") != surface_form("atre")  # "the" only as a separate word
    assert surface_form("17:15") != surface_form("17:45")


def test_stale_carry_over_from_an_earlier_prediction_or_gold():
    rows = [
        row(0, pred={"hotel-area": "north"}, gold=both({"hotel-area": "north",
                                                        "hotel-type": "guest house"})),
        # the judge accepts the repeated pairs; gold has no change for them in this turn
        row(1, pred={"hotel-area": "north", "hotel-type": "guesthouse", "hotel-stars": "4"},
            gold=both({"hotel-stars": "4"})),
    ]
    items = audit_items(rows)
    assert [i.turn_index for i in items] == [0, 1, 1]  # turn 0 missed the gold hotel-type
    assert kinds_of(items[1:]) == {"hotel-area": STALE_CARRY_OVER,
                                   "hotel-type": STALE_CARRY_OVER}


def test_a_new_value_without_gold_change_is_not_stale():
    rows = [row(0, pred={"hotel-area": "north"}, gold=both({"hotel-area": "north"})),
            row(1, pred={"hotel-area": "south"}, gold=both({}))]
    assert kinds_of(audit_items(rows)) == {"hotel-area": VALUE_ERROR}


def test_accepted_recommendation_when_the_system_offered_the_gold_value():
    rows = [row(pred={"hotel-book day": "friday"},
                gold=both({"hotel-book day": "friday", "hotel-name": "acorn guest house"}),
                system="the Acorn Guesthouse has free wifi . shall i book it ?",
                user="yes please , from friday .")]
    assert kinds_of(audit_items(rows)) == {"hotel-name": ACCEPTED_RECOMMENDATION}
    # the same miss without the offer is an ordinary value error
    rows[0]["system"] = "which hotel would you like ?"
    assert kinds_of(audit_items(rows)) == {"hotel-name": VALUE_ERROR}


def test_accepted_recommendation_matches_whole_words_only():
    rows = [row(pred={}, gold=both({"restaurant-book people": "2"}),
                system="there are 12 places to choose from .")]
    assert kinds_of(audit_items(rows)) == {"restaurant-book people": VALUE_ERROR}


def test_annotation_version_disagreement():
    rows = [row(pred={"hotel-stars": "4"}, gold={"2.1": {"hotel-stars": "4"},
                                                 "2.4": {"hotel-stars": "3"}},
                verdict=False),
            row(1, pred={"hotel-parking": "yes"}, gold={"2.1": {}, "2.4": {"hotel-parking": "no"}},
                verdict=True)]
    items = audit_items(rows)
    assert [(i.slot, i.kind) for i in items] == [("hotel-stars", VERSION_DISAGREEMENT),
                                                  ("hotel-parking", VERSION_DISAGREEMENT)]
    assert items[0].disagreeing_versions == ["2.1"]
    assert items[1].disagreeing_versions == ["2.1", "2.4"]


def test_value_error_and_several_items_per_turn():
    rows = [row(pred={"train-day": "friday", "train-people": "4"},
                gold=both({"train-day": "saturday", "train-leaveat": "10:00"}))]
    items = audit_items(rows)
    assert [(i.slot, i.kind) for i in items] == [
        ("train-day", VALUE_ERROR), ("train-people", VALUE_ERROR),
        ("train-leaveat", VALUE_ERROR)]
    assert {i.turn_key for i in items} == {"D1::0"}


def test_rules_are_tried_in_order():
    rows = [
        # surface variant before accepted recommendation (the system did mention the value)
        row(0, pred={"hotel-type": "guesthouse"}, gold=both({"hotel-type": "Guest House"}),
            system="the guest house is cheap ."),
        # missed dontcare before annotation version disagreement
        row(1, pred={}, gold={"2.1": {"hotel-area": "dontcare"}, "2.4": {}}, verdict=False,
            rule={"2.1": False, "2.4": True}),
        # accepted recommendation before annotation version disagreement
        row(2, pred={"hotel-name": "the worth house"},
            gold={"2.1": {}, "2.4": {"hotel-name": "worth house"}},
            system="the worth house fits . shall i book it ?"),
    ]
    assert [(i.slot, i.kind) for i in audit_items(rows)] == [
        ("hotel-type", SURFACE_VARIANT), ("hotel-area", MISSED_DONTCARE),
        ("hotel-name", ACCEPTED_RECOMMENDATION)]


def test_disagreement_without_a_slot_difference_is_one_whole_turn_item():
    # the judge rejects a turn whose turn state matches the gold exactly
    rows = [row(pred={"taxi-leaveat": "17:15"}, gold=both({"taxi-leaveat": "17:15"}),
                verdict=False)]
    items = audit_items(rows)
    assert [(i.slot, i.kind, i.predicted) for i in items] == [("", VALUE_ERROR, None)]
    assert items[0].gold == {"2.1": None, "2.4": None}


def test_agreeing_turns_and_error_rows_are_left_out():
    rows = [row(0, pred={"a-b": "x"}, gold=both({"a-b": "x"}), verdict=True),    # both right
            row(1, pred={"a-b": "y"}, gold=both({"a-b": "z"}), verdict=False),   # both wrong
            row(2, pred={"a-b": "y"}, gold=both({"a-b": "z"}), verdict=None)]    # error row
    assert audit_items(rows) == []


def test_items_carry_history_turn_states_and_judge_output():
    calls = [{"dimension": "accuracy", "explanation": "looks right",
              "results": {"incorrect_domain_slot": {}}, "error": None,
              "attempts": [{"text": "{}"}, {"text": "{}"}]}]
    trace = [{"step": "prediction", "key": "hotel-area", "slot": "hotel-area", "value": "east",
              "decision": "kept", "reason": "passes every check; recorded as correct"}]
    rows = [row(0, user="a hotel please", pred={}, gold=both({})),
            row(1, system="which area ?", user="the north", pred={"hotel-area": "north"},
                gold=both({"hotel-area": "north"})),
            row(2, system="any price ?", user="east , sorry", pred={"hotel-area": "east"},
                gold=both({"hotel-area": "west"}), calls=calls, trace=trace),
            row(0, dialogue_id="D2", user="hello", pred={"x-y": "1"}, gold=both({}))]
    first, second = audit_items(rows)
    assert first.history == [("user", "a hotel please"), ("system", "which area ?"),
                             ("user", "the north")]
    assert (first.system, first.user) == ("any price ?", "east , sorry")
    assert first.pred_turn_state == {"hotel-area": "east"}
    assert first.gold_turn_state == both({"hotel-area": "west"})
    assert first.rule == {"2.1": False, "2.4": False} and first.verdict is True
    assert first.explanations == [{"dimension": "accuracy", "explanation": "looks right",
                                   "results": {"incorrect_domain_slot": {}}, "error": None,
                                   "attempts": 2}]
    assert first.trace == trace
    assert second.dialogue_id == "D2" and second.history == []  # history never crosses dialogues


def test_none_deletions_can_be_ignored_like_rule_nospace():
    rows = [row(pred={"hotel-area": "none", "hotel-stars": "4"}, gold=both({"hotel-stars": "4"}),
                verdict=True)]
    assert kinds_of(audit_items(rows)) == {"hotel-area": VALUE_ERROR}
    assert kinds_of(audit_items(rows, ignore_none_pairs=True)) == {"": VALUE_ERROR}


# --- the page from real runs ---------------------------------------------------------------

RESOURCE_URL = re.compile(
    r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)"""
    r"""|(?:url\(\s*["']?\s*(?:https?:)?//)|(?:@import)""", re.IGNORECASE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    data = example_inputs()
    return {m: judge_run(tmp_path_factory.mktemp(m), m, data) for m, cassette in RUNS.items()
            if cassette not in STALE_CASSETTES}


@pytest.mark.parametrize("method", list(RUNS))
def test_real_run_renders_a_self_contained_page(runs, method, tmp_path):
    require_cassette(RUNS[method])
    out = tmp_path / "audit.html"
    count = write_audit(runs[method], out)
    html = out.read_text(encoding="utf-8")
    summary, rows = load_run_dir(runs[method])

    # exactly the scored turns where the judge and some RULE verdict differ are listed
    disagreeing = {f"{r['dialogue_id']}::{r['turn_index']}" for r in rows
                   if r["verdict"] is not None and any(v != r["verdict"]
                                                       for v in r["rule"].values())}
    data = embedded(html)
    ignore_none = "nospace" in summary["rule_match"]
    assert count == len(data["items"]) == len(audit_items(rows, ignore_none_pairs=ignore_none))
    assert {i["turn"] for i in data["items"]} == disagreeing == set(data["turns"])
    assert count >= len(disagreeing)
    assert data["versions"] == ["2.1", "2.4"] and data["kinds"] == list(KINDS)

    assert not RESOURCE_URL.search(html), RESOURCE_URL.search(html)
    assert "<link rel=\"stylesheet\"" not in html and "<script src" not in html
    assert 'id="row-count"' in html and "Export CSV" in html and "Export JSONL" in html
    # the header: run summary and counts per kind
    assert f"<dd>{summary['method']}</dd>" in html
    counts = Counter(i["kind"] for i in data["items"])
    for kind in KINDS:
        assert re.search(rf'data-kind="{re.escape(kind)}">.*?</button></td><td class="num">'
                         rf"{counts.get(kind, 0)}</td>", html)


def test_direct_run_finds_the_example_problems(runs, tmp_path):
    require_cassette(RUNS["direct"])
    # the one-prompt baseline accepts every turn but one, so every gold flaw of the example
    # data surfaces; these are properties of the example data, not of the model's replies
    _, rows = load_run_dir(runs["direct"])
    kinds = {(i.dialogue_id, i.slot): i.kind for i in audit_items(rows)}
    expected = {("EX001.json", "hotel-type"): SURFACE_VARIANT,
                ("EX002.json", "taxi-departure"): SURFACE_VARIANT,
                ("EX003.json", "attraction-name"): MISSED_DONTCARE}
    assert {k: kinds.get(k) for k in expected} == expected


def test_utterances_cannot_break_out_of_the_page(tmp_path):
    nasty = "ok </script><script>alert(1)</script> <b>bold</b> <!-- & \u2028"
    rows = [row(0, user=nasty, system="<img src=x onerror=alert(1)>",
                pred={"hotel-name": "</script>"}, gold=both({"hotel-name": "a & b"}))]
    summary = {"method": "two-dim", "data": {"system": "<b>sys</b>", "versions": ["2.1", "2.4"]}}
    run = write_run(tmp_path / "run", rows, summary)
    assert write_audit(run, tmp_path / "a.html") == 1
    html = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert "<b>" not in html and "<img" not in html and "<!--" not in html
    assert html.count("</script>") == 2  # the data block's own end and the code's
    assert "&lt;b&gt;sys&lt;/b&gt;" in html  # header text is HTML-escaped
    data = embedded(html)
    assert data["turns"]["D1::0"]["user"] == nasty
    assert data["items"][0]["predicted"] == "</script>"


def test_embed_json_escapes_markup_characters():
    text = embed_json({"x": "</script><!--&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"x": "</script><!--&"}


def test_empty_audit_and_missing_run(tmp_path):
    run = write_run(tmp_path / "run", [row(pred={"a-b": "x"}, gold=both({"a-b": "x"}))])
    assert write_audit(run, tmp_path / "out" / "a.html") == 0
    assert embedded((tmp_path / "out" / "a.html").read_text())["items"] == []
    with pytest.raises(InputError, match=r"judgments\.jsonl") as info:
        write_audit(tmp_path / "nowhere", tmp_path / "b.html")
    assert_located(info.value, tmp_path / "nowhere", None, None)
    (run / "judgments.jsonl").write_text(
        '{"dialogue_id": "D1", "turn_index": 0, "verdict": true, "rule": {}}\n{oops\n')
    with pytest.raises(InputError) as info:
        write_audit(run, tmp_path / "b.html")
    assert_located(info.value, run / "judgments.jsonl", 2, None)


# --- decisions → human labels --------------------------------------------------------------

FIELDS = ["dialogue_id", "turn_index", "slot", "kind", "predicted", "gold_2.1", "gold_2.4",
          "judge_verdict", "decision", "note", "annotator"]


def export_rows() -> list[dict]:
    base = {"kind": VALUE_ERROR, "predicted": "x", "gold_2.1": "y", "gold_2.4": "y",
            "judge_verdict": "correct", "annotator": "ana"}
    return [
        {**base, "dialogue_id": "D1", "turn_index": 0, "slot": "a-b", "decision": "correct",
         "note": "gold, line one\nline two"},
        {**base, "dialogue_id": "D1", "turn_index": 0, "slot": "a-c", "decision": "correct",
         "note": ""},
        {**base, "dialogue_id": "D1", "turn_index": 1, "slot": "a-b", "decision": "0",
         "note": "wrong day"},
        {**base, "dialogue_id": "D2", "turn_index": 3, "slot": "", "decision": "", "note": ""},
        {**base, "dialogue_id": "D2", "turn_index": 4, "slot": "", "decision": "Incorrect",
         "note": "", "annotator": ""},
        {**base, "dialogue_id": "D3", "turn_index": 0, "slot": "", "decision": "1",
         "note": "\"quoted\""},
    ]


EXPECTED = [
    {"dialogue_id": "D1", "turn_index": 0, "label": 1, "annotator": "ana",
     "note": "gold, line one\nline two"},
    {"dialogue_id": "D1", "turn_index": 1, "label": 0, "annotator": "ana", "note": "wrong day"},
    {"dialogue_id": "D2", "turn_index": 4, "label": 0, "annotator": "bob", "note": ""},
    {"dialogue_id": "D3", "turn_index": 0, "label": 1, "annotator": "ana", "note": "\"quoted\""},
]


def write_csv(path: Path, records: list[dict]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(records)
    return path


def test_import_decisions_from_csv_and_jsonl(tmp_path):
    from_csv = import_decisions(write_csv(tmp_path / "d.csv", export_rows()), annotator="bob")
    assert from_csv == EXPECTED
    records = export_rows()
    records[2]["decision"] = 0           # JSON exports may carry numbers or booleans
    records[5]["decision"] = True
    records[3]["decision"] = None
    from_jsonl = import_decisions(write_jsonl(tmp_path / "d.jsonl", records), annotator="bob")
    assert from_jsonl == EXPECTED
    # content decides when the suffix does not
    assert import_decisions(write_jsonl(tmp_path / "d.txt", records), annotator="bob") == EXPECTED


def test_write_labels_round_trip(tmp_path):
    assert write_labels(EXPECTED, tmp_path / "labels" / "h.jsonl") == len(EXPECTED)
    lines = (tmp_path / "labels" / "h.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == EXPECTED


def test_conflicting_decisions_name_file_line_and_field(tmp_path):
    records = export_rows()
    records[1]["decision"] = "incorrect"  # same turn as the first row, which says correct
    for path in (write_csv(tmp_path / "d.csv", records),
                 write_jsonl(tmp_path / "d.jsonl", records)):
        with pytest.raises(InputError, match="conflicting decisions for D1 turn 0") as info:
            import_decisions(path)
        # the CSV's first record spans lines 2-3 (a quoted line break), so the second is line 4
        assert_located(info.value, path, 4 if path.suffix == ".csv" else 2, "decision")


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"decision": "maybe"}, "decision", "unknown decision"),
    ({"decision": 2}, "decision", "unknown decision"),
    ({"dialogue_id": ""}, "dialogue_id", "missing dialogue id"),
    ({"turn_index": "two"}, "turn_index", "turn index"),
    ({"turn_index": -1}, "turn_index", "turn index"),
])
def test_bad_decision_rows(tmp_path, change, field, message):
    records = export_rows()[2:4]
    records[0].update(change)
    path = write_jsonl(tmp_path / "d.jsonl", records)
    with pytest.raises(InputError, match=message) as info:
        import_decisions(path)
    assert_located(info.value, path, 1, field)


def test_bad_export_files(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"decision": ""}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(InputError, match="JSON object") as info:
        import_decisions(tmp_path / "bad.jsonl")
    assert_located(info.value, tmp_path / "bad.jsonl", 2, None)
    (tmp_path / "broken.jsonl").write_text("{nope\n", encoding="utf-8")
    with pytest.raises(InputError, match="invalid JSON") as info:
        import_decisions(tmp_path / "broken.jsonl")
    assert_located(info.value, tmp_path / "broken.jsonl", 1, None)
    (tmp_path / "cols.csv").write_text("dialogue_id,turn_index\nD1,0\n", encoding="utf-8")
    with pytest.raises(InputError, match="header lacks") as info:
        import_decisions(tmp_path / "cols.csv")
    assert_located(info.value, tmp_path / "cols.csv", 1, "decision")  # the header line
    with pytest.raises(InputError, match="not found") as info:
        import_decisions(tmp_path / "missing.csv")
    assert_located(info.value, tmp_path / "missing.csv", None, None)
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    assert import_decisions(tmp_path / "empty.csv") == []
    # Python 3.10's csv refuses a NUL (3.11's reads it): either way a message on line 1
    (tmp_path / "nul.csv").write_text("dialogue_id\x00,turn_index\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"malformed CSV|header lacks") as info:
        import_decisions(tmp_path / "nul.csv")
    assert_located(info.value, tmp_path / "nul.csv", 1, None if "malformed" in str(info.value)
                   else "dialogue_id")


# --- fixes: say the cause, name the match policy, show the ranking -------------------------


def test_a_judge_flag_without_a_value_difference_says_its_cause():
    # the judge invents a missed taxi-arriveby = dontcare; prediction and gold agree on all
    trace = [{"step": "completeness", "key": "taxi-arriveby", "slot": "taxi-arriveby",
              "value": "dontcare", "decision": "kept",
              "reason": "user value missing from the predicted turn state"}]
    rows = [row(pred={"taxi-leaveat": "17:15"}, gold=both({"taxi-leaveat": "17:15"}),
                verdict=False, missed=["taxi-arriveby"], trace=trace)]
    (item,) = audit_items(rows)
    assert (item.slot, item.kind, item.predicted) == ("taxi-arriveby", JUDGE_FLAG, None)
    assert item.gold == {"2.1": None, "2.4": None}
    assert item.cause == ("the judge says the prediction missed taxi-arriveby = 'dontcare'; "
                          "no annotation version sets it in this turn")
    flagged = [row(pred={"restaurant-food": "italian"},
                   gold=both({"restaurant-food": "italian"}), verdict=False,
                   incorrect=["restaurant-food"])]
    (item,) = audit_items(flagged)
    assert item.kind == JUDGE_FLAG and "flags restaurant-food = 'italian' as incorrect" in \
        item.cause and "2.4 has 'italian'" in item.cause


def test_whole_turn_items_say_why_they_are_listed():
    rejected = [row(pred={"taxi-leaveat": "17:15"}, gold=both({"taxi-leaveat": "17:15"}),
                    verdict=False)]
    assert "the judge rejects the turn without naming a slot" in audit_items(rejected)[0].cause
    deletion = [row(pred={"hotel-area": "none", "hotel-stars": "4"},
                    gold=both({"hotel-stars": "4"}), verdict=True)]
    (item,) = audit_items(deletion, ignore_none_pairs=True)
    assert item.slot == "" and "RULE-2.1, RULE-2.4 rejects" in item.cause
    assert "hotel-area = 'none'" in item.cause


def test_rule_heading_names_the_match_policy(tmp_path):
    rows = [row(pred={"a-b": "x"}, gold=both({"a-b": "y"}))]
    for match in ("nospace", "exact"):
        summary = {"rule_match": match, "rule": {"2.1": {"tsa": 0.0, "agreement": 0.0}},
                   "data": {"versions": ["2.1", "2.4"]}}
        run = write_run(tmp_path / match, rows, summary)
        write_audit(run, tmp_path / f"{match}.html")
        html = (tmp_path / f"{match}.html").read_text(encoding="utf-8")
        assert f"RULE ({match} match)" in html
        assert ("RULE (exact match)" in html) == (match == "exact")


def test_real_run_page_shows_causes_and_the_ranking(runs, tmp_path):
    from judge.analysis import find_candidates, load_audit_inputs

    inputs = load_audit_inputs([runs["two-dim"]], dialogues=EXAMPLES / "dialogues.jsonl",
                               schema=EXAMPLES / "schema.json")
    candidates = find_candidates(inputs.dialogues, inputs.sources, gold="2.1",
                                 schema=inputs.schema)
    out = tmp_path / "page.html"
    write_audit(runs["two-dim"], out, candidates=candidates)
    html = out.read_text(encoding="utf-8")
    data = embedded(html)
    # the turn the judge rejects for a missed dontcare no annotation has is a judge flag now
    flagged = [i for i in data["items"] if i["kind"] == JUDGE_FLAG]
    assert flagged and all(i["cause"] for i in flagged)
    assert not [i for i in data["items"] if i["slot"] == "" and not i["cause"]]
    assert "RULE (nospace match)" in html and "RULE (exact match)" not in html
    assert f"Suspected gold errors of 2.1, ranked ({len(candidates)})" in html
    ranks = [int(r) for r in re.findall(
        r'<tr data-candidate="[^"]*"><td class="num">(\d+)</td><td class="num">0\.', html)]
    assert ranks == list(range(1, len(candidates) + 1))


def test_page_of_predictions_only(tmp_path):
    from judge.analysis import find_candidates, load_audit_inputs

    inputs = load_audit_inputs([EXAMPLES / "predictions.jsonl"],
                               dialogues=EXAMPLES / "dialogues.jsonl")
    candidates = find_candidates(inputs.dialogues, inputs.sources)
    assert write_audit(None, tmp_path / "p.html", candidates=candidates) == 0
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "Suspected gold errors of 2.1" in html and "<script" not in html
    assert not RESOURCE_URL.search(html)


def test_candidate_values_cannot_break_out_of_the_page(tmp_path):
    from judge import load_dialogues, load_predictions
    from judge.analysis import find_candidates, source_from_predictions

    nasty = "</td></tr><script>alert(1)</script><img src=x onerror=alert(1)>"
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [
        {"dialogue_id": "D<b>1", "turns": [{"turn_index": 0, "system": "", "user": nasty,
                                            "gold_state_21": {"hotel-name": "a & b"}}]}]))
    system = load_predictions(write_jsonl(tmp_path / "p.jsonl", [
        {"dialogue_id": "D<b>1", "system_name": "<i>sys</i>",
         "turns": [{"turn_index": 0, "pred_state": {"hotel-name": nasty}}]}]), dialogues)
    candidates = find_candidates(dialogues, [source_from_predictions(system)])
    write_audit(None, tmp_path / "p.html", candidates=candidates)
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert "<i>" not in html and "&lt;script&gt;" in html
