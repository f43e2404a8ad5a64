"""Bad input files, options and output paths through the real CLI: each one exits non-zero with
one message naming the file (and line and field where there are some), never a traceback,
never "valid", never an exit status of 0 for something that was refused.

Each case builds its files in its own directory and returns the command line and what the
message must name. Cases that must *succeed* safely (markup and control characters in data)
are at the end.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.netguard.sitecustomize import subprocess_pythonpath

from .conftest import (
    DIALOGUE,
    PREDICTION,
    SCHEMA,
    Data,
    check_bad_input,
    check_clean,
    jsonl,
)

GOOD_SCHEMA = json.loads(SCHEMA.read_text(encoding="utf-8"))
DEEP = "[" * 200_000 + "]" * 200_000


@dataclass
class Expect:
    """What a refused command's message must name, and the exit statuses allowed."""

    names: Path | str | None = None
    line: int | None = None
    field: str | None = None
    codes: tuple[int, ...] = (2,)


@dataclass
class Case:
    argv: list[str]
    expect: Expect = field(default_factory=Expect)


Builder = Callable[[Path, Data], Case]
CASES: dict[str, Builder] = {}


def case(name: str) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        assert name not in CASES, name
        CASES[name] = build
        return build
    return register


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def metrics(data: Data, **replace: Path) -> list[str]:
    files = {"schema": data.schema, "dialogues": data.dialogues,
             "predictions": data.predictions, **replace}
    return ["metrics", "--schema", str(files["schema"]), "--dialogues",
            str(files["dialogues"]), "--predictions", str(files["predictions"])]


def dry_run(data: Data, *extra: str) -> list[str]:
    return ["evaluate", *data.args(), "--dry-run", "--model", "gpt-4o", *extra]


# --- schema files -------------------------------------------------------------------------------

def _schema_case(name: str, content: str | bytes | Any, *, line: int | None = None,
                 field_: str | None = None) -> None:
    @case(f"schema-{name}")
    def build(tmp: Path, data: Data) -> Case:
        text = content if isinstance(content, (str, bytes)) else json.dumps(content)
        path = write(tmp / "schema.json", text)
        return Case(metrics(data, schema=path), Expect(path, line, field_))


def _schema_with(**changes: Any) -> dict[str, Any]:
    return {**GOOD_SCHEMA, **changes}


def _slots(first_slot: dict[str, Any]) -> dict[str, Any]:
    domain = {**GOOD_SCHEMA["domains"][0], "slots": [first_slot,
                                                     *GOOD_SCHEMA["domains"][0]["slots"][1:]]}
    return _schema_with(domains=[domain, *GOOD_SCHEMA["domains"][1:]])


_schema_case("empty", "")
_schema_case("not-json", "{oops", line=1)
_schema_case("json-array", "[]")
_schema_case("json-string", '"schema"')
_schema_case("nested-200000-deep", DEEP, line=1)
_schema_case("object-nested-deep", '{"domains": ' + DEEP + "}")
_schema_case("no-domains", {"name": "x"}, field_="domains")
_schema_case("domains-empty", _schema_with(domains=[]), field_="domains")
_schema_case("domains-object", _schema_with(domains={"hotel": []}), field_="domains")
_schema_case("no-slots", _schema_with(domains=[{"domain": "hotel", "slots": []}]))
_schema_case("empty-separator", _schema_with(multi_value_separator=""),
             field_="multi_value_separator")
_schema_case("blank-separator", _schema_with(multi_value_separator="  "),
             field_="multi_value_separator")
_schema_case("separator-number", _schema_with(multi_value_separator=1e999),
             field_="multi_value_separator")
_schema_case("duplicate-slot", _schema_with(domains=[GOOD_SCHEMA["domains"][0]] * 2))
_schema_case("slot-name-empty", _slots({"name": ""}), field_="domains[0].slots[0].name")
_schema_case("slot-name-number", _slots({"name": 5}), field_="domains[0].slots[0].name")
_schema_case("slot-values-string", _slots({"name": "hotel-x", "possible_values": "cheap"}),
             field_="possible_values")
