"""Scoring profiles on one hand-verified example of ten turns (two dialogues), every figure
worked out by hand in the comments; the paper tables as CSV and LaTeX."""

from __future__ import annotations

import pytest

from judge import load_dialogues, load_predictions
from judge.metrics import PROFILES, paper_tables, score_profile, to_csv, to_latex

from ..conftest import make_run

A_GOLD = [
    {"hotel-area": "north"},
    {"hotel-area": "north", "hotel-type": "guest house"},
    {"hotel-area": "north", "hotel-type": "guest house", "hotel-parking": "yes"},
    {"hotel-area": "north", "hotel-type": "guest house", "hotel-parking": "yes",
     "hotel-book day": "dontcare"},
    {"hotel-area": "north", "hotel-type": "guest house", "hotel-parking": "yes",
     "hotel-book day": "dontcare", "hotel-pricerange": "cheap|moderate"},
]
A_GOLD.append(dict(A_GOLD[-1]))
A_PRED = [
    {"hotel-area": "north"},
    {"hotel-area": "north", "hotel-type": "guesthouse"},
    {"hotel-area": "north", "hotel-type": "guesthouse", "hotel-parking": "free"},
    {"hotel-area": "north", "hotel-type": "guesthouse", "hotel-parking": "free",
     "hotel-book day": "dontcare"},
    {"hotel-area": "north", "hotel-type": "guesthouse", "hotel-parking": "free",
     "hotel-book day": "dontcare", "hotel-pricerange": "moderate"},
]
A_PRED.append({**A_PRED[-1], "hotel-destination": "x"})  # out of schema
B_GOLD = [
    {"taxi-leaveat": "17:15"},
    {"taxi-leaveat": "17:15", "taxi-destination": "saint johns college"},
    {"taxi-leaveat": "17:15", "taxi-destination": "saint johns college"},
    {"taxi-leaveat": "17:15", "taxi-destination": "saint johns college",
     "taxi-departure": "pizza hut fen ditton"},
]
B_PRED = [
    {"taxi-leaveat": "5:15 pm"},
    {"taxi-leaveat": "5:15 pm", "taxi-destination": "Saint John's College"},
    {"taxi-leaveat": "5:15 pm", "taxi-destination": "Saint John's College",
     "taxi-departure": "none"},
    {"taxi-leaveat": "5:15 pm", "taxi-destination": "Saint John's College",
     "taxi-departure": "pizza hut fenditton"},
]


@pytest.fixture
def example(tmp_path, mini_schema):
    d_path, p_path = make_run(tmp_path, [A_GOLD, B_GOLD], [A_PRED, B_PRED])
    dialogues = load_dialogues(d_path, schema=mini_schema)
    return dialogues, load_predictions(p_path, dialogues, mini_schema), mini_schema


def _figures(example, profile):
    dialogues, predictions, schema = example
    return score_profile(dialogues, predictions, schema, profile)["figures"]


def test_trade(example):
    f = _figures(example, "trade")
    # exact strings: only A0 matches (guesthouse != guest house, free != yes, 'cheap|moderate'
    # is one string, 5:15 pm != 17:15); 'none' is dropped, so B2 fails on the other slots only
    assert f["jga"] == pytest.approx(10.0)
    assert f["final_turn_jga"] == pytest.approx(0.0)
    # wrong slots per turn: A 0,1,2,2,3,4 and B 1,2,2,3 = 20 over 10 turns of K = 30
    assert f["slot_accuracy"] == pytest.approx(100 * 280 / 300)
    # turn F1: A 1, 1/2, 1/3, 1/2, 2/5, F1(P 2/6, R 2/5) = 4/11; B 0, 0, 0, 0
    assert f["turn_f1"] == pytest.approx(100 * (1 + .5 + 1 / 3 + .5 + .4 + 4 / 11) / 10)


