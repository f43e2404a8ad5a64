"""The comparison page's figures called directly: the bar chart layout (``web/_charts``) and
the figures of two runs side by side (``web/_compare``). Each test pins the numbers shown."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from judge.web import _charts, _compare
from judge.web._index import build_index

# ---------------------------------------------------------------- bar charts (_charts)

def test_grouped_bars_layout() -> None:
    """The plot area, the ticks, each bar's place, size, series, tooltip and link."""
    chart = _charts.grouped_bars(
        "T", ["alpha", "beta"], ["judge", "rule"], [[50.0, 150.0], [-5.0, None]],
        links=[["/a", None], ["/b"]], description="d")
    assert (chart.title, chart.width, chart.height, chart.description) == ("T", 640, 280, "d")
    assert chart.plot == {"x": 44.0, "y": 12.0, "w": 584.0, "h": 222.0, "bottom": 234.0}
    assert chart.ticks == [{"y": 234.0, "label": "0"}, {"y": 178.5, "label": "25"},
                           {"y": 123.0, "label": "50"}, {"y": 67.5, "label": "75"},
                           {"y": 12.0, "label": "100%"}]
    assert chart.groups == [{"x": 190.0, "y": 250.0, "label": "alpha", "full": "alpha"},
                            {"x": 482.0, "y": 250.0, "label": "beta", "full": "beta"}]
    assert chart.bars == [
        _charts.Bar(x=154.0, y=123.0, w=34.0, h=111.0, series=0,
                    title="alpha — judge: 50.0%", value="50.0", href="/a"),
        _charts.Bar(x=190.0, y=12.0, w=34.0, h=222.0, series=1,
                    title="alpha — rule: 150.0%", value="150.0", href=None),
        _charts.Bar(x=446.0, y=234.0, w=34.0, h=0.0, series=0,
                    title="beta — judge: -5.0%", value="-5.0", href="/b"),
    ]
    assert chart.legend == [{"series": 0, "label": "judge"}, {"series": 1, "label": "rule"}]


def test_grouped_bars_other_sizes_units_and_many_series() -> None:
    """Another size and scale: ticks in the unit on the top one only; narrow slots shorten
    group labels; series colours cycle after eight; missing values draw nothing."""
    chart = _charts.grouped_bars("T", ["g"], [f"s{i}" for i in range(9)],
                                 [[1.0] * 9], top=10.0, unit=" runs", width=300, height=200)
    assert (chart.width, chart.height) == (300, 200)
    assert chart.plot == {"x": 44.0, "y": 12.0, "w": 244.0, "h": 142.0, "bottom": 154.0}
    assert [t["label"] for t in chart.ticks] == ["0", "2.5", "5", "7.5", "10 runs"]
    assert [t["y"] for t in chart.ticks] == [154.0, 118.5, 83.0, 47.5, 12.0]
    bar_w = 244.0 * 0.8 / 9
    assert [b.w for b in chart.bars] == [round(bar_w - 2, 2)] * 9
    assert chart.bars[0].x == round(44.0 + (244.0 - bar_w * 9) / 2, 2)
    assert chart.bars[1].x == round(44.0 + (244.0 - bar_w * 9) / 2 + bar_w, 2)
    assert [b.h for b in chart.bars] == [14.2] * 9
    assert [b.y for b in chart.bars] == [139.8] * 9
    assert [b.series for b in chart.bars] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert chart.bars[8].title == "g — s8: 1.0 runs"
    assert [entry["series"] for entry in chart.legend] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    many = _charts.grouped_bars("T", [f"group-number-{i}" for i in range(20)], ["a"],
                                [[10.0]] * 19)
    assert len(many.bars) == 19
    assert many.groups[0]["label"] == "group…"
    assert many.groups[0]["full"] == "group-number-0"
    assert many.bars[0].w == 21.36  # 80 % of the group's slot, less the gap
    assert many.bars[0].x == round(44.0 + (29.2 - 23.36) / 2, 2)
    four = _charts.grouped_bars("T", ["abcdefghijklmnopqrstuvwxyz"] * 4, ["s"], [])
    assert four.groups[0]["label"] == "abcdefghijklmnopqrs…"  # 146 px: 20 characters
    assert [g["x"] for g in four.groups] == [117.0, 263.0, 409.0, 555.0]
    assert four.bars == []
    wide = _charts.grouped_bars("T", ["a-long-group-name"], ["s"], [[0.0]], top=0.0)
    assert wide.groups[0]["label"] == "a-long-group-name"
    assert wide.bars[0].h == 0.0 and wide.bars[0].y == 234.0
    assert wide.ticks[-1]["label"] == "0%"
    empty = _charts.grouped_bars("T", [], [], [])
    assert empty.bars == [] and empty.groups == [] and empty.legend == []
    assert _charts._short("abcdef", 6) == "abcdef"
    assert _charts._short("abcdefg", 6) == "abcde…"
    assert _charts.grouped_bars("T", ["g"], ["s"], [[5.0]],
                                links=[["/x"]]).bars[0].href == "/x"
    odd = _charts.grouped_bars("T", ["g"], ["s"], [[12.345]]).bars[0]
    assert (odd.y, odd.h) == (206.59, 27.41)  # 206.5941 and 27.4059: two places, no more
    assert _charts.grouped_bars("T", ["g"], ["s", "t"], [[5.0, 6.0]],
                                links=[["/x"]]).bars[1].href is None
    assert _charts.grouped_bars("T", ["g", "h"], ["s"], [[5.0], [6.0]],
                                links=[["/x"]]).bars[1].href is None