_schema_case("slot-wrong-domain", _slots({"name": "hotel-x", "domain": "train"}))
_schema_case("nan-literal", '{"domains": NaN}', field_="domains")
_schema_case("not-utf8", b"\xff\xfe\x00{}")
_schema_case("utf8-bom", "\ufeff" + json.dumps(GOOD_SCHEMA), line=1)
_schema_case("broken-gzip", b"\x1f\x8b\x08\x00 this is not gzip")
_schema_case("gzip-of-garbage", gzip.compress(b"\x00\x01 not json"))


@case("schema-missing")
def _(tmp: Path, data: Data) -> Case:
    return Case(metrics(data, schema=tmp / "nope.json"), Expect(tmp / "nope.json"))


@case("schema-is-a-directory")
def _(tmp: Path, data: Data) -> Case:
    tmp.mkdir(parents=True, exist_ok=True)
    return Case(metrics(data, schema=tmp), Expect(tmp))


# --- dialogues and predictions ------------------------------------------------------------------

def _lines_case(kind: str, name: str, lines: list[str | Any] | bytes, *,
                line: int | None = None, field_: str | None = None) -> None:
    @case(f"{kind}-{name}")
    def build(tmp: Path, data: Data) -> Case:
        if isinstance(lines, bytes):
            path = write(tmp / f"{kind}.jsonl", lines)
        else:
            text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
            path = write(tmp / f"{kind}.jsonl", text)
        return Case(metrics(data, **{kind: path}), Expect(path, line, field_))


TURN = DIALOGUE["turns"][0]
_lines_case("dialogues", "empty", [])
_lines_case("dialogues", "not-json", [DIALOGUE, "{oops"], line=2)
_lines_case("dialogues", "line-nested-deep", [DIALOGUE, DEEP], line=2)
_lines_case("dialogues", "line-array", [[1, 2]])
_lines_case("dialogues", "no-id", [{"turns": [TURN]}], line=1, field_="dialogue_id")
_lines_case("dialogues", "id-number", [{**DIALOGUE, "dialogue_id": 7}], line=1,
            field_="dialogue_id")
_lines_case("dialogues", "turns-object", [{**DIALOGUE, "turns": {"0": TURN}}], line=1,
            field_="turns")
_lines_case("dialogues", "turn-index-word",
            [{**DIALOGUE, "turns": [{**TURN, "turn_index": "zero"}]}], line=1,
            field_="turn_index")
_lines_case("dialogues", "gold-value-object",
            [{**DIALOGUE, "turns": [{**TURN, "gold_state_21": {"hotel-area": {"x": 1}}}]}],
            line=1, field_="hotel-area")
_lines_case("dialogues", "duplicate-id", [DIALOGUE, DIALOGUE], line=2)
_lines_case("dialogues", "not-utf8", b'{"dialogue_id": "\xff\xfe"}\n')
_lines_case("dialogues", "broken-gzip", b"\x1f\x8b\x08\x00 not really gzip")
_lines_case("dialogues", "truncated-gzip", gzip.compress(
    (json.dumps(DIALOGUE) + "\n").encode() * 50)[:-30])
_lines_case("dialogues", "nul-bytes", ["\x00\x00" + json.dumps(DIALOGUE)], line=1)
_lines_case("dialogues", "no-gold-states",
            [{**DIALOGUE, "turns": [{"turn_index": 0, "system": "", "user": "hi"}]}])
_lines_case("predictions", "empty", [])
_lines_case("predictions", "not-json", ["{oops"], line=1)
_lines_case("predictions", "line-nested-deep", [DEEP], line=1)
_lines_case("predictions", "unknown-dialogue", [{**PREDICTION, "dialogue_id": "ZZZ"}])
_lines_case("predictions", "pred-state-list",
            [{**PREDICTION, "turns": [{"turn_index": 0, "pred_state": ["hotel-area"]}]}],
            line=1, field_="pred_state")
_lines_case("predictions", "slot-value-object",
            [{**PREDICTION, "turns": [{"turn_index": 0,
                                       "pred_state": {"hotel-area": {"x": 1}}}]}],
            line=1, field_="pred_state")
