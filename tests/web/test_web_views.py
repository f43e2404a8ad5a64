"""The web interface's view helpers called directly: the turn page's view and neighbours, the
shared formatting filters and responses, the chart layout, the comparison figures, the turn
index and the reviewers' agreement figures. Each test pins numbers or fields a page shows."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import jinja2
import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from starlette.requests import Request

from judge._errors import ServiceError
from judge._version import __version__
from judge.web import _agreement, _charts, _common, _compare, _detail, _index
from judge.web._index import Filters, build_index


def _request(path: str = "/ui/runs/x", query: str = "", accept: str = "text/html",
             method: str = "GET") -> Request:
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "headers": [(b"accept", accept.encode()),
                                                         (b"host", b"testserver")],
             "scheme": "http", "server": ("testserver", 80), "root_path": "", "state": {}}
    return Request(scope)


# ---------------------------------------------------------------- the turn page (_detail)

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


# ---------------------------------------------------------------- shared helpers (_common)

def test_formatting_filters() -> None:
    """Percentages, money, times, counts, durations and plurals as the pages print them."""
    assert _common._percent(None) == "–"
    assert _common._percent(float("nan")) == "–"
    assert _common._percent(12.345) == "12.3 %"
    assert _common._percent(12.345, 2) == "12.35 %"
    assert _common._percent(7) == "7.0 %"
    assert _common._money(None) == "–"
    assert _common._money(1.5) == "$1.5000"
    assert _common._money(9.99999) == "$10.0000"
    assert _common._money(10) == "$10.00"
    assert _common._money(1234.5) == "$1,234.50"
    assert _common._when(None) == "–"
    assert _common._when("") == "–"
    assert _common._when("2026-01-02T03:04:05.123Z") == "2026-01-02 03:04"
    assert _common._count(None) == "–"
    assert _common._count(1234567) == "1,234,567"
    assert _common._count(0) == "0"
    assert _common._seconds(None) == "–"
    assert _common._seconds(89.4) == "89 s"
    assert _common._seconds(90) == "2 min"
    assert _common._seconds(600) == "10 min"
    assert _common.plural(1, "label") == "1 label"
    assert _common.plural(3, "label") == "3 labels"
    assert _common.plural(None, "label") == "0 labels"
    assert _common.plural(1204, "turn") == "1,204 turns"
    assert _common.plural(2, "reply", "replies") == "2 replies"
    assert _common.plural(1, "reply", "replies") == "1 reply"


def test_pretty_and_short() -> None:
    """JSON shown indented, unescaped and in its own key order; long text cut with '…'."""
    assert _common._pretty({"b": 1, "a": ["é"]}) == '{\n  "b": 1,\n  "a": [\n    "é"\n  ]\n}'
    assert _common._pretty({"when": 1.5, "x": object}) == (
        '{\n  "when": 1.5,\n  "x": "' + str(object) + '"\n}')
    assert _common._short("  a \n b\t c ") == "a b c"
    assert _common._short(None) == ""
    assert _common._short("x" * 120) == "x" * 120
    assert _common._short("x" * 121) == "x" * 119 + "…"
    assert _common._short("abcdefgh", 5) == "abcd…"
    assert _common._short("abcde", 5) == "abcde"


def test_urls_quote_parts_and_drop_empty_query_values() -> None:
    """Links: the /ui prefix, path parts quoted whole, empty query values left out, lists
    repeated."""
    assert _common._url("/runs") == "/ui/runs"
    assert _common._url("/runs", a=1, b="", c=None, d=[], e=False, f=["p", "q"],
                        g=("r",), h="x y") == "/ui/runs?a=1&f=p&f=q&g=r&h=x+y"
    assert _common._part("a/b?c#d e&") == "a%2Fb%3Fc%23d%20e%26"
    assert _common._part(7) == "7"
    assert _common._turn_url("j/1", "d/1?#", "3", verdict="correct", q="") == (
        "/ui/runs/j%2F1/turns/d%2F1%3F%23/3?verdict=correct")


def test_template_environment() -> None:
    """Autoescaping on, undefined names are errors, block whitespace trimmed, the filters and
    globals the templates use."""
    env = _common.make_environment()
    assert env.from_string("{{ x }}").render(x="<b>&") == "&lt;b&gt;&amp;"
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()
    assert env.from_string("  {% if true %}\nA{% endif %}\n").render() == "A"
    assert env.globals["version"] == __version__
    assert env.globals["prefix"] == "/ui"
    assert env.globals["url"] is _common._url
    assert env.globals["turn_url"] is _common._turn_url
    assert env.globals["part"] is _common._part
    for name, func in (("percent", _common._percent), ("money", _common._money),
                       ("when", _common._when), ("count", _common._count),
                       ("seconds", _common._seconds), ("pretty", _common._pretty),
                       ("short", _common._short), ("plural", _common.plural)):
        assert env.filters[name] is func
    assert env.auto_reload is False
    assert env.get_template("preparing.html").filename.endswith("templates/preparing.html")
    page = env.from_string("{{ version }} {{ 3 | plural('run') }} {{ turn_url('j', 'd', 1) }}")
    assert page.render() == f"{__version__} 3 runs /ui/runs/j/turns/d/1"


def test_preparing_response_for_scripts_and_for_browsers() -> None:
    """A script gets 202 {"preparing": what} with Retry-After; a browser a page that reloads
    the same address."""
    scripted = _common.preparing_response(
        _request(accept="application/json"), "the turn index of run j")
    assert scripted.status_code == 202
    assert json.loads(scripted.body) == {"preparing": "the turn index of run j"}
    assert scripted.headers["retry-after"] == "2"
    assert scripted.headers["cache-control"] == "no-store"
    page = _common.preparing_response(_request(query="page=2&q=x"), "the <index>")
    assert page.status_code == 202
    assert page.headers["retry-after"] == "2"
    assert page.headers["cache-control"] == "no-store"
    html = page.body.decode()
    assert '<meta http-equiv="refresh" content="2">' in html
    assert "computing the &lt;index&gt; in the background" in html
    assert "reloads itself every 2 seconds" in html
    assert 'href="/ui/runs/x?page=2&amp;q=x"' in html
    bare = _common.preparing_response(_request(), "it").body.decode()
    assert 'href="/ui/runs/x">Reload now' in bare


def test_wants_json() -> None:
    """JSON only when asked for and HTML is not."""
    assert _common.wants_json(_request(accept="application/json"))
    assert not _common.wants_json(_request(accept="text/html, application/json"))
    assert not _common.wants_json(_request(accept="*/*"))


def test_error_response_as_json_redirect_or_page() -> None:
    """A refusal: JSON for scripts, a login redirect for a GET without a session, else a page
    with the status and the message."""
    scripted = _common.error_response(_request(accept="application/json"), 409, "busy",
                                      "options.x")
    assert scripted.status_code == 409
    assert json.loads(scripted.body) == {"error": {"status": 409, "message": "busy",
                                                   "field": "options.x"}}
    login = _common.error_response(_request(query="page=2"), 401, "log in")
    assert login.status_code == 303
    assert login.headers["location"] == "/ui/login?next=%2Fui%2Fruns%2Fx%3Fpage%3D2"
    plain = _common.error_response(_request(), 401, "log in")
    assert plain.headers["location"] == "/ui/login?next=%2Fui%2Fruns%2Fx"
    posted = _common.error_response(_request(method="POST"), 401, "log in")
    assert posted.status_code == 401
    assert "401: not logged in" in posted.body.decode()
    page = _common.error_response(_request(), 404, "no <such> run", "job")
    assert page.status_code == 404
    html = page.body.decode()
    assert "404: not found" in html
    assert "<code>job</code>: no &lt;such&gt; run" in html
    assert page.headers["cache-control"] == "no-store"
    assert "403: not allowed" in _common.error_response(_request(), 403, "no").body.decode()


def test_iso_and_now() -> None:
    """Times as the API writes them."""
    assert _common.iso(None) is None
    assert _common.iso(0) == "1970-01-01T00:00:00Z"
    assert _common.iso(86400 + 3661.7) == "1970-01-02T01:01:01Z"
    assert abs(_common.now() - __import__("time").time()) < 5


def test_security_headers_only_on_the_interface() -> None:
    """The middleware adds the headers to /, /ui and /ui/... responses (keeping one the app
    set) and leaves the API's alone."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        request = await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"x-frame-options", b"SAMEORIGIN")]})
        await send({"type": "http.response.body", "body": request["body"]})

    wrapped = _common.SecurityHeaders(app)

    def headers_of(path: str) -> dict[bytes, bytes]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"ok", "more_body": False}

        asyncio.run(wrapped({"type": "http", "path": path}, receive, send))
        assert sent[1] == {"type": "http.response.body", "body": b"ok"}
        return dict(sent[0]["headers"])

    for path in ("/", "/ui", "/ui/runs/1"):
        got = headers_of(path)
        assert got[b"content-security-policy"] == _common.CSP.encode()
        assert got[b"x-content-type-options"] == b"nosniff"
        assert got[b"x-frame-options"] == b"SAMEORIGIN"
        assert got[b"referrer-policy"] == b"same-origin"
        assert got[b"permissions-policy"] == b"camera=(), microphone=(), geolocation=()"
    for path in ("/v1/jobs", "/uix", "/docs"):
        assert headers_of(path) == {b"x-frame-options": b"SAMEORIGIN"}


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