# ---------------------------------------------------------------- comparison (_compare)

def test_headline_reads_the_summary() -> None:
    """A run's headline figures; the model from the summary's options, else the job's."""
    summary = {"method": "two-dim", "turns": 10, "tsa": 80.0, "judge_jga": 70.0,
               "rule": {"2.1": {"tsa": 60.0, "agreement": 75.0},
                        "2.4": {"tsa": 65.0, "agreement": 85.0}},
               "error_turns": 1, "cost_usd": 0.25, "rule_match": "nospace",
               "options": {"model": "from-summary"}}
    job = {"id": "j1", "options": {"model": "from-job"}}
    assert _compare.headline(job, summary, "Run 1") == {
        "id": "j1", "label": "Run 1", "method": "two-dim", "model": "from-summary",
        "turns": 10, "tsa": 80.0, "judge_jga": 70.0,
        "rule_tsa": {"2.1": 60.0, "2.4": 65.0}, "agreement": {"2.1": 75.0, "2.4": 85.0},
        "errors": 1, "cost": 0.25, "rule_match": "nospace"}
    del summary["options"]
    assert _compare.headline(job, summary, "x")["model"] == "from-job"
    bare = _compare.headline({"id": "j2"}, {}, "y")
    assert bare == {"id": "j2", "label": "y", "method": None, "model": None, "turns": None,
                    "tsa": None, "judge_jga": None, "rule_tsa": {}, "agreement": {},
                    "errors": None, "cost": None, "rule_match": None}


def _compare_rows(flip: bool) -> list[dict[str, Any]]:
    """Two dialogues: hotel turns and a taxi turn; ``flip`` changes the verdicts."""
    return [
        {"dialogue_id": "D1", "turn_index": 0, "user": "u", "verdict": not flip,
         "rule": {"2.1": True, "2.4": False},
         "pred_turn_state": {"hotel-area": "north"},
         "gold_turn_state": {"2.1": {"hotel-area": "north"}, "2.4": {"hotel-area": "south"}},
         "incorrect": ["hotel-area"] if flip else []},
        {"dialogue_id": "D1", "turn_index": 1, "user": "u", "verdict": True,
         "rule": {"2.1": False, "2.4": False},
         "pred_turn_state": {"hotel-area": "east", "taxi-leave": "5"},
         "gold_turn_state": {"2.1": {"hotel-area": "west", "taxi-leave": "5"},
                             "2.4": {"hotel-area": "west", "taxi-leave": "6"}}},
        {"dialogue_id": "D2", "turn_index": 0, "user": "u", "verdict": False,
         "rule": {"2.1": True, "2.4": True},
         "pred_turn_state": {"hotel-area": "north"},
         "gold_turn_state": {"2.1": {"hotel-area": "north"}, "2.4": {"hotel-area": "north"}},
         "missed": ["hotel-name"]},
    ]


