"""A long ranking of label-error candidates is written over several linked pages, none of
them the whole ranking in one piece."""

from __future__ import annotations

import re

from judge.analysis import find_candidates, load_audit_inputs, write_audit

from ..conftest import EXAMPLES

RANKS = re.compile(r'<tr[^>]*><td class="num">(\d+)</td><td class="num">[01]\.')
LINKS = re.compile(r'<a href="([^"#]+)"')


def _candidates():
    inputs = load_audit_inputs([EXAMPLES / "predictions.jsonl",
                                EXAMPLES / "predictions-weak.jsonl"],
                               dialogues=EXAMPLES / "dialogues.jsonl")
    return find_candidates(inputs.dialogues, inputs.sources)


def test_long_ranking_is_paged_and_linked(tmp_path):
    candidates = _candidates()
    assert len(candidates) >= 7
    out = tmp_path / "audit.html"
    assert write_audit(None, out, candidates=candidates, per_page=3) == 0
    count = -(-len(candidates) // 3)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(["audit.html", *[f"audit-candidates-{n}.html"
                                            for n in range(2, count + 1)]])
    seen: list[int] = []
    for number in range(1, count + 1):
        name = "audit.html" if number == 1 else f"audit-candidates-{number}.html"
        html = (tmp_path / name).read_text(encoding="utf-8")
        ranks = [int(r) for r in RANKS.findall(html)]
        assert 1 <= len(ranks) <= 3
        seen += ranks
        assert f"ranked ({len(candidates)})" in html  # the whole ranking's size on every page
        assert f"Page {number} of {count}" in html
        for target in LINKS.findall(html):  # every link is to a page written beside it
            assert (tmp_path / target).is_file(), target
        assert ('rel="next"' in html) == (number < count)
        assert ('rel="prev"' in html) == (number > 1)
        assert "<script" not in html and "http" not in html.split("<body", 1)[1]
    assert seen == [c.rank for c in candidates] == list(range(1, len(candidates) + 1))


def test_short_ranking_stays_one_page(tmp_path):
    candidates = _candidates()
    write_audit(None, tmp_path / "audit.html", candidates=candidates)
    assert [p.name for p in tmp_path.iterdir()] == ["audit.html"]
    html = (tmp_path / "audit.html").read_text(encoding="utf-8")
    assert "Page 1 of" not in html
    assert [int(r) for r in RANKS.findall(html)] == list(range(1, len(candidates) + 1))
