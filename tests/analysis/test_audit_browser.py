"""The audit page in a real headless Chromium: it loads cleanly, filters, searches, sorts and
exports what it lists.

Debian's Chromium (``/usr/bin/chromium``) is driven through the ``playwright`` package; the
browser builds that ``playwright install`` would download are never used. When Chromium is
missing, the session fixture installs it with apt-get if it can (root, apt-get present), and
otherwise skips with the reason.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from judge.analysis._audit import (
    AuditItem,
    audit_items,
    load_run_dir,
    write_audit,
)
from judge.analysis._audit_decisions import import_decisions

from ..browser import PLAYWRIGHT_MISSING, launched
from .test_audit import both, example_inputs, judge_run, row, write_run

sync_api = pytest.importorskip("playwright.sync_api", reason=PLAYWRIGHT_MISSING)

pytestmark = pytest.mark.servers("browser")


@dataclass
class Report:
    """A written audit page and the items it should list."""

    path: Path
    items: list[AuditItem]


@dataclass
class Opened:
    """A page with the errors it reported (console errors and uncaught exceptions)."""

    page: object
    errors: list[str]
    dialogs: list[str]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Report:
    """The page of a real run: the one-prompt baseline replayed from its cassette."""
    folder = tmp_path_factory.mktemp("audit-run")
    run = judge_run(folder, "direct", example_inputs())
    write_audit(run, folder / "audit.html")
    summary, rows = load_run_dir(run)
    items = audit_items(rows, ignore_none_pairs="nospace" in summary["rule_match"])
    assert items, "the direct run disagrees with the annotation on some turns"
    return Report(folder / "audit.html", items)


NASTY = "fine </script><script>window.pwned = 1</script> <b>bold</b> & more"


@pytest.fixture(scope="module")
def nasty_report(tmp_path_factory) -> Report:
    folder = tmp_path_factory.mktemp("audit-nasty")
    rows = [row(0, system="<img src=x onerror=\"window.pwned = 2\">", user=NASTY,
                pred={"hotel-name": "<b>x</b>"}, gold=both({"hotel-name": "y"}))]
    run = write_run(folder / "run", rows, {"data": {"versions": ["2.1", "2.4"]}})
    write_audit(run, folder / "audit.html")
    return Report(folder / "audit.html", audit_items(rows))


@pytest.fixture(scope="module")
def browser(report, nasty_report):
    # The reports are made first: the judge runs asyncio.run, which cannot run while
    # playwright's sync API is active; module scope closes the browser before other modules.
    with launched() as chromium:
        yield chromium


@pytest.fixture
def opened(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    page = context.new_page()
    result = Opened(page, [], [])
    page.on("console", lambda m: result.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: result.errors.append(str(exc)))

    def on_dialog(dialog) -> None:
        result.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else result.errors.append(f"network request: {r.url}"))
    yield result
    context.close()


def load(opened: Opened, report: Report):
    page = opened.page
    page.goto(report.path.as_uri())
    sync_api.expect(page.locator("#total-count")).to_have_text(str(len(report.items)))
    return page


def count(page) -> int:
    return int(page.locator("#row-count").inner_text())


def expect_count(page, number: int) -> None:
    sync_api.expect(page.locator("#row-count")).to_have_text(str(number))


def listed_turns(page) -> list[int]:
    return [int(t) for t in page.locator("tr.item td:nth-child(3)").all_inner_texts()]


def test_page_loads_clean_lists_every_item_and_is_photographed(opened, report, tmp_path,
                                                              capsys):
    page = load(opened, report)
    assert count(page) == len(report.items)
    assert page.locator("tr.item").count() == len(report.items)
    page.locator("tr.item button.toggle").first.click()
    sync_api.expect(page.locator("tr.detail")).to_have_count(1)
    assert "Dialogue so far" in page.locator("tr.detail").text_content()
    shot = tmp_path / "audit.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with capsys.disabled():
        print(f"\naudit page screenshot: {shot}")
    assert opened.errors == []


def test_kind_slot_and_version_filters_change_the_count(opened, report):
    page = load(opened, report)
    kinds = Counter(i.kind for i in report.items)
    for kind in [*kinds, "stale carry-over"]:
        page.select_option("#filter-kind", kind)
        expect_count(page, kinds.get(kind, 0))
    page.select_option("#filter-kind", "")
    expect_count(page, len(report.items))

    slot = report.items[0].slot
    page.select_option("#filter-slot", "=" + slot)
    expect_count(page, sum(i.slot == slot for i in report.items))
    page.select_option("#filter-slot", "")

    for version in ("2.1", "2.4"):
        page.select_option("#filter-version", version)
        expect_count(page, sum(version in i.disagreeing_versions for i in report.items))
    page.click("#clear-filters")
    expect_count(page, len(report.items))
    assert opened.errors == []


def test_text_search(opened, report):
    page = load(opened, report)
    dialogue = report.items[-1].dialogue_id
    page.fill("#search", dialogue.lower())
    expect_count(page, sum(i.dialogue_id == dialogue for i in report.items))
    page.fill("#search", "no such text anywhere")
    expect_count(page, 0)
    sync_api.expect(page.locator("tr.empty")).to_contain_text("No item matches")
    page.fill("#search", "")
    expect_count(page, len(report.items))
    assert opened.errors == []


def test_clicking_a_header_sorts(opened, report):
    page = load(opened, report)
    page.select_option("#group-by", "")
    header = page.locator("th[data-key=turn]")
    header.locator("button").click()
    sync_api.expect(header).to_have_attribute("aria-sort", "ascending")
    assert listed_turns(page) == sorted(i.turn_index for i in report.items)
    header.locator("button").click()
    sync_api.expect(header).to_have_attribute("aria-sort", "descending")
    assert listed_turns(page) == sorted((i.turn_index for i in report.items), reverse=True)
    assert opened.errors == []


def _read_download(page, button: str, target: Path) -> Path:
    with page.expect_download() as info:
        page.click(button)
    info.value.save_as(str(target))
    return target


def test_exports_download_the_listed_rows_with_decisions(opened, report, tmp_path):
    page = load(opened, report)
    page.fill("#annotator", "tester")
    kind, number = Counter(i.kind for i in report.items).most_common(1)[0]
    page.select_option("#filter-kind", kind)
    expect_count(page, number)
    chosen = [i for i in report.items if i.kind == kind]
    decided = chosen[0].turn_key
    page.locator("tr.item select").first.select_option("incorrect")
    page.locator("tr.item input.note").first.fill("gold misses it, with \"quotes\", commas")

    exported = _read_download(page, "#export-csv", tmp_path / "decisions.csv")
    with exported.open(encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    assert len(records) == number
    assert sorted((r["dialogue_id"], int(r["turn_index"]), r["slot"]) for r in records) == \
        sorted((i.dialogue_id, i.turn_index, i.slot) for i in chosen)
    assert {r["kind"] for r in records} == {kind}
    assert list(records[0]) == ["dialogue_id", "turn_index", "slot", "kind", "predicted",
                                "gold_2.1", "gold_2.4", "judge_verdict", "decision", "note",
                                "annotator"]
    by_item = {(r["dialogue_id"], int(r["turn_index"]), r["slot"]): r for r in records}
    for item in chosen:
        record = by_item[(item.dialogue_id, item.turn_index, item.slot)]
        # a decision applies to every row of its turn
        assert record["decision"] == ("incorrect" if item.turn_key == decided else "")
        assert record["predicted"] == (item.predicted or "")
        assert record["gold_2.4"] == (item.gold["2.4"] or "")
        assert record["judge_verdict"] == ("correct" if item.verdict else "incorrect")
    assert "gold misses it, with \"quotes\", commas" in {r["note"] for r in records}

    labels = import_decisions(exported)
    dialogue_id, turn_index = decided.rsplit("::", 1)
    assert labels == [{"dialogue_id": dialogue_id, "turn_index": int(turn_index), "label": 0,
                       "annotator": "tester",
                       "note": "gold misses it, with \"quotes\", commas"}]

    exported_jsonl = _read_download(page, "#export-jsonl", tmp_path / "decisions.jsonl")
    lines = [json.loads(line) for line in exported_jsonl.read_text("utf-8").splitlines()]
    assert [(x["dialogue_id"], x["turn_index"], x["slot"], x["decision"]) for x in lines] == \
        [(r["dialogue_id"], int(r["turn_index"]), r["slot"], r["decision"]) for r in records]
    assert import_decisions(exported_jsonl) == labels
    assert opened.errors == []


def test_markup_in_utterances_stays_text(opened, nasty_report):
    page = load(opened, nasty_report)
    expect_count(page, 1)
    page.locator("tr.item button.toggle").first.click()
    detail = page.locator("tr.detail")
    sync_api.expect(detail).to_contain_text(NASTY)
    assert page.locator("tr.detail b, tr.item b, main img").count() == 0
    assert page.evaluate("window.pwned === undefined")
    assert opened.dialogs == [] and opened.errors == []


FORMULAS = {"=": "=cmd|' /C calc'!A0", "+": "+1+1", "-": "-2+3", "@": "@SUM(A1)",
            "\t": "\t=1", "\r": "\r=1", "'": "'quoted"}


@pytest.fixture
def formula_report(tmp_path) -> Report:
    """Values, an id and a note that a spreadsheet would run as formulas."""
    rows = [row(0, dialogue_id="=HYPERLINK(\"x\")", pred={"hotel-name": FORMULAS["="]},
                gold=both({"hotel-name": FORMULAS["@"]})),
            row(1, dialogue_id="=HYPERLINK(\"x\")", pred={"hotel-area": FORMULAS["-"]},
                gold=both({"hotel-area": FORMULAS["'"]}))]
    run = write_run(tmp_path / "run", rows, {"data": {"versions": ["2.1", "2.4"]}})
    write_audit(run, tmp_path / "audit.html")
    return Report(tmp_path / "audit.html", audit_items(rows))


def test_csv_export_defuses_formulas_and_imports_back_unchanged(opened, formula_report,
                                                                tmp_path):
    page = load(opened, formula_report)
    page.fill("#annotator", "+tester")
    page.locator("tr.item select").first.select_option("incorrect")
    page.locator("tr.item input.note").first.fill(FORMULAS["="])
    exported = _read_download(page, "#export-csv", tmp_path / "decisions.csv")
    with exported.open(encoding="utf-8", newline="") as handle:
        cells = [cell for record in csv.reader(handle) for cell in record]
    dangerous = [c for c in cells if c[:1] in tuple("=+-@\t\r")]
    assert dangerous == [], "a spreadsheet would run these as formulas"
    assert "'" + FORMULAS["="] in cells and "''quoted" in cells
    assert "'=HYPERLINK(\"x\")" in cells
    [label] = import_decisions(exported)  # the first listed turn, as the page sorts them
    assert label["turn_index"] in (0, 1)
    assert {k: v for k, v in label.items() if k != "turn_index"} == {
        "dialogue_id": "=HYPERLINK(\"x\")", "label": 0, "annotator": "+tester",
        "note": FORMULAS["="]}
    assert opened.errors == []