_lines_case("predictions", "escape-codes-in-a-bad-key",
            [{**PREDICTION, "turns": [{"turn_index": 0,
                                       "pred_state": {"\x1b[2J\x07hotel": {"x": 1}}}]}],
            line=1, field_="[2Jhotel")
_lines_case("predictions", "turn-index-negative",
            [{**PREDICTION, "turns": [{"turn_index": -1, "pred_state": {}}]}], line=1,
            field_="turn_index")
_lines_case("predictions", "too-many-turns",
            [{**PREDICTION, "turns": [{"turn_index": 0, "pred_state": {}},
                                      {"turn_index": 1, "pred_state": {}}]}])


@case("dialogues-missing")
def _(tmp: Path, data: Data) -> Case:
    return Case(metrics(data, dialogues=tmp / "nope.jsonl"), Expect(tmp / "nope.jsonl"))


@case("predictions-missing")
def _(tmp: Path, data: Data) -> Case:
    return Case(metrics(data, predictions=tmp / "nope.jsonl"), Expect(tmp / "nope.jsonl"))


# --- metric and validate options ---------------------------------------------------------------

def _option_case(name: str, *extra: str, command: str = "metrics", names: str | None = None
                 ) -> None:
    @case(f"option-{name}")
    def build(tmp: Path, data: Data) -> Case:
        argv = metrics(data) if command == "metrics" else dry_run(data)
        return Case([*argv, *extra], Expect(names))


_option_case("limit-zero", "--limit", "0", names="--limit")
_option_case("limit-negative", "--limit", "-3", names="--limit")
_option_case("fga-lambda-nan", "--fga-lambdas", "nan", names="--fga-lambdas")
_option_case("fga-lambda-inf", "--fga-lambdas", "0.5", "inf", names="--fga-lambdas")
_option_case("fga-lambda-negative", "--fga-lambdas", "-1", names="--fga-lambdas")
_option_case("alpha-nan", "--alpha", "nan", names="--alpha")
_option_case("alpha-above-one", "--alpha", "2", names="--alpha")
_option_case("num-slots-zero", "--num-slots", "0", names="--num-slots")
_option_case("match-unknown", "--match", "fuzzy")
_option_case("gold-unknown", "--gold", "9.9")
_option_case("limit-word", "--limit", "many")
_option_case("temperature-nan", "--temperature", "nan", command="evaluate", names="temperature")
_option_case("top-p-zero", "--top-p", "0", command="evaluate", names="top_p")
_option_case("max-tokens-zero", "--max-tokens", "0", command="evaluate", names="max_tokens")
_option_case("concurrency-zero", "--concurrency", "0", command="evaluate", names="concurrency")
_option_case("timeout-nan", "--timeout", "nan", command="evaluate", names="timeout")
_option_case("timeout-inf", "--timeout", "inf", command="evaluate", names="timeout")
_option_case("timeout-zero", "--timeout", "0", command="evaluate", names="timeout")
_option_case("budget-nan", "--budget", "nan", command="evaluate", names="budget")
_option_case("budget-negative", "--budget", "-1", command="evaluate", names="budget")
_option_case("rpm-zero", "--rpm", "0", command="evaluate", names="rpm")
_option_case("retries-negative", "--max-retries", "-1", command="evaluate", names="max_retries")
_option_case("reply-cap-tiny", "--max-reply-bytes", "10", command="evaluate",
             names="max_reply_bytes")
_option_case("reply-depth-huge", "--max-reply-depth", "1000000", command="evaluate",
             names="max_reply_depth")
_option_case("method-unknown", "--method", "vibes", command="evaluate")


@case("validate-limit-zero")
def _(tmp: Path, data: Data) -> Case:
    bad = write(tmp / "bad.jsonl", '{"x": 1}\n')
    return Case(["validate", "dialogues", str(bad), "--limit", "0"], Expect("at least 1"))


@case("validate-limit-negative")
def _(tmp: Path, data: Data) -> Case:
    bad = write(tmp / "bad.jsonl", '{"x": 1}\n')
    return Case(["validate", "dialogues", str(bad), "--limit", "-5"], Expect("at least 1"))