# ---------------------------------------------------------------- the turn index (_index)

INDEX_ROWS: list[dict[str, Any]] = [
    {"dialogue_id": "D1", "turn_index": 0, "verdict": True, "system": "",
     "user": "  Hello \n  World  ", "rule": {"2.1": True, "2.4": "x"},
     "pred_turn_state": {"hotel-area": "north"},
     "gold_turn_state": {"2.1": {"hotel-area": "north"}, "2.4": {"hotel-area": "north|centre"}}},
    {"dialogue_id": "D1", "turn_index": 1, "verdict": False, "system": "Sys", "user": "Book",
     "rule": {"2.1": True, "2.4": False},
     "pred_turn_state": {"hotel-area": "east", "taxi-leave": "5"},
     "gold_turn_state": {"2.1": {"hotel-area": "east", "taxi-leave": "6"}, "2.4": None},
     "incorrect": ["taxi-leave"], "missed": ["attraction-type", "taxi-leave"]},
    {"dialogue_id": "D2", "turn_index": 0, "verdict": "yes", "error": "boom", "user": "x",
     "rule": {"2.1": False}, "pred_turn_state": {},
     "gold_turn_state": {"2.1": {"bus-day": "mon"}}},
    {"dialogue_id": "D2", "turn_index": 1, "verdict": True, "system": "S", "user": "Find HOTEL",
     "rule": {"2.1": False, "2.4": True},
     "pred_turn_state": {"hotel-name": "none", "hotel-area": "west"},
     "gold_turn_state": {"2.1": {"hotel-area": "west"}, "2.4": {"hotel-area": "west"}}},
]


