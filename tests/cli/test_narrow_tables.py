"""At 80 and 60 columns the tables of ``report``, ``systems``, ``jobs`` and ``serve token
list`` print every figure, name, id and date whole (never ``50.0`` / ``0`` or ``tok_de80…``),
and a token id as a narrow table shows it is one ``revoke`` accepts."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from judge.cli import main
from judge.cli._layout import Field, FitTable
from judge.cli._report import print_systems

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WIDTHS = (80, 60)


def _fits(output: str, width: int) -> list[str]:
    lines = output.splitlines()
    assert lines and max(len(line) for line in lines) <= width, output
    return lines


def _whole(value: str, output: str) -> None:
    """``value`` appears as a whole word of ``output`` (or, with spaces, on one line)."""
    if " " in value:
        assert any(value in line for line in output.splitlines()), (value, output)
    else:
        assert value in output.split(), (value, output)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("extra", [[], ["--per-slot"], ["--profile", "all"]],
                         ids=["paper", "per-slot", "profiles"])
def test_report_prints_figures_and_names_whole(width, extra, monkeypatch, capsys):
    args = ["report", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions",
            str(EXAMPLES / "predictions.jsonl"), str(EXAMPLES / "predictions-weak.jsonl"),
            *extra]
    assert main([*args, "--format", "csv"]) == 0
    _header, *rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows and any("." in cell for row in rows for cell in row)
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(args) == 0
    output = capsys.readouterr().out
    _fits(output, width)
    for row in rows:
        for cell in row:
            _whole(cell or "–", output)  # 100.00, hotel-book people, example-dst, 2.4 ...


@pytest.mark.parametrize("width", WIDTHS)
def test_systems_prints_long_system_names_whole(width):
    names = ["a-rather-long-system-name-trained-on-2.4", "baseline", "another-system-v2-large"]
    table = {"systems": [
        {"system": name, "tsa": {"judge": 71.234 + n, "RULE-2.1": 55.0, "RULE-2.4": 100.0},
         "jga": {"judge": 50.0, "RULE-2.1": 9.09 * n, "RULE-2.4": 100.0}}
        for n, name in enumerate(names)]}
    console = Console(width=width, record=True, color_system=None)
    print_systems(table, console)
    output = console.export_text()
    _fits(output, width)
    for value in [*names, "71.23", "72.23", "55.00", "100.00", "50.00", "18.18"]:
        _whole(value, output)


@pytest.mark.parametrize("width", (200, 120, 100, 80, 60, 40))
def test_a_fit_table_never_cuts_a_whole_cell(width):
    table = FitTable(["id", Field("name", whole=False), Field("cost", "right"), "created"],
                     title="some jobs")
    table.add_row("job_3f9a5c7e1b2d4f60", "a name of several words", "$123.4567",
                  "2026-11-27 05:31:07")
    table.add_row("job_0000000000000001", "x", "$0.0000", "2026-11-28 10:00:00")
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    output = console.export_text()
    _fits(output, width)
    for value in ("job_3f9a5c7e1b2d4f60", "job_0000000000000001", "$123.4567", "$0.0000",
                  "2026-11-27 05:31:07", "2026-11-28 10:00:00", "several"):
        _whole(value, output)


@pytest.mark.parametrize("width", WIDTHS)
def test_token_list_shows_ids_whole_and_revoke_takes_a_unique_prefix(width, tmp_path,
                                                                     monkeypatch, capsys):
    pytest.importorskip("fastapi", reason="token commands need the serve extra")
    data = ["--data-dir", str(tmp_path)]
    made = []
    for name, project in (("a reviewer with a long name", "laboratory-of-dialogue"),
                          ("me", "lab")):
        assert main(["serve", "token", "create", "--project", project, "--scopes",
                     "read,submit,review", "--name", name, "--spend-cap", "12.5", "--json",
                     "--init", *data]) == 0
        made.append(json.loads(capsys.readouterr().out))
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["serve", "token", "list", *data]) == 0
    output = capsys.readouterr().out
    _fits(output, width)
    for token in made:
        for value in (token["id"], token["project"], "read,submit,review", "12.5"):
            _whole(value, output)
    # as much of an id as a narrow table or a hurried copy shows, with its ellipsis
    shown = made[0]["id"][:10] + "…"
    assert main(["serve", "token", "revoke", shown, *data]) == 0
    assert made[0]["id"] in capsys.readouterr().out
    assert main(["serve", "token", "list", "--json", *data]) == 0
    revoked = {t["id"]: t["revoked_at"] is not None for t in json.loads(capsys.readouterr().out)}
    assert revoked == {made[0]["id"]: True, made[1]["id"]: False}
    assert main(["serve", "token", "revoke", "tok_", *data]) == 2
    assert "too short" in capsys.readouterr().err


def test_revoke_refuses_a_prefix_of_several_ids():
    from judge._errors import OptionError
    from judge.cli._serve import _token_id

    ids = ["tok_ab12cd34ef560001", "tok_ab12cd34ef560002", "tok_ffff000011112222"]
    assert _token_id(ids, "tok_ffff…") == "tok_ffff000011112222"
    assert _token_id(ids, "tok_ab12cd34ef560002") == "tok_ab12cd34ef560002"
    assert _token_id(ids, "tok_nothing") == "tok_nothing"  # then "no active token"
    with pytest.raises(OptionError, match="begins 2 token ids"):
        _token_id(ids, "tok_ab12")


@pytest.mark.parametrize("width", WIDTHS)
def test_metrics_prints_figures_and_system_names_whole(width, tmp_path, monkeypatch, capsys):
    import judge
    from judge.cli._layout import cell_text
    from judge.cli._report import _rows

    third = tmp_path / "third.jsonl"
    third.write_text((EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").replace(
        '"example-dst"', '"a-third-system"'), encoding="utf-8")
    files = [EXAMPLES / "predictions.jsonl", EXAMPLES / "predictions-weak.jsonl", third]
    schema = judge.load_schema(EXAMPLES / "schema.json")
    dialogues = judge.load_dialogues(EXAMPLES / "dialogues.jsonl")
    systems = [judge.load_predictions(f, dialogues, schema) for f in files]
    report = judge.compute_metrics(dialogues, systems, schema, gold="2.4")
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["metrics", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions", *map(str, files),
                 "--gold", "2.4"]) == 0
    output = capsys.readouterr().out
    _fits(output, width)
    for value in ("example-dst", "weaker-dst", "a-third-system"):
        _whole(value, output)
    for _, values in _rows(report):
        for value in values:
            _whole(cell_text(value), output)  # 27.27, "70.83 / 70.83", 17/6/1/1 ...


def _no_broken_words(output: str, words: list[str]) -> None:
    """Each of ``words`` is on one line somewhere, and no line holds only a piece of one."""
    for word in words:
        assert any(word in line for line in output.splitlines()), (word, output)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_wide_table_is_cut_into_parts_never_into_words(width):
    """A table too wide for the terminal is shown in parts, each repeating the row's name
    columns: no header word is broken (``gol`` / ``d``, ``turns chan`` / ``ged``)."""
    columns = ["system", "gold", "corrected", "JGA", "JGA corr.", "Δ JGA", "Δ low", "Δ high",
               "slot acc.", "slot acc. corr.", "Δ slot acc.", "turns changed"]
    fields = [Field(c, "left" if c in ("system", "gold", "corrected") else "right")
              for c in columns]
    table = FitTable(fields, title="Corrected gold: the change for each system")
    for name in ("original", "da", "da-p"):
        table.add_row(name, "2.1", "2.1+corr:763b9ab0", "30.77", "30.88", "0.11", "-0.01",
                      "0.23", "94.32", "94.33", "0.02", "31")
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    output = console.export_text()
    _fits(output, width)
    for value in ("2.1+corr:763b9ab0", "30.77", "-0.01", "94.33", "31", "original", "da-p"):
        _whole(value, output)
    # every header word whole: on a line, as a word
    for column in columns:
        for word in column.split():
            assert word in output.split(), (word, output)


@pytest.mark.parametrize("width", WIDTHS)
def test_report_corrections_keeps_its_words(width, tmp_path, monkeypatch, capsys):
    """``report --corrections``' change table at 80 and 60 columns: every header word whole."""
    corrections = tmp_path / "c.jsonl"
    corrections.write_text(json.dumps({
        "dialogue_id": "EX004.json", "turn_index": 2, "slot": "train-leaveat",
        "value": "09:52", "gold": "2.1", "reviewer": "ann", "time": "2026-11-28T10:02:11Z"})
        + "\n")
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["report", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions",
                 str(EXAMPLES / "predictions.jsonl"), str(EXAMPLES / "predictions-weak.jsonl"),
                 "--gold", "2.1", "--corrections", str(corrections)]) == 0
    output = capsys.readouterr().out
    _fits(output, width)
    for word in ("gold", "corrected", "turns", "changed", "corr.", "acc."):
        assert word in output.split(), (word, output)
