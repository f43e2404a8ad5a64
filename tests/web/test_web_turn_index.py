"""The turn index (``web/_index``) called directly: entries of rows, counts per slot and
domain, dialogues, filters, per-version disagreement and the index cache."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from judge.web import _common, _index
from judge.web._index import Filters, build_index

from .views import INDEX_ROWS, RunRow, index_of


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
    index = index_of()
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
    assert index_of().match(filters) == expected


def test_disagrees_per_version() -> None:
    """Which way the judge departs from RULE, for one version or any."""
    index = index_of()
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
    a, b, c = RunRow("a"), RunRow("b"), RunRow("c")
    assert cache.peek(a) is None
    first = cache.get(a)
    assert first.job_id == "a" and first.key == (1.0, "ok") and len(first.entries) == 4
    assert cache.get(a) is first and cache.peek(a) is first and reads.calls == 1
    cache.get(b)
    assert cache.peek(a) is first  # a is now the most recent
    cache.get(c)
    assert list(cache.items) == ["a", "c"]
    assert cache.peek(b) is None
    moved = RunRow("a", updated_at=2.0)
    assert cache.peek(moved) is None
    assert cache.get(moved) is not first and reads.calls == 4
    assert _index.IndexCache(reads).size == 6  # type: ignore[arg-type]


def test_index_cache_ready_builds_small_runs_and_prepares_large_ones() -> None:
    """Small runs are indexed in the request; large ones in the background while the page
    says what it is preparing."""
    assert not _index.IndexCache.large(RunRow("a", turns=2000))
    assert _index.IndexCache.large(RunRow("a", turns=2001))
    none = RunRow("n")
    none.summary = None  # type: ignore[assignment]
    assert not _index.IndexCache.large(none)
    cache = _index.IndexCache(_Reads(INDEX_ROWS))  # type: ignore[arg-type]
    assert cache.ready(RunRow("small")).job_id == "small"
    big, other = RunRow("big", turns=5000), RunRow("other", turns=5000)
    with pytest.raises(_common.Preparing) as caught:
        cache.ready_all([RunRow("small"), big, other])
    assert str(caught.value) == "the turn indexes of 2 runs (big, other)"
    fourth = RunRow("fourth", turns=5000)
    with pytest.raises(_common.Preparing) as caught:
        cache.ready(fourth)
    assert caught.value.what == "the turn index of run fourth"
    deadline = __import__("time").monotonic() + 10
    while cache.peek(big) is None or cache.peek(other) is None or cache.warming:
        assert __import__("time").monotonic() < deadline
        __import__("time").sleep(0.01)
    assert [i.job_id for i in cache.ready_all([big, other])] == ["big", "other"]
    third = RunRow("third", turns=5000)
    with pytest.raises(_common.Preparing) as caught:
        cache.ready_all([big, third])
    assert caught.value.what == "the turn indexes of 1 run (third)"


def test_index_cache_warm_skips_known_and_survives_failures() -> None:
    """Warming an indexed job does nothing; a failing build leaves no index and no mark."""
    reads = _Reads(INDEX_ROWS)
    cache = _index.IndexCache(reads)  # type: ignore[arg-type]
    row = RunRow("a")
    cache.get(row)
    cache.warm(row)
    assert cache.warming == set() and reads.calls == 1
    broken = _index.IndexCache(_Reads([], fail=True))  # type: ignore[arg-type]
    broken.warm(RunRow("x"))
    deadline = __import__("time").monotonic() + 10
    while broken.warming:
        assert __import__("time").monotonic() < deadline
        __import__("time").sleep(0.01)
    assert broken.peek(RunRow("x")) is None and broken.building.keys() == {"x"}