@case("validate-deep-lines")
def _(tmp: Path, data: Data) -> Case:
    bad = write(tmp / "bad.jsonl", DEEP + "\n")
    return Case(["validate", "predictions", str(bad)], Expect(bad, 1))


@case("validate-deep-schema")
def _(tmp: Path, data: Data) -> Case:
    bad = write(tmp / "schema.json", DEEP)
    return Case(["validate", "schema", str(bad)], Expect(bad, 1))


@case("validate-missing-file")
def _(tmp: Path, data: Data) -> Case:
    return Case(["validate", "labels", str(tmp / "nope.jsonl")], Expect(tmp / "nope.jsonl"))


# --- configuration, prices, rules, id lists, cassettes ---------------------------------------

def _file_option_case(name: str, option: str, filename: str, content: str | bytes, *,
                      line: int | None = None, field_: str | None = None) -> None:
    @case(f"{option.strip('-')}-{name}")
    def build(tmp: Path, data: Data) -> Case:
        path = write(tmp / filename, content)
        return Case(dry_run(data, option, str(path)), Expect(path, line, field_))


_file_option_case("not-json", "--config", "config.json", "{oops")
_file_option_case("bad-toml", "--config", "config.toml", "model = = 'x'")
_file_option_case("list", "--config", "config.json", "[1, 2]")
_file_option_case("deep", "--config", "config.json", DEEP)
_file_option_case("not-utf8", "--config", "config.json", b"\xff\xfe")
_file_option_case("not-json", "--prices", "prices.json", "{oops")
_file_option_case("deep", "--prices", "prices.json", DEEP)
_file_option_case("wrong-shape", "--prices", "prices.json", '{"models": 5}')
_file_option_case("not-json", "--rules", "rules.json", "{oops")
_file_option_case("deep", "--rules", "rules.json", DEEP)
_file_option_case("wrong-shape", "--rules", "rules.json", '{"rules": "all"}')
_file_option_case("not-utf8", "--dialogue-ids", "ids.txt", b"\xff\xfe\xfd\n")
_file_option_case("unknown-id", "--dialogue-ids", "ids.txt", "NOPE\n")


def _base_url_case(name: str, url: str) -> None:
    @case(f"base-url-{name}")
    def build(tmp: Path, data: Data) -> Case:
        return Case(dry_run(data, "--base-url", url), Expect("base_url"))


_base_url_case("not-a-url", "not a url")
_base_url_case("broken-ipv6", "http://[::1/v1")
_base_url_case("ftp", "ftp://127.0.0.1/v1")
_base_url_case("port-out-of-range", "http://127.0.0.1:99999/v1")
_base_url_case("port-word", "http://127.0.0.1:http/v1")
_base_url_case("no-host", "http:///v1")


@case("config-unknown-option")
def _(tmp: Path, data: Data) -> Case:
    path = write(tmp / "config.json", '{"model": "m", "temperatur": 0.5}')
    return Case(dry_run(data, "--config", str(path)), Expect("temperatur"))


@case("config-missing")
def _(tmp: Path, data: Data) -> Case:
    return Case(dry_run(data, "--config", str(tmp / "nope.json")), Expect(tmp / "nope.json"))


@case("dialogue-ids-missing")
def _(tmp: Path, data: Data) -> Case:
    return Case(dry_run(data, "--dialogue-ids", str(tmp / "nope.txt")),
                Expect(tmp / "nope.txt"))


def _replay_case(name: str, content: str) -> None:
    @case(f"replay-{name}")
    def build(tmp: Path, data: Data) -> Case:
        path = write(tmp / "cassette.json", content)
        return Case(["evaluate", *data.args(), "--replay", str(path), "--out",
                     str(tmp / "run")], Expect(path))


_replay_case("not-json", "{oops")
_replay_case("deep", DEEP)
_replay_case("list", "[]")
_replay_case("interactions-object", '{"interactions": {}}')


_replay_case("interaction-not-object", '{"interactions": [1, 2]}')
_replay_case("interaction-no-request", '{"interactions": [{"response": {}}]}')
_replay_case("status-code-string", json.dumps({"interactions": [{
    "request": {"method": "POST", "path": "/chat/completions", "body": {}},
    "response": {"status_code": "200", "body": {}}}]}))


