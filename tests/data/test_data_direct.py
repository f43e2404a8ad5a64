"""Small pieces of the inputs stage called directly: format detection across kinds, the native
writer, triple and service names, the fit checks' messages, dialogue subsets and id lists,
integration issues. Each assertion is worked out by hand. Written where mutation testing found
changed lines no test noticed (bench/mutation.py data)."""

from __future__ import annotations

import json

import pytest

from judge import InputError, load_dialogues, load_schema
from judge._errors import DataMismatchError, FormatError
from judge.data import (
    IntegrationIssue,
    detect,
    detect_kind,
    open_source,
    prompt_text,
    read_id_list,
    write_native_jsonl,
)
from judge.data._convert import _convlab, _sgd
from judge.data._convert._common import (
    clean_value,
    flat_state,
    service_domain,
    split_triple,
)

from ..conftest import FIXTURES, write_jsonl

F = FIXTURES / "formats"


def test_detect_names_the_kind_a_file_holds_instead() -> None:
    with pytest.raises(FormatError, match=(r"this is a dialogues file \(MultiWOZ 2\.0-2\.4 "
                                           r"data\.json\), not predictions")):
        detect(open_source(F / "multiwoz21_data.json"), "predictions")
    with pytest.raises(FormatError, match=r"this is a schema file \(.*\), not dialogues"):
        detect(open_source(FIXTURES / "schema_small.json"), "dialogues")


def test_detect_kind_reports_the_first_kinds_problem(tmp_path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"foo": 1}), encoding="utf-8")
    with pytest.raises(InputError, match="not a known dialogues format"):
        detect_kind(path)


def test_write_native_jsonl_counts_and_keeps_text(tmp_path) -> None:
    path = tmp_path / "out.jsonl"
    assert write_native_jsonl([{"a": "é"}, {"b": 1}, {"c": []}], path) == 3
    assert path.read_text(encoding="utf-8") == '{"a": "é"}\n{"b": 1}\n{"c": []}\n'


def test_split_triple_keeps_dashes_in_the_value() -> None:
    assert split_triple("hotel-book day-monday") == ("hotel-book day", "monday")
    assert split_triple("taxi-destination-cote - bistro") == ("taxi-destination",
                                                              "cote - bistro")
    assert split_triple("hotel-area") is None
    assert split_triple("-area-north") is None
    assert split_triple("hotel--north") is None
    assert split_triple("hotel-area-") == ("hotel-area", "")


def test_service_domain_by_schema_then_by_name() -> None:
    schema = load_schema(F / "sgd_schema.json")
    named = {d.domain: getattr(d, "service_name", None) for d in schema.domains}
    domain, service = next(iter(named.items()))
    assert service_domain(service, schema) == domain
    assert service_domain(domain, schema) == domain
    assert service_domain("Payment_12", schema) == "payment"
    assert service_domain("Payment_12", None) == "payment"


def test_fit_checks_name_the_field() -> None:
    assert _sgd.fit_schema([{"service_name": "A_1", "slots": []}]).ok
    top = _sgd.fit_schema({"service_name": "A_1"})
    assert (top.ok, top.field, top.reason) == (False, "(top level)",
                                               "expected a list of services")
    assert not _sgd.fit_schema([]).ok
    named = _sgd.fit_schema([{"slots": []}, {"service_name": "B_1", "slots": []}])
    assert (named.ok, named.field, named.reason) == (
        False, "[0].service_name", "expected a service with 'service_name'")
    slots = _sgd.fit_schema([{"service_name": "A_1"}])
    assert (slots.ok, slots.field, slots.reason) == (False, "[0].slots",
                                                     "expected a 'slots' list")
    good = [{"dialogue_id": "d", "turns": [{"utt_idx": 0, "speaker": "user"}]}, "ignored"]
    assert _convlab.fit_dialogues(good).ok
    empty = _convlab.fit_dialogues([])
    assert (empty.ok, empty.field, empty.reason) == (
        False, "(top level)", "expected a list of dialogues (or a dict of splits)")
    turnless = _convlab.fit_dialogues([{"turns": []}, good[0]])
    assert (turnless.ok, turnless.field, turnless.reason) == (False, "[0].turns",
                                                              "expected a 'turns' list")
    unnumbered = _convlab.fit_dialogues([{"turns": [{"speaker": "user"}, {"utt_idx": 1}]}])
    assert (unnumbered.ok, unnumbered.field, unnumbered.reason) == (
        False, "[0].turns[0].utt_idx", "expected 'utt_idx'")


def test_subset_keeps_order_and_names_an_unknown_id(tmp_path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [
        {"dialogue_id": name, "turns": [{"turn_index": 0, "gold_state": {}}]}
        for name in ("A.json", "B.json", "C.json")])
    dialogues = load_dialogues(path)
    kept = dialogues.subset(["C.json", "A.json"])
    assert [d.dialogue_id for d in kept.dialogues] == ["C.json", "A.json"]
    assert kept.path == dialogues.path and kept.versions == dialogues.versions
    assert kept.get("B.json") is None and kept.get("C.json") is not None
    with pytest.raises(DataMismatchError, match=r"dialogue id 'Z' is not in .*d\.jsonl") as no:
        dialogues.subset(["Z"], source="ids.txt")
    assert no.value.path == "ids.txt"
    with pytest.raises(DataMismatchError) as unnamed:
        dialogues.subset(["Z"])
    assert unnamed.value.path is None