def _index_of(rows: list[dict[str, Any]] | None = None) -> _index.RunIndex:
    return build_index("j", ("t", "succeeded"), iter(rows or INDEX_ROWS), None)


def test_small_helpers_of_the_index() -> None:
    """Domains from slot names, gold alternatives, the equality RULE uses, filter queries."""
    assert _index.domain_of("hotel-book-day") == "hotel"
    assert _index.domain_of("plain") == "plain"
    assert _index._alternatives("a|b|c") == ["a", "b", "c"]
    assert _index._alternatives("a") == ["a"]
    assert _index._same(None, None) is True
    assert _index._same(None, "x") is False
    assert _index._same("x", None) is False
    assert _index._same("b", "a|b") is True
    assert _index._same("a|b", "a|b") is True
    assert _index._same("c", "a|b") is False
    assert _index._same(1, "1") is True
    assert not Filters().active
    assert Filters(q="x").active and Filters(error="no").active
    assert Filters(verdict="correct", slot="s").query() == {"verdict": "correct", "slot": "s"}


def test_entry_of_a_row() -> None:
    """A row's entry: its verdict, RULE verdicts, the slots and domains it touches, flagged
    slots, the audit's kinds and lower-cased search text."""
    entry = _index._entry(7, INDEX_ROWS[1], ["b", "a", "b"])
    assert entry == _index.TurnEntry(
        seq=7, dialogue_id="D1", turn_index=1, verdict=False,
        rule=(("2.1", True), ("2.4", False)), error=None, user="Book", text="d1 sys book",
        slots=("hotel-area", "taxi-leave", "attraction-type"),
        domains=("hotel", "taxi", "attraction"), kinds=("a", "b"),
        flagged=("taxi-leave", "attraction-type"))
    first = _index._entry(0, INDEX_ROWS[0], ())
    assert first.user == "Hello World"
    assert first.text == "d1    hello \n  world  "
    assert first.rule == (("2.1", True), ("2.4", None))
    assert first.rule_map == {"2.1": True, "2.4": None}
    errored = _index._entry(2, INDEX_ROWS[2], ())
    assert errored.verdict is None and errored.error == "boom"
    assert errored.slots == ("bus-day",) and errored.domains == ("bus",)
    long = _index._entry(0, {"dialogue_id": "L", "user": "word " * 100}, ())
    assert long.user == ("word " * 40)[:160] and len(long.user) == 160
    assert long.turn_index == 0 and long.slots == () and long.verdict is None


