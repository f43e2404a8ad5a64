"""The turn page's view helpers called directly (``web/_detail``): the turn table against
each version's gold, the dialogue so far, the filters a page keeps and the neighbours the
previous/next links walk to."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from judge._errors import ServiceError
from judge.web import _detail
from judge.web._index import Filters, build_index

TURN_ROWS: list[dict[str, Any]] = [
    {"turn_index": 2, "system": "S2", "user": "U2",
     "pred_turn_state": {"hotel-area": "north", "hotel-stars": "none"},
     "gold_turn_state": {"2.1": {"hotel-area": "north"},
                         "2.4": {"hotel-area": "south", "hotel-name": "x"}},
     "incorrect": ["hotel-area", "attraction-type"],
     "missed": ["hotel-name", "bus-day", "hotel-area"],
     "calls": [{"dimension": "accuracy"}], "trace": [{"step": "prediction"}]},
    {"turn_index": 0, "system": "", "user": None, "pred_turn_state": {"hotel-stars": "4"},
     "gold_turn_state": {"2.1": {"hotel-stars": "4"}, "2.4": {"hotel-stars": "4"}}},
    {"turn_index": 3, "system": "S3", "user": "U3", "pred_turn_state": {"taxi-leave": "5"},
     "gold_turn_state": {"2.1": {"taxi-leave": "5"}, "2.4": {"taxi-leave": "5"}}},
    {"turn_index": 1, "system": "S1", "user": "U1", "pred_turn_state": {"hotel-area": "east"},
     "gold_turn_state": {"2.1": {"hotel-area": "east"}, "2.4": None}},
]


def test_turn_view_shows_the_turn_its_states_and_the_dialogue_so_far() -> None:
    """The turn table (predicted vs each version's gold, the judge's flag), the cumulative
    states up to the turn, the dialogue history and the turn's calls and trace."""
    view = _detail.turn_view([dict(r) for r in TURN_ROWS], 2)
    assert view["row"] == TURN_ROWS[0]
    assert view["versions"] == ["2.1", "2.4"]
    assert view["table"] == [
        {"slot": "hotel-area", "predicted": "north", "gold": {"2.1": "north", "2.4": "south"},
         "differs": {"2.1": False, "2.4": True}, "judge": "incorrect"},
        {"slot": "hotel-stars", "predicted": "none", "gold": {"2.1": None, "2.4": None},
         "differs": {"2.1": True, "2.4": True}, "judge": ""},
        {"slot": "hotel-name", "predicted": None, "gold": {"2.1": None, "2.4": "x"},
         "differs": {"2.1": False, "2.4": True}, "judge": "missed"},
        {"slot": "attraction-type", "predicted": None, "gold": {"2.1": None, "2.4": None},
         "differs": {"2.1": False, "2.4": False}, "judge": "incorrect"},
        {"slot": "bus-day", "predicted": None, "gold": {"2.1": None, "2.4": None},
         "differs": {"2.1": False, "2.4": False}, "judge": "missed"},
    ]
    assert view["cumulative"] == [
        {"slot": "hotel-area", "predicted": "north", "gold": {"2.1": "north", "2.4": "south"}},
        {"slot": "hotel-name", "predicted": None, "gold": {"2.1": None, "2.4": "x"}},
        {"slot": "hotel-stars", "predicted": None, "gold": {"2.1": "4", "2.4": "4"}},
    ]
    assert view["history"] == [
        {"speaker": "user", "text": "", "turn": 0},
        {"speaker": "system", "text": "S1", "turn": 1},
        {"speaker": "user", "text": "U1", "turn": 1},
        {"speaker": "system", "text": "S2", "turn": 2},
        {"speaker": "user", "text": "U2", "turn": 2},
    ]
    assert view["calls"] == [{"dimension": "accuracy"}]
    assert view["trace"] == [{"step": "prediction"}]
    assert view["turns_in_dialogue"] == [0, 1, 2, 3]


def test_turn_view_of_the_first_turn_and_of_a_row_without_extras() -> None:
    """Turn 0 (a row without a turn index counts as turn 0) shows only itself; a row without
    calls, trace or gold shows empty lists."""
    rows = [{"turn_index": 1, "user": "later", "pred_turn_state": {"a-b": "1"}},
            {"user": "first", "system": "ignored? no: shown", "pred_turn_state": None}]
    view = _detail.turn_view(rows, 0)
    assert view["row"] is rows[1]
    assert view["versions"] == []
    assert view["table"] == []
    assert view["cumulative"] == []
    assert view["history"] == [
        {"speaker": "system", "text": "ignored? no: shown", "turn": 0},
        {"speaker": "user", "text": "first", "turn": 0}]
    assert view["calls"] == [] and view["trace"] == []
    assert view["turns_in_dialogue"] == [0, 1]