def test_read_id_list_skips_blanks_and_comments_and_refuses_none(tmp_path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("# test split\nA.json\n\n  B.json  \n", encoding="utf-8")
    assert read_id_list(ids) == ["A.json", "B.json"]
    ids.write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no dialogue ids in file") as caught:
        read_id_list(ids)
    assert caught.value.path == str(ids)


def test_integration_issue_says_what_differs() -> None:
    issue = IntegrationIssue("D", 3, expected={"a": "1", "b": "2"},
                             given={"a": "1", "b": "9", "c": "3"})
    assert issue.describe() == ("D turn 3: integrating the turn output gives {'b': '2'} "
                                "where pred_state has {'b': '9', 'c': '3'}")
    same = IntegrationIssue("D", 0, expected={"a": "1"}, given={"a": "1"})
    assert same.describe() == ("D turn 0: integrating the turn output gives {} where "
                               "pred_state has {}")


@pytest.mark.parametrize(("text", "expected"), [
    ("Area", "Area."), ("Area.", "Area."), ("Area?", "Area?"), ("(see map.)", "(see map.)"),
    ('say "yes."', 'say "yes."'), ("say 'no.'", "say 'no.'"), ("a\n  b", "a b."), ("", ""),
    (None, ""),
])
def test_prompt_text_fences_and_punctuates(text, expected) -> None:
    assert prompt_text(text) == expected


# --- the state shapes dumps use (_common.flat_state) ----------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    (None, None), ("", None), ("  None ", None), ("Not Mentioned", None), ("not given", None),
    ("NULL", None), ("Don't Care", "dontcare"), ("do n't care", "dontcare"),
    ("dont't care", "dontcare"), ("  Cheap ", "Cheap"), (True, "True"), (False, "False"),
    (4, "4"), (2.5, "2.5"), ({"a": 1}, None), (["x"], None),
])
def test_clean_value(raw, expected) -> None:
    assert clean_value(raw) == expected


def test_flat_state_reads_every_shape(tmp_path) -> None:
    path = tmp_path / "dump.json"

    def flat(value, **options):
        return flat_state(value, "[0].state", path, **options)

    assert flat({"hotel-area": "north", "hotel-name": "none"}) == {"hotel-area": "north"}
    assert flat({"hotel": {"area": ["north", "centre"], "name": []}}) == {
        "hotel-area": "north"}
    assert flat({"hotel": {"semi": {"area": "north"},
                           "book": {"day": "fri", "booked": [{"x": 1}]}}}) == {
        "hotel-area": "north", "hotel-book day": "fri"}
    assert flat(["hotel-area-north", "taxi-destination-cote - bistro"]) == {
        "hotel-area": "north", "taxi-destination": "cote - bistro"}
    assert flat([["hotel-area", "north"], ["taxi", "leaveat", "5"]]) == {
        "hotel-area": "north", "taxi-leaveat": "5"}
    assert flat([{"slot": "area", "value": "north", "domain": "hotel"},
                 {"slot": "taxi-leaveat", "value": "5", "domain": "ignored"},
                 {"slot": "plain", "value": "x"}]) == {
        "hotel-area": "north", "taxi-leaveat": "5", "plain": "x"}
    assert flat(None) == {}
    # an object under a slot name is a domain of its own: {domain: {slot: value}}
    assert flat({"hotel-area": {"x": 1}}) == {"hotel-area-x": "1"}
    # what no value means is kept as an explicit deletion when asked
    assert flat({"hotel-area": "", "hotel-name": "x"}, keep_absent=True) == {
        "hotel-area": "none", "hotel-name": "x"}
    assert flat(["hotel-area-none"], keep_absent=True) == {"hotel-area": "none"}


def test_flat_state_names_what_it_cannot_read(tmp_path) -> None:
    path = tmp_path / "dump.json"
    cases = [
        ({"hotel-area": [["x"]]}, "[0].state.hotel-area", "expected a text value, got list"),
        ({"hotel": {"area": [["x"]]}}, "[0].state.hotel.area",
         "expected a text value, got list"),
        ({"hotel": {"semi": {"area": {"x": 1}}}}, "[0].state.hotel.semi",
         "expected a text value, got dict"),
        (["hotel-area"], "[0].state[0]", "expected 'domain-slot-value'"),
        (["ok-slot-v", 3], "[0].state[1]", "expected a 'domain-slot-value' string, a "
                                           "[slot, value] pair or a {slot, value} object"),
        ([["a", 1]], "[0].state[0]", "expected a 'domain-slot-value' string, a "
                                     "[slot, value] pair or a {slot, value} object"),
        ([{"slot": "a"}], "[0].state[0]", "expected a 'domain-slot-value' string, a "
                                          "[slot, value] pair or a {slot, value} object"),
        ("north", "[0].state", "expected a state (object or list), got str"),
    ]
    for value, field, reason in cases:
        with pytest.raises(InputError) as caught:
            flat_state(value, "[0].state", path)
        assert (caught.value.path, caught.value.field) == (str(path), field), value
        assert str(caught.value).endswith(f"field '{field}': {reason}"), str(caught.value)