def test_build_index_counts_slots_and_domains() -> None:
    """Per-slot involvement, flags and gold mismatches; per-domain judge and RULE counts; the
    versions, kinds and positions of the run."""
    index = _index_of()
    assert index.job_id == "j" and index.key == ("t", "succeeded")
    assert index.versions == ["2.1", "2.4"]
    assert [(e.seq, e.dialogue_id, e.turn_index) for e in index.entries] == [
        (0, "D1", 0), (1, "D1", 1), (2, "D2", 0), (3, "D2", 1)]
    assert index.positions == {("D1", 0): 0, ("D1", 1): 1, ("D2", 0): 2, ("D2", 1): 3}
    SF, DF = _index.SlotFigures, _index.DomainFigures
    assert index.slots == {
        "attraction-type": SF(involved=1, flagged=1, mismatch={}),
        "bus-day": SF(involved=1, flagged=0, mismatch={"2.1": 1}),
        "hotel-area": SF(involved=3, flagged=0, mismatch={"2.4": 1}),
        "hotel-name": SF(involved=1, flagged=0, mismatch={"2.1": 1, "2.4": 1}),
        "taxi-leave": SF(involved=1, flagged=1, mismatch={"2.1": 1, "2.4": 1})}
    assert list(index.slots) == sorted(index.slots)
    assert index.domains == {
        "attraction": DF(turns=1, judged=1, judge_ok=0, rule_ok={"2.1": 1, "2.4": 0},
                         rule_turns={"2.1": 1, "2.4": 1}),
        "bus": DF(turns=1, judged=0, judge_ok=0, rule_ok={"2.1": 0}, rule_turns={"2.1": 1}),
        "hotel": DF(turns=3, judged=3, judge_ok=2, rule_ok={"2.1": 2, "2.4": 1},
                    rule_turns={"2.1": 3, "2.4": 2}),
        "taxi": DF(turns=1, judged=1, judge_ok=0, rule_ok={"2.1": 1, "2.4": 0},
                   rule_turns={"2.1": 1, "2.4": 1})}
    assert list(index.domains) == ["attraction", "bus", "hotel", "taxi"]
    assert [e.kinds for e in index.entries] == [
        ("value error",), ("annotation version disagreement", "judge flag"), (),
        ("value error",)]
    assert index.kinds == ["annotation version disagreement", "judge flag", "value error"]


def test_dialogues_group_consecutive_rows() -> None:
    """Rows come grouped by dialogue as the run keeps them."""
    rows = [{"dialogue_id": d} for d in ("a", "a", "b", "a")]
    assert [[r["dialogue_id"] for r in g] for g in _index._dialogues(iter(rows))] == [
        ["a", "a"], ["b"], ["a"]]
    assert list(_index._dialogues(iter([]))) == []


@pytest.mark.parametrize(("filters", "expected"), [
    (Filters(), [0, 1, 2, 3]),
    (Filters(verdict="correct"), [0, 3]),
    (Filters(verdict="incorrect"), [1]),
    (Filters(verdict="none"), [2]),
    (Filters(error="yes"), [2]),
    (Filters(error="no"), [0, 1, 3]),
    (Filters(disagree="any"), [1, 3]),
    (Filters(disagree="agree"), [0]),
    (Filters(disagree="judge-accepts"), [3]),
    (Filters(disagree="judge-rejects"), [1]),
    (Filters(version="2.4"), []),
    (Filters(version="2.1"), [1, 3]),
    (Filters(disagree="judge-accepts", version="2.1"), [3]),
    (Filters(disagree="judge-rejects", version="2.4"), []),
    (Filters(disagree="agree", version="2.4"), [0, 1, 3]),
    (Filters(kind="judge flag"), [1]),
    (Filters(kind="value error"), [0, 3]),
    (Filters(domain="taxi"), [1]),
    (Filters(slot="bus-day"), [2]),
    (Filters(q="  HOTEL "), [3]),
    (Filters(q="d1"), [0, 1]),
    (Filters(verdict="correct", domain="hotel", q="world"), [0]),
])
def test_match_applies_every_filter(filters: Filters, expected: list[int]) -> None:
    """The positions a filter keeps, in run order."""
    assert _index_of().match(filters) == expected