@case("replay-missing")
def _(tmp: Path, data: Data) -> Case:
    return Case(["evaluate", *data.args(), "--replay", str(tmp / "nope.json"), "--out",
                 str(tmp / "run")], Expect(tmp / "nope.json"))


# --- output paths -------------------------------------------------------------------------------

def _output_case(name: str, make: Callable[[Path, Data], tuple[list[str], Path]]) -> None:
    @case(f"output-{name}")
    def build(tmp: Path, data: Data) -> Case:
        argv, target = make(tmp, data)
        return Case(argv, Expect(target))


def _a_file(tmp: Path) -> Path:
    return write(tmp / "a-file", "x")


def _a_dir(tmp: Path) -> Path:
    (tmp / "a-dir").mkdir(parents=True, exist_ok=True)
    return tmp / "a-dir"


_output_case("metrics-json-into-directory",
             lambda t, d: ([*metrics(d), "--json", str(_a_dir(t))], t / "a-dir"))
_output_case("metrics-json-under-a-file",
             lambda t, d: ([*metrics(d), "--json", str(_a_file(t) / "m.json")],
                           t / "a-file" / "m.json"))
_output_case("metrics-json-disk-full",
             lambda t, d: ([*metrics(d), "--json", "/dev/full"], "/dev/full"))
_output_case("metrics-json-in-proc",
             lambda t, d: ([*metrics(d), "--json", "/proc/dst-judge/m.json"],
                           "/proc/dst-judge/m.json"))
_output_case("evaluate-out-is-a-file",
             lambda t, d: ([*dry_run(d)[:-3], "--base-url", "http://127.0.0.1:9/v1", "--out",
                            str(_a_file(t))], t / "a-file"))
_output_case("evaluate-out-under-a-file",
             lambda t, d: ([*dry_run(d)[:-3], "--base-url", "http://127.0.0.1:9/v1", "--out",
                            str(_a_file(t) / "run")], t / "a-file" / "run"))
_output_case("evaluate-out-in-proc",
             lambda t, d: ([*dry_run(d)[:-3], "--base-url", "http://127.0.0.1:9/v1", "--out",
                            "/proc/dst-judge-run"], "/proc/dst-judge-run"))
_output_case("batch-prepare-into-directory",
             lambda t, d: (["batch", "prepare", *d.args(), "--out", str(_a_dir(t))],
                           t / "a-dir"))
_output_case("batch-prepare-disk-full",
             lambda t, d: (["batch", "prepare", *d.args(), "--out", "/dev/full"], "/dev/full"))


# --- run directories and what reads them ------------------------------------------------------

ROW = {"dialogue_id": "H1", "turn_index": 0, "system": "", "user": "hi",
       "pred_turn_state": {"hotel-area": "north"}, "verdict": True, "jga": True, "error": None,
       "incorrect": [], "missed": [], "rule": {"2.1": True, "2.4": False},
       "gold_turn_state": {"2.1": {"hotel-area": "north"}, "2.4": {}}, "calls": [],
       "trace": [], "state": {}}