def test_mwzeval(example):
    f = _figures(example, "mwzeval")
    # normalised: guest house -> guesthouse, free -> yes, 5:15 pm -> 17:15; gold dontcare is
    # dropped, so A3..A5 fail on the predicted dontcare; partial ratio 94.7 <= 95 for
    # "saint john's college" / "saint johns college" and "pizza hut fen(space)ditton":
    # A0, A1, A2 and B0 match
    assert f["jga"] == pytest.approx(40.0)
    assert f["final_turn_jga"] == pytest.approx(0.0)
    # tp 1+2+3+3+3+3 + 1+1+1+1 = 19; predicted 1+2+3+4+5+6 + 1+2+2+3 = 29 ('none' dropped);
    # gold 1+2+3+3+4+4 + 1+2+2+3 = 25
    assert f["slot_precision"] == pytest.approx(100 * 19 / 29)
    assert f["slot_recall"] == pytest.approx(100 * 19 / 25)
    assert f["slot_f1"] == pytest.approx(100 * 38 / 54)


def test_sgd(example):
    f = _figures(example, "sgd")
    # hotel slots are categorical (exact on the first gold value): A0 = 1, A1..A5 = 0 (type).
    # taxi slots are not: token sort ratio with case and punctuation folded:
    # 17:15 / 5:15 pm = 0.5, saint johns college / Saint John's College = 0.974359,
    # pizza hut fen ditton / pizza hut fenditton = 0.820513
    b = [0.5, 0.5 * 0.97435897, 0.5 * 0.97435897, 0.5 * 0.97435897 * 0.82051282]
    assert f["jga"] == pytest.approx(100 * (1 + sum(b)) / 10, abs=1e-4)
    assert f["final_turn_jga"] == pytest.approx(100 * b[3] / 2, abs=1e-4)
    # AGA: A 1, 1/2, 1/3, 2/4 (dontcare = dontcare), 2/5, 2/5; B 0.5, then the mean of the
    # gold slots' scores
    aga = (1 + .5 + 1 / 3 + .5 + .4 + .4 + .5 + (.5 + .97435897) / 2 * 2
           + (.5 + .97435897 + .82051282) / 3)
    assert f["aga"] == pytest.approx(100 * aga / 10, abs=1e-4)


def test_convlab(example):
    f = _figures(example, "convlab")
    # lower case, spaces removed, '|' alternatives on both sides; out-of-schema predictions
    # ignored: A0 and A1 match (parking free != yes from A2 on); B fails on 17:15 / 5:15pm
    assert f["jga"] == pytest.approx(20.0)
    # tp 1+2+2+3+4+4 + 0+0+0+1 = 17 (fen ditton = fenditton without spaces; the apostrophe
    # stays); predicted 1+2+3+4+5+5 + 1+2+3+3 = 29 ('none' is a value to ConvLab);
    # gold 1+2+3+4+5+5 + 1+2+2+3 = 28
    assert f["slot_precision"] == pytest.approx(100 * 17 / 29)
    assert f["slot_recall"] == pytest.approx(100 * 17 / 28)
    assert f["slot_f1"] == pytest.approx(100 * 34 / 57)


def test_every_profile_writes_its_rules():
    for profile in PROFILES.values():
        assert profile.rules and profile.reference and profile.headline


def test_paper_tables_csv_and_latex(tmp_path, mini_schema):
    d_path, p_path = make_run(tmp_path, [A_GOLD, B_GOLD], [A_PRED, B_PRED])
    dialogues = load_dialogues(d_path, schema=mini_schema)
    system = load_predictions(p_path, dialogues, mini_schema, name="sys_1")
    tables = paper_tables(dialogues, [system], mini_schema, profiles=["trade", "convlab"])
    assert tables.columns[:4] == ["system", "gold", "JGA", "final JGA"]
    row = tables.rows[0]
    assert row[2] == pytest.approx(10.0)  # the suite's exact JGA is TRADE's
    assert row[tables.columns.index("convlab JGA")] == pytest.approx(20.0)
    assert row[tables.columns.index("JGA taxi")] == pytest.approx(0.0)
    text = to_csv(tables.columns, tables.rows)
    assert text.splitlines()[1].startswith("sys_1,2.1,10.00,0.00,")
    latex = to_latex(tables.columns, tables.rows)
    assert r"sys\_1 & 2.1 & 10.0 & 0.0 &" in latex and latex.count(r"\\") == 2
    assert any(r[2] == "hotel-type" and r[3] == pytest.approx(50.0) for r in tables.slot_rows)