def test_disagrees_per_version() -> None:
    """Which way the judge departs from RULE, for one version or any."""
    index = _index_of()
    assert index.entries[1].disagrees(None) == (False, True)
    assert index.entries[1].disagrees("2.4") == (False, False)
    assert index.entries[3].disagrees(None) == (True, False)
    assert index.entries[3].disagrees("2.1") == (True, False)
    assert index.entries[3].disagrees("2.4") == (False, False)
    assert index.entries[2].disagrees(None) == (False, False)


class _Reads:
    def __init__(self, rows: list[dict[str, Any]], fail: bool = False) -> None:
        self.rows, self.fail, self.calls = rows, fail, 0

    def slim_rows(self, project_id: str, job_id: str) -> Any:
        self.calls += 1
        assert project_id == "lab" and isinstance(job_id, str) and job_id
        if self.fail:
            raise RuntimeError("gone")
        return iter(enumerate(self.rows))


class _Row:
    def __init__(self, job_id: str, turns: int = 4, updated_at: float = 1.0) -> None:
        self.id, self.project_id, self.updated_at, self.status = job_id, "lab", updated_at, "ok"
        self.summary = {"turns": turns}


def test_build_index_drops_none_deletions_when_the_run_compared_under_nospace() -> None:
    """RULE under ``nospace`` ignores a prediction's ``none`` pairs, so the index's
    disagreement kinds must too: a ``none`` carried over is then no stale carry-over."""
    base = {"dialogue_id": "d1", "system": "", "verdict": True}
    rows = [dict(base, turn_index=0, user="no parking needed",
                 pred_turn_state={"hotel-parking": "none"},
                 gold_turn_state={"2.1": {"hotel-parking": "none"}}, rule={"2.1": True}),
            dict(base, turn_index=1, user="a cheap one",
                 pred_turn_state={"hotel-pricerange": "cheap", "hotel-parking": "none"},
                 gold_turn_state={"2.1": {"hotel-pricerange": "cheap"}}, rule={"2.1": False})]
    kinds = {policy: [e.kinds for e in build_index("j", None, iter(rows),
                                                   {"rule_match": policy}).entries]
             for policy in ("nospace", "exact")}
    assert kinds == {"nospace": [(), ("value error",)], "exact": [(), ("stale carry-over",)]}
    assert [e.kinds for e in build_index("j", None, iter(rows), None).entries] == \
        kinds["exact"]


def test_index_cache_builds_once_and_keeps_the_most_recent() -> None:
    """An index is built once per job version, rebuilt when the job moves, and only the
    ``size`` most recently used are kept."""
    reads = _Reads(INDEX_ROWS)
    cache = _index.IndexCache(reads, size=2)  # type: ignore[arg-type]
    a, b, c = _Row("a"), _Row("b"), _Row("c")
    assert cache.peek(a) is None
    first = cache.get(a)
    assert first.job_id == "a" and first.key == (1.0, "ok") and len(first.entries) == 4
    assert cache.get(a) is first and cache.peek(a) is first and reads.calls == 1
    cache.get(b)
    assert cache.peek(a) is first  # a is now the most recent
    cache.get(c)
    assert list(cache.items) == ["a", "c"]
    assert cache.peek(b) is None
    moved = _Row("a", updated_at=2.0)
    assert cache.peek(moved) is None
    assert cache.get(moved) is not first and reads.calls == 4
    assert _index.IndexCache(reads).size == 6  # type: ignore[arg-type]