def _run_dir(tmp: Path, rows: list[Any] | str, summary: Any = None) -> Path:
    folder = tmp / "run"
    text = rows if isinstance(rows, str) else "".join(
        (r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    write(folder / "judgments.jsonl", text)
    write(folder / "summary.json", json.dumps(summary if summary is not None else {
        "method": "two-dim", "data": {"versions": ["2.1", "2.4"]}}))
    return folder


def _rows_case(name: str, rows: list[Any] | str, *, line: int | None = 1,
               field_: str | None = None, commands: tuple[str, ...] = ("agreement", "audit",
                                                                        "compare")) -> None:
    for command in commands:
        @case(f"run-rows-{name}-{command}")
        def build(tmp: Path, data: Data, command: str = command) -> Case:
            folder = _run_dir(tmp, rows)
            argv = {"agreement": ["agreement", str(folder), "--n-boot", "10"],
                    "audit": ["audit", str(folder), "--out", str(tmp / "audit.html")],
                    "compare": ["compare", str(folder)]}[command]
            return Case(argv, Expect(folder / "judgments.jsonl", line, field_))


_rows_case("not-json", "{oops\n")
_rows_case("deep", DEEP + "\n")
_rows_case("array", [[1]], field_="dialogue_id")
_rows_case("verdict-string", [{**ROW, "verdict": "yes"}], field_="verdict")
_rows_case("turn-index-string", [{**ROW, "turn_index": "0"}], field_="turn_index")
_rows_case("dialogue-id-number", [{**ROW, "dialogue_id": 7}], field_="dialogue_id")
_rows_case("rule-list", [{**ROW, "rule": [True]}], field_="rule")
_rows_case("rule-value-string", [{**ROW, "rule": {"2.1": "yes"}}], field_="rule")
_rows_case("calls-object", [{**ROW, "calls": {}}], field_="calls")
_rows_case("pred-state-list", [{**ROW, "pred_turn_state": ["x"]}], field_="pred_turn_state")
_rows_case("gold-state-string", [{**ROW, "gold_turn_state": {"2.1": "north"}}],
           field_="gold_turn_state")
_rows_case("no-verdict", [{k: v for k, v in ROW.items() if k != "verdict"}],
           field_="verdict")
_rows_case("empty", "", line=None, commands=("agreement",))


def _summary_case(name: str, summary: Any, field_: str) -> None:
    for command in ("audit", "compare", "systems"):
        @case(f"run-summary-{name}-{command}")
        def build(tmp: Path, data: Data, command: str = command) -> Case:
            folder = _run_dir(tmp, [ROW], summary=summary)
            argv = {"audit": ["audit", str(folder), "--out", str(tmp / "a.html")],
                    "compare": ["compare", str(folder)],
                    "systems": ["systems", str(folder), "--schema", str(SCHEMA)]}[command]
            return Case(argv, Expect(folder / "summary.json", field=field_))


_summary_case("data-string", {"data": "x"}, "data")
_summary_case("options-number", {"options": 5}, "options")
_summary_case("rule-list", {"rule": [1]}, "rule")
_summary_case("rule-figures-string", {"rule": {"2.1": "high"}}, "rule.2.1")
_summary_case("versions-number", {"data": {"versions": 5}}, "data.versions")
_summary_case("tsa-string", {"tsa": "high"}, "tsa")


@case("run-not-a-directory")
def _(tmp: Path, data: Data) -> Case:
    return Case(["agreement", str(tmp / "nope")], Expect(tmp / "nope"))


@case("run-summary-missing")
def _(tmp: Path, data: Data) -> Case:
    folder = _run_dir(tmp, [ROW])
    (folder / "summary.json").unlink()
    return Case(["agreement", str(folder)], Expect(folder / "summary.json"))


@case("run-summary-list")
def _(tmp: Path, data: Data) -> Case:
    folder = _run_dir(tmp, [ROW], summary=[1])
    return Case(["compare", str(folder)], Expect(folder / "summary.json"))


@case("run-summary-deep")
def _(tmp: Path, data: Data) -> Case:
    folder = _run_dir(tmp, [ROW])
    write(folder / "summary.json", DEEP)
    return Case(["audit", str(folder), "--out", str(tmp / "a.html")],
                Expect(folder / "summary.json", 1))


@case("run-duplicate-turn")
def _(tmp: Path, data: Data) -> Case:
    folder = _run_dir(tmp, [ROW, ROW])
    return Case(["agreement", str(folder), "--n-boot", "10"], Expect("twice"))


def _agreement_option(name: str, *extra: str, names: str) -> None:
    @case(f"agreement-{name}")
    def build(tmp: Path, data: Data) -> Case:
        return Case(["agreement", str(_run_dir(tmp, [ROW])), *extra], Expect(names))


_agreement_option("n-boot-negative", "--n-boot", "-1", names="n_boot")
_agreement_option("confidence-above-one", "--confidence", "1.5", names="confidence")
_agreement_option("confidence-nan", "--confidence", "nan", names="confidence")
_agreement_option("confidence-zero", "--confidence", "0", names="confidence")


@case("agreement-human-labels-broken")
def _(tmp: Path, data: Data) -> Case:
    labels = write(tmp / "labels.jsonl", '{"dialogue_id": "H1", "turn_index": 0}\n{oops\n')
    return Case(["agreement", str(_run_dir(tmp, [ROW])), "--human", str(labels)],
                Expect(labels))


@case("agreement-json-into-directory")
def _(tmp: Path, data: Data) -> Case:
    return Case(["agreement", str(_run_dir(tmp, [ROW])), "--n-boot", "10", "--json", str(tmp)],
                Expect(tmp))


@case("audit-out-is-a-directory")
def _(tmp: Path, data: Data) -> Case:
    return Case(["audit", str(_run_dir(tmp, [ROW])), "--out", str(tmp)], Expect(tmp))


@case("audit-out-disk-full")
def _(tmp: Path, data: Data) -> Case:
    return Case(["audit", str(_run_dir(tmp, [ROW])), "--out", "/dev/full"], Expect("/dev/full"))


@case("systems-names-mismatch")
def _(tmp: Path, data: Data) -> Case:
    return Case(["systems", str(_run_dir(tmp, [ROW])), "--names", "a", "b", "--schema",
                 str(SCHEMA)], Expect("--names"))


@case("systems-png-into-directory")
def _(tmp: Path, data: Data) -> Case:
    folder = _run_dir(tmp, [ROW])
    return Case(["systems", str(folder), "--schema", str(SCHEMA), "--dialogues",
                 str(data.dialogues), "--png", str(tmp)], Expect(tmp))


@case("systems-no-recorded-schema")
def _(tmp: Path, data: Data) -> Case:
    return Case(["systems", str(_run_dir(tmp, [ROW]))], Expect("--schema"))


def _manifest_case(name: str, content: str) -> None:
    @case(f"manifest-{name}-resume")
    def resume(tmp: Path, data: Data) -> Case:
        folder = tmp / "run"
        write(folder / "manifest.json", content)
        return Case(["evaluate", *data.args(), "--base-url", "http://127.0.0.1:9/v1",
                     "--out", str(folder), "--resume", "--no-progress"],
                    Expect(folder / "manifest.json", codes=(2, 6)))

    @case(f"manifest-{name}-retry-errors")
    def retry(tmp: Path, data: Data) -> Case:
        folder = tmp / "run"
        write(folder / "manifest.json", content)
        return Case(["retry-errors", str(folder), "--no-progress"],
                    Expect(folder / "manifest.json", codes=(2, 6)))


_manifest_case("not-json", "{oops")
_manifest_case("deep", DEEP)
_manifest_case("list", "[]")
_manifest_case("sources-missing", json.dumps({"format": 1, "inputs": {}, "config": {},
                                              "templates": {}, "options": {}}))


@case("retry-errors-not-a-run")
def _(tmp: Path, data: Data) -> Case:
    tmp.mkdir(parents=True, exist_ok=True)
    return Case(["retry-errors", str(tmp)], Expect(codes=(2, 6)))


def _labels_case(name: str, filename: str, content: str | bytes, *, line: int | None = None,
                 field_: str | None = None) -> None:
    @case(f"labels-import-{name}")
    def build(tmp: Path, data: Data) -> Case:
        path = write(tmp / filename, content)
        return Case(["labels", "import", str(path), "--out", str(tmp / "labels.jsonl")],
                    Expect(path, line, field_))


_labels_case("csv-no-decision-column", "d.csv", "dialogue_id,turn_index\nH1,0\n", line=1,
             field_="decision")
_labels_case("csv-bad-decision", "d.csv", "dialogue_id,turn_index,decision\nH1,0,maybe\n",
             line=2, field_="decision")
_labels_case("csv-turn-word", "d.csv", "dialogue_id,turn_index,decision\nH1,zero,correct\n",
             line=2, field_="turn_index")
_labels_case("csv-huge-field", "d.csv",
             "dialogue_id,turn_index,decision\n\"" + "x" * 200_000 + "\",0,correct\n")
_labels_case("jsonl-deep", "d.jsonl", DEEP + "\n", line=1)
_labels_case("jsonl-array", "d.jsonl", "[1]\n", line=1)
_labels_case("not-utf8", "d.csv", b"\xff\xfe\xfd")


@case("labels-import-out-disk-full")
def _(tmp: Path, data: Data) -> Case:
    path = write(tmp / "d.csv", "dialogue_id,turn_index,decision\nH1,0,correct\n")
    return Case(["labels", "import", str(path), "--out", "/dev/full"], Expect("/dev/full"))


# --- the reply cache -----------------------------------------------------------------------

def _damaged_cache(tmp: Path) -> Path:
    """A cache directory whose ledger database is not a database (an old diskcache ``cache.db``
    that no longer reads is left alone: the ledger is the record of paid replies)."""
    cache = tmp / "cache"
    write(cache / "ledger.sqlite3", b"this is not a database" * 100)
    return cache


@case("cache-damaged-stats")
def _(tmp: Path, data: Data) -> Case:
    cache = _damaged_cache(tmp)
    return Case(["cache", "stats", "--cache-dir", str(cache)], Expect(cache))


@case("cache-damaged-dry-run")
def _(tmp: Path, data: Data) -> Case:
    cache = _damaged_cache(tmp)
    return Case(dry_run(data, "--cache-dir", str(cache)), Expect(cache))


@case("cache-dir-is-a-file")
def _(tmp: Path, data: Data) -> Case:
    return Case(dry_run(data, "--cache-dir", str(_a_file(tmp))), Expect(tmp / "a-file"))


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_refused_cleanly(name, tmp_path, data, run_cli):
    built = CASES[name](tmp_path / "case", data)
    outcome = run_cli(*built.argv)
    expect = built.expect
    check_bad_input(outcome, tmp_path, names=expect.names, line=expect.line,
                    field=expect.field, codes=expect.codes)


def test_the_corpus_is_large():
    assert len(CASES) >= 100


# --- data that must be shown as written, safely ------------------------------------------------

MARKUP = "[/x] [bold] [link=file:///etc/passwd]x[/link] \x1b[31mred\x1b[0m\x07 \u202eevil"


@pytest.mark.parametrize("where", ["system-name", "slot-value", "slot-name", "dialogue-id"])
def test_markup_and_controls_in_data_print_as_text(where, tmp_path, run_cli):
    dialogue = json.loads(json.dumps(DIALOGUE))
    prediction = json.loads(json.dumps(PREDICTION))
    if where == "system-name":
        prediction["system_name"] = MARKUP
    elif where == "slot-value":
        prediction["turns"][0]["pred_state"]["hotel-area"] = MARKUP
    elif where == "slot-name":
        prediction["turns"][0]["pred_state"][f"hotel-{MARKUP}"] = "x"
    else:
        dialogue["dialogue_id"] = prediction["dialogue_id"] = MARKUP
    data = Data(SCHEMA, jsonl(tmp_path / "d.jsonl", [dialogue]),
                jsonl(tmp_path / "p.jsonl", [prediction]))
    outcome = run_cli(*metrics(data), "--json", str(tmp_path / "m.json"))
    check_clean(outcome, tmp_path)
    assert outcome.code == 0, outcome.err
    if where in ("system-name", "slot-name"):
        assert "[/x]" in outcome.out  # shown as written, not read as markup


def test_damaged_cache_is_cleared_and_usable_again(tmp_path, data, run_cli):
    cache = _damaged_cache(tmp_path)
    cleared = run_cli("cache", "clear", "--cache-dir", str(cache))
    check_clean(cleared, tmp_path)
    assert cleared.code == 0
    stats = run_cli("cache", "stats", "--cache-dir", str(cache))
    assert stats.code == 0 and "0 cached replies" in stats.out
    assert run_cli(*dry_run(data, "--cache-dir", str(cache))).code == 0


def test_the_console_script_prints_no_traceback(tmp_path, data, canary):
    """A case through the entry point in a fresh interpreter (one: starting one costs
    seconds)."""
    name = "schema-nested-200000-deep"
    import os
    import subprocess
    import sys

    built = CASES[name](tmp_path / "case", data)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": subprocess_pythonpath(root)}
    done = subprocess.run([sys.executable, "-m", "judge", *built.argv], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and canary not in done.stderr + done.stdout
    assert str(built.expect.names) in done.stderr