def test_compare_build_figures() -> None:
    """Per-run charts from the headlines; per-domain shares and per-slot flag and mismatch
    rates from the indexes, with links to the turns behind each bar."""
    runs = [
        {"id": "j1", "label": "one", "tsa": 66.0, "rule_tsa": {"2.1": 60.0, "2.4": 50.0},
         "agreement": {"2.1": 70.0, "2.4": 40.0}},
        {"id": "j2", "label": "two", "tsa": 33.0, "rule_tsa": {"2.1": 61.0},
         "agreement": {"2.1": 71.0}},
    ]
    indexes = [build_index("j1", 1, iter(_compare_rows(False)), None),
               build_index("j2", 1, iter(_compare_rows(True)[:2]), None)]
    figures = _compare.build(runs, indexes)
    assert figures["versions"] == ["2.1", "2.4"]
    accuracy, agreement = figures["charts"]
    assert accuracy.title == "Turn-level accuracy: the judge and exact match"
    assert [g["full"] for g in accuracy.groups] == ["one", "two"]
    assert [e["label"] for e in accuracy.legend] == ["judge TSA", "RULE-2.1 TSA",
                                                     "RULE-2.4 TSA"]
    assert [b.value for b in accuracy.bars] == ["66.0", "60.0", "50.0", "33.0", "61.0"]
    assert accuracy.description == (
        "Share of turns scored correct (%), per run: by the judge, and by exact match (RULE) "
        "against each annotation version.")
    assert agreement.title == "Agreement of the judge with RULE"
    assert [e["label"] for e in agreement.legend] == ["RULE-2.1", "RULE-2.4"]
    assert [b.value for b in agreement.bars] == ["70.0", "40.0", "71.0"]
    assert agreement.description == (
        "Share of turns (%) on which the judge's verdict equals the exact-match verdict of "
        "each annotation version.")
    assert [d["key"] for d in figures["domain_charts"]] == ["judge", "2.1", "2.4"]
    judge = figures["domain_charts"][0]["chart"]
    assert judge.title == "Per domain: share of turns the judge accepts"
    assert judge.description == (
        "For each domain, the share of turns touching it (%) that the judge accepts; one bar "
        "per run. A bar opens the run's turns of that domain.")
    assert [g["full"] for g in judge.groups] == ["hotel", "taxi"]
    # hotel: run one 2 of 3 turns accepted, run two 1 of 2; taxi: 1 of 1 in both
    assert [(b.value, b.href) for b in judge.bars] == [
        ("66.7", "/ui/runs/j1?domain=hotel&verdict=incorrect"),
        ("50.0", "/ui/runs/j2?domain=hotel&verdict=incorrect"),
        ("100.0", "/ui/runs/j1?domain=taxi&verdict=incorrect"),
        ("100.0", "/ui/runs/j2?domain=taxi&verdict=incorrect")]
    rule24 = figures["domain_charts"][2]["chart"]
    assert rule24.title == "Per domain: share of turns RULE-2.4 accepts"
    assert [(b.value, b.href) for b in rule24.bars] == [
        ("33.3", "/ui/runs/j1?domain=hotel&disagree=any&version=2.4"),
        ("0.0", "/ui/runs/j2?domain=hotel&disagree=any&version=2.4"),
        ("0.0", "/ui/runs/j1?domain=taxi&disagree=any&version=2.4"),
        ("0.0", "/ui/runs/j2?domain=taxi&disagree=any&version=2.4")]
    assert [b.value for b in figures["domain_charts"][1]["chart"].bars] == [
        "66.7", "50.0", "0.0", "0.0"]
    rows = {r["slot"]: r["cells"] for r in figures["slot_rows"]}
    assert list(rows) == ["hotel-area", "hotel-name", "taxi-leave"]
    assert rows["hotel-area"] == [
        {"involved": 3, "flagged": 0.0, "mismatch": {"2.1": 100.0 / 3, "2.4": 200.0 / 3}},
        {"involved": 2, "flagged": 50.0, "mismatch": {"2.1": 50.0, "2.4": 100.0}}]
    assert rows["hotel-name"] == [
        {"involved": 1, "flagged": 100.0, "mismatch": {"2.1": 0.0, "2.4": 0.0}}, None]
    assert rows["taxi-leave"][0] == {"involved": 1, "flagged": 0.0,
                                     "mismatch": {"2.1": 0.0, "2.4": 100.0}}
    assert figures["same_turns"] is False


def test_compare_same_turns_and_missing_domains() -> None:
    """Runs over the same turns say so; a domain a run lacks has no bar and no link."""
    runs = [{"id": f"j{i}", "label": f"r{i}", "tsa": 1.0, "rule_tsa": {"2.1": 1.0},
             "agreement": {"2.1": 1.0}} for i in (1, 2)]
    same = [build_index(f"j{i}", 1, iter(_compare_rows(i == 2)), None) for i in (1, 2)]
    assert _compare.build(runs, same)["same_turns"] is True
    other = [same[0], build_index("j2", 1, iter(_compare_rows(False)[:1]), None)]
    figures = _compare.build(runs, other)
    assert figures["same_turns"] is False
    judge = figures["domain_charts"][0]["chart"]
    assert [b.href for b in judge.bars] == ["/ui/runs/j1?domain=hotel&verdict=incorrect",
                                            "/ui/runs/j2?domain=hotel&verdict=incorrect",
                                            "/ui/runs/j1?domain=taxi&verdict=incorrect"]
    assert _compare._ratio(1, 4) == 25.0
    assert _compare._ratio(3, 0) is None
    assert math.isclose(_compare._ratio(1, 3), 100.0 / 3)