def test_index_cache_ready_builds_small_runs_and_prepares_large_ones() -> None:
    """Small runs are indexed in the request; large ones in the background while the page
    says what it is preparing."""
    assert not _index.IndexCache.large(_Row("a", turns=2000))
    assert _index.IndexCache.large(_Row("a", turns=2001))
    none = _Row("n")
    none.summary = None  # type: ignore[assignment]
    assert not _index.IndexCache.large(none)
    cache = _index.IndexCache(_Reads(INDEX_ROWS))  # type: ignore[arg-type]
    assert cache.ready(_Row("small")).job_id == "small"
    big, other = _Row("big", turns=5000), _Row("other", turns=5000)
    with pytest.raises(_common.Preparing) as caught:
        cache.ready_all([_Row("small"), big, other])
    assert str(caught.value) == "the turn indexes of 2 runs (big, other)"
    fourth = _Row("fourth", turns=5000)
    with pytest.raises(_common.Preparing) as caught:
        cache.ready(fourth)
    assert caught.value.what == "the turn index of run fourth"
    deadline = __import__("time").monotonic() + 10
    while cache.peek(big) is None or cache.peek(other) is None or cache.warming:
        assert __import__("time").monotonic() < deadline
        __import__("time").sleep(0.01)
    assert [i.job_id for i in cache.ready_all([big, other])] == ["big", "other"]
    third = _Row("third", turns=5000)
    with pytest.raises(_common.Preparing) as caught:
        cache.ready_all([big, third])
    assert caught.value.what == "the turn indexes of 1 run (third)"


def test_index_cache_warm_skips_known_and_survives_failures() -> None:
    """Warming an indexed job does nothing; a failing build leaves no index and no mark."""
    reads = _Reads(INDEX_ROWS)
    cache = _index.IndexCache(reads)  # type: ignore[arg-type]
    row = _Row("a")
    cache.get(row)
    cache.warm(row)
    assert cache.warming == set() and reads.calls == 1
    broken = _index.IndexCache(_Reads([], fail=True))  # type: ignore[arg-type]
    broken.warm(_Row("x"))
    deadline = __import__("time").monotonic() + 10
    while broken.warming:
        assert __import__("time").monotonic() < deadline
        __import__("time").sleep(0.01)
    assert broken.peek(_Row("x")) is None and broken.building.keys() == {"x"}


# ---------------------------------------------------------------- agreement (_agreement)

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

    index = _index_of()
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
    row = _Row("a")
    row.subject = None  # type: ignore[attr-defined]
    service = _Service(LABELS[:2])
    board = _agreement.AgreementBoard(service)  # type: ignore[arg-type]
    try:
        first = board.panel("lab", row, _index_of(), "ann")
        assert first["quick"]["labels"] == 2 and first["computed"] is None
        assert first["stale"] is True
        deadline = __import__("time").monotonic() + 30
        while board.pending:
            assert __import__("time").monotonic() < deadline
            __import__("time").sleep(0.02)
        done = board.panel("lab", row, _index_of(), "ann")
        assert done["stale"] is False and done["updating"] is False
        assert done["computed"].fingerprint == (2, 2.0, 3, None)
        assert done["computed"].error is None and done["computed"].tables
        service.labels.items = LABELS[:3]
        again = board.panel("lab", row, _index_of(), "ann")
        assert again["stale"] is True and again["computed"] is done["computed"]
    finally:
        board.close()
    empty = _agreement.AgreementBoard(_Service([]))  # type: ignore[arg-type]
    try:
        panel = empty.panel("lab", row, _index_of(), "ann")
        assert panel["stale"] is False and panel["updating"] is False
        assert panel["computed"] is None and not empty.pending
    finally:
        empty.close()