def test_turn_view_of_a_missing_turn_is_a_404() -> None:
    """A turn the dialogue does not have is a 404 naming the turn."""
    with pytest.raises(ServiceError) as caught:
        _detail.turn_view([dict(r) for r in TURN_ROWS], 7)
    assert caught.value.status == 404
    assert caught.value.reason == "the run has no turn 7 in this dialogue"


def test_integrate_drops_none_values_and_keeps_the_latest() -> None:
    """A cumulative state: later values replace earlier ones; none/null/'' remove a slot."""
    assert _detail.integrate([{"a": "1", "b": "2", "c": "3", "d": "4"}, None,
                              {"a": "none", "b": None, "c": "", "d": "5"}, {}]) == {"d": "5"}
    assert _detail.integrate([{"a": "1"}, {"b": "2"}]) == {"a": "1", "b": "2"}


def test_filters_keep_known_choices_and_cut_long_text() -> None:
    """Unknown choices are dropped; free-text filters are cut to their maximum length."""
    kept = _detail._filters("incorrect", "judge-accepts", "2.4", "kind", "hotel", "hotel-area",
                            "yes", "needle")
    assert kept == Filters(verdict="incorrect", disagree="judge-accepts", version="2.4",
                           kind="kind", domain="hotel", slot="hotel-area", error="yes",
                           q="needle")
    cut = _detail._filters("bogus", "nope", "v" * 60, "k" * 150, "d" * 150, "s" * 250, "maybe",
                           "q" * 400)
    assert cut == Filters(verdict="", disagree="", version="v" * 50, kind="k" * 100,
                          domain="d" * 100, slot="s" * 200, error="", q="q" * 300)


def _nav_rows() -> list[dict[str, Any]]:
    rows = []
    for dialogue, turns in (("A", 3), ("B", 2)):
        for turn in range(turns):
            ok = (dialogue, turn) in {("A", 1), ("B", 0)}
            rows.append({"dialogue_id": dialogue, "turn_index": turn, "user": f"{dialogue}{turn}",
                         "verdict": not ok, "rule": {"2.1": True},
                         "pred_turn_state": {}, "gold_turn_state": {"2.1": {}}})
    return rows


def test_neighbours_without_an_index_stay_in_the_dialogue() -> None:
    """Without the index: previous and next turn of the same dialogue, no position."""
    nav = _detail.neighbours(None, Filters(), "D", 3, [0, 1, 3, 5, 8])
    assert nav == {"prev": ("D", 1), "next": ("D", 5), "of": None, "at": None}
    assert _detail.neighbours(None, Filters(), "D", 0, [0, 1]) == {
        "prev": None, "next": ("D", 1), "of": None, "at": None}
    assert _detail.neighbours(None, Filters(), "D", 1, [0, 1]) == {
        "prev": ("D", 0), "next": None, "of": None, "at": None}


def test_neighbours_walk_the_whole_run_with_an_index() -> None:
    """With the index and no filter: the run's order across dialogues, with the position."""
    index = build_index("j", 1, iter(_nav_rows()), None)
    assert _detail.neighbours(index, Filters(), "A", 2, []) == {
        "prev": ("A", 1), "next": ("B", 0), "of": 5, "at": 3}
    assert _detail.neighbours(index, Filters(), "A", 0, []) == {
        "prev": None, "next": ("A", 1), "of": 5, "at": 1}
    assert _detail.neighbours(index, Filters(), "B", 1, []) == {
        "prev": ("B", 0), "next": None, "of": 5, "at": 5}
    # a turn the index does not know: the dialogue's neighbours
    assert _detail.neighbours(index, Filters(), "C", 4, [2, 4, 6]) == {
        "prev": ("C", 2), "next": ("C", 6), "of": None, "at": None}


def test_neighbours_walk_the_filtered_list() -> None:
    """With a filter: neighbours within the matching turns; a turn outside it has none."""
    index = build_index("j", 1, iter(_nav_rows()), None)
    wrong = Filters(verdict="incorrect")  # matches A1 and B0
    assert _detail.neighbours(index, wrong, "A", 1, []) == {
        "prev": None, "next": ("B", 0), "of": 2, "at": 1}
    assert _detail.neighbours(index, wrong, "B", 0, []) == {
        "prev": ("A", 1), "next": None, "of": 2, "at": 2}
    assert _detail.neighbours(index, wrong, "A", 2, []) == {
        "prev": None, "next": None, "of": 2, "at": None}
    right = Filters(verdict="correct")  # A0 A2 B1
    assert _detail.neighbours(index, right, "A", 2, []) == {
        "prev": ("A", 0), "next": ("B", 1), "of": 3, "at": 2}