def test_human_agreement_of_the_judge() -> None:
    """The judge's agreement with each labelled turn's majority label; turns without a
    verdict do not count; None without labels or without any counted turn."""
    index = _index_of()
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
            board._compute("a", _index_of(), LABELS, ("m",),
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
        from judge._errors import ServiceError

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

    sample = draw(_index_of(), 2, seed=1)
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
    _agreement.store_sample(service, "lab", "job_1", draw(_index_of(), 3, seed=1))
    assert _agreement.stored_sample(service, "lab", "job_1")[0] == "file2"
    assert service.files.deleted == []
    # job_2 draws anew: nothing references file1 any more, so it goes
    _agreement.store_sample(service, "lab", "job_2", draw(_index_of(), 3, seed=2))
    assert service.files.deleted == ["review-sample-job_1.jsonl"]
    # a separate draw is referenced by its n and seed, beside the estimate sample
    _agreement.store_sample(service, "lab", "job_1", draw(_index_of(), 2, seed=5), 2, 5)
    separate_id, separate = _agreement.stored_sample(service, "lab", "job_1", 2, 5)
    assert separate_id == "file4" and separate.path == "review-sample-job_1-n2-seed5.jsonl"
    assert _agreement.stored_sample(service, "lab", "job_1")[0] == "file2"


def _route_app() -> Any:
    from fastapi import APIRouter, FastAPI
    from starlette.exceptions import HTTPException

    router = APIRouter(route_class=_common.WebRoute)

    @router.get("/ui/refused")
    def refused() -> None:
        raise ServiceError("no such run", status=404, field="job_id")

    @router.get("/ui/later")
    def later() -> None:
        raise _common.Preparing("the turn index of run j")

    @router.get("/ui/number")
    def number(n: int) -> dict[str, int]:
        return {"n": n}

    @router.get("/ui/teapot")
    def teapot() -> None:
        raise HTTPException(418, "short and stout")

    app = FastAPI()
    app.include_router(router)
    return app


def test_web_route_turns_exceptions_into_pages_or_json() -> None:
    """Service errors, preparing work, invalid parameters and HTTP errors of a page become
    the interface's error page, or JSON for scripts."""
    import httpx

    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=_route_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            js = {"accept": "application/json"}
            return [await client.get("/ui/refused", headers=js),
                    await client.get("/ui/refused"),
                    await client.get("/ui/later", headers=js),
                    await client.get("/ui/number?n=x", headers=js),
                    await client.get("/ui/number", headers=js),
                    await client.get("/ui/number?n=4", headers=js),
                    await client.get("/ui/teapot", headers=js)]

    refused, page, later, bad, missing, fine, teapot = asyncio.run(go())
    assert refused.status_code == 404
    assert refused.json() == {"error": {"status": 404, "message": "no such run",
                                        "field": "job_id"}}
    assert page.status_code == 404 and "<code>job_id</code>: no such run" in page.text
    assert later.status_code == 202 and later.json() == {"preparing": "the turn index of run j"}
    assert later.headers["retry-after"] == "2"
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "n"
    assert "integer" in bad.json()["error"]["message"]
    assert missing.status_code == 422 and missing.json()["error"] == {
        "status": 422, "message": "Field required", "field": "n"}
    assert fine.json() == {"n": 4}
    assert teapot.status_code == 418
    assert teapot.json() == {"error": {"status": 418, "message": "short and stout",
                                       "field": None}}


class _Viewer:
    name, project, csrf = "alice", "lab", "tok-123"
    principal = type("P", (), {"scopes": ["read", "submit"]})()

    def can(self, scope: str) -> bool:
        return scope == "submit"


def test_render_fills_viewer_csrf_and_path_from_the_request() -> None:
    """A page rendered for a logged-in viewer carries their CSRF token, name and the current
    page marked in the navigation; without a viewer the token is empty; the status and no-store
    header are set."""
    request = _request(path="/ui/compare")
    request.state.viewer = _Viewer()
    page = _common.render(request, "error.html", code=409, status_code=409, message="m",
                          field=None)
    assert page.status_code == 409 and page.headers["cache-control"] == "no-store"
    html = page.body.decode()
    assert '<meta name="csrf-token" content="tok-123">' in html
    assert '<input type="hidden" name="csrf" value="tok-123">' in html
    assert "<strong>alice</strong> · lab · read, submit" in html
    assert 'href="/ui/compare" aria-current="page"' in html
    assert 'href="/ui/runs/new">New evaluation' in html
    assert f"dst-judge {__version__} ·" in html
    assert "409: cannot do that" in html
    anonymous = _common.render(_request(), "error.html", status_code=404, message="m",
                               field=None)
    assert anonymous.status_code == 200
    assert '<meta name="csrf-token" content="">' in anonymous.body.decode()
    assert "Log out" not in anonymous.body.decode()
    chosen = _common.render(request, "error.html", csrf="given", request_path="/ui/review",
                            status_code=400, message="m", field=None).body.decode()
    assert '<meta name="csrf-token" content="given">' in chosen
    assert 'href="/ui/review" aria-current="page"' in chosen


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
    _agreement.store_sample(service, "lab", "a", draw(_index_of(), 2, seed=1))
    row = _Row("a")
    row.subject = None  # type: ignore[attr-defined]
    board = _agreement.AgreementBoard(service)  # type: ignore[arg-type]
    try:
        board.panel("lab", row, _index_of(), "ann")
        deadline = __import__("time").monotonic() + 30
        while board.pending:
            assert __import__("time").monotonic() < deadline
            __import__("time").sleep(0.02)
        assert list(board.results) == ["a"]
        done = board.panel("lab", row, _index_of(), "ann")
        assert done["computed"].fingerprint == (2, 2.0, 3, "file1")
        assert done["stale"] is False
    finally:
        board.close()
