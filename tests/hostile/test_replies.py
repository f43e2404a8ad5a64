"""Hostile replies from a fake OpenAI-compatible server on 127.0.0.1 (tests/fault_server.py's
catalogue), through the real CLI and the real transports.

For every entry: no traceback; the exit status says whether turns were judged; a malformed
reply is an error row naming its problem, never a verdict; every reply the server billed is
recorded for its call and no request body is billed twice; the canary key reaches no file
and no output, even when the server echoes it into ids, content, refusals and error bodies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import judge
from judge.pipeline import plan_evaluation

from ..fault_server import HOSTILE_REPLIES, FaultServer, body_hash
from .conftest import Data, Outcome, check_clean

JUDGED = {
    "usage-null", "content-text-parts", "content-markup", "content-bidi", "content-nul",
    "markup-metadata", "echo-metadata", "echo-content", "echo-everything", "gzip-valid",
    "deflate-valid", "deflate-raw", "http-429-nan", "http-429-inf", "http-429-negative",
    "http-429-words", "http-429-huge", "ratelimit-reset-nan",
}
"""Entries a robust client judges normally: odd but well-typed, compressed, or retried."""

ANY = {"content-values-odd"}
"""Well-formed replies with odd slot values: judged or refused, as long as nothing breaks."""

REASONS = {
    "usage-prompt-string": "usage.prompt_tokens", "usage-prompt-words": "usage.prompt_tokens",
    "usage-completion-string": "usage.completion_tokens", "usage-negative": "usage",
    "usage-float": "usage.completion_tokens", "usage-bool": "usage.prompt_tokens",
    "usage-huge": "usage.prompt_tokens", "usage-list": "usage", "usage-string": "usage",
    "usage-details-string": "prompt_tokens_details", "usage-cached-string": "cached_tokens",
    "choices-string": "choices", "choices-object": "choices", "choices-empty": "choices",
    "choices-null": "choices", "choices-missing": "choices", "choices-numbers": "choices[0]",
    "choices-strings": "choices[0]", "choice-message-missing": "message",
    "choice-message-string": "message", "choice-message-null": "message",
    "choice-message-list": "message", "content-number": "content", "content-bool": "content",
    "content-object": "content", "content-list-numbers": "content",
    "content-list-strings": "content", "content-list-image": "content",
    "content-list-text-number": "content", "content-deep-json": "content",
    "content-deep-string": "nested deeper", "content-deep-string-100k": "characters",
    "content-long": "characters",
    "refusal-number": "refusal", "refusal-object": "refusal", "refusal-markup": "refused",
    "refusal-echo": "refused", "finish-number": "finish_reason",
    "finish-object": "finish_reason", "finish-length": "truncated",
    "content-keys-odd": "invalid output",
    "body-not-json": "not JSON", "body-empty": "not JSON", "body-array": "not a chat",
    "body-string": "not a chat", "body-null": "not a chat", "body-number": "not a chat",
    "body-invalid-utf8": "not JSON", "body-bom": "not JSON", "body-truncated": "not JSON",
    "body-nan": "usage.prompt_tokens", "body-deep": "nested deeper",
    "body-deep-choices": "nested deeper", "body-event-stream": "not JSON",
    "size-2mb": "max_reply_bytes", "size-50mb": "max_reply_bytes",
    "gzip-bomb": "max_reply_bytes", "gzip-corrupt": "corrupt", "gzip-not-gzip": "corrupt",
    "encoding-br": "content-encoding", "encoding-unknown": "content-encoding",
    "slow-drip": "timed out", "http-500-echo": "HTTP 500", "http-500-markup": "HTTP 500",
    "http-500-deep": "HTTP 500", "http-500-huge": "HTTP 500",
}
"""Entries that make every call an error row, with a word of the reason each row gives."""

FATAL = {"http-401-echo"}
"""Entries that stop the run (a refused key): a clean message, a non-zero exit status."""

TRANSPORT_SENSITIVE = ("size-2mb", "size-50mb", "gzip-bomb", "gzip-corrupt", "gzip-not-gzip",
                       "gzip-valid", "deflate-valid", "deflate-raw", "encoding-br",
                       "encoding-unknown", "slow-drip", "body-deep", "http-500-huge",
                       "echo-everything", "http-401-echo")
"""Entries that also run over the httpx transport (the rest: aiohttp, the default)."""

OPTIONS = {"slow-drip": ["--timeout", "1.5"],
           "size-2mb": ["--timeout", "30"], "size-50mb": ["--timeout", "30"]}
"""Per-entry options after the common ones. ``slow-drip`` keeps the retry of the others: its
status line arrived, so the reply it cuts off was paid for and must not be sent again. The
size entries are read up to the cap within milliseconds: their timeout only has to outlast a
busy machine (with 5 s, the client gave up before the 50 MB answer was ready and asked again,
correctly, and the server billed both answers: "paid for 2 times")."""


def test_the_catalogue_is_covered_exactly():
    assert set(HOSTILE_REPLIES) == JUDGED | ANY | set(REASONS) | FATAL
    assert not (JUDGED & set(REASONS)) and not (FATAL & (JUDGED | set(REASONS)))


CASES = [pytest.param(kind, "aiohttp", id=f"{kind}-aiohttp") for kind in HOSTILE_REPLIES] + [
    pytest.param(kind, "httpx", id=f"{kind}-httpx") for kind in TRANSPORT_SENSITIVE]


def _planned(base_url: str, data: Data, tmp_path: Path) -> dict[str, str]:
    """body hash → custom id of every call the run plans."""
    config = judge.load_config({"model": "fault-model", "base_url": base_url,
                                "cache_dir": str(tmp_path / "cache")})
    schema = judge.load_schema(data.schema)
    dialogues = judge.load_dialogues(data.dialogues)
    predictions = judge.load_predictions(data.predictions, dialogues, schema)
    plan = plan_evaluation(config, schema, dialogues, predictions)
    return {body_hash(call.body): call.custom_id for call in plan.calls}


def _calls(out: Path) -> dict[str, dict[str, Any]]:
    text = (out / "judgments.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.split("\n") if line]  # U+2028 stays inside
    return {c["custom_id"]: c for row in rows for c in row["calls"] if not c["skipped"]}


def _check_paid_replies_recorded(server: FaultServer, planned: dict[str, str],
                                 calls: dict[str, dict[str, Any]]) -> int:
    """Every body the server billed belongs to a call whose result is recorded, and no body
    was billed twice; returns the number of billed replies. An answer whose client had given
    up before it was sent is not billed (the server counts it as ``abandoned``): the client
    saw no reply, so asking again was right."""
    paid = 0
    for key, entry in server.snapshot()["bodies"].items():
        if not entry["completed"]:
            continue
        paid += entry["completed"]
        assert entry["completed"] == 1, f"a request body was paid for {entry['completed']} times"
        custom_id = planned[entry["root"] or key]
        call = calls[custom_id]
        assert call["error"] or call["attempts"], f"the paid reply of {custom_id} was lost"
    return paid


@pytest.mark.parametrize(("kind", "backend"), CASES)
def test_hostile_reply(kind, backend, hostile_server, data, tmp_path, run_cli):
    base_url = f"{hostile_server.url.removesuffix('/v1')}/hostile/{kind}/v1"
    out = tmp_path / "run"
    hostile_server.stats.reset()
    outcome: Outcome = run_cli(
        "evaluate", *data.args(), "--model", "fault-model", "--base-url", base_url,
        "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--http-backend", backend,
        "--timeout", "5", "--max-retries", "1", "--no-progress", *OPTIONS.get(kind, []))
    check_clean(outcome, tmp_path)
    if kind in FATAL:
        assert outcome.code != 0 and "dst-judge: error:" in outcome.err
        assert "<redacted>" in outcome.err
        return
    calls = _calls(out)
    paid = _check_paid_replies_recorded(hostile_server, _planned(base_url, data, tmp_path),
                                        calls)
    errors = [c["error"] for c in calls.values() if c["error"]]
    if kind in JUDGED:
        assert outcome.code == 0, outcome.err
        assert errors == []
        assert all(c["results"] is not None for c in calls.values())
    elif kind in REASONS:
        assert outcome.code != 0, "every call failed, yet the run reported success"
        assert len(errors) == len(calls) == 2
        assert all(REASONS[kind] in e for e in errors), errors
        assert all(c["results"] is None for c in calls.values())
    else:
        assert outcome.code in (0, 1, 4)
    if kind.startswith("http-"):
        return
    assert paid >= len(calls)  # every call got at least one billed reply


def test_deep_content_cached_earlier_never_crashes_a_rerun(hostile_server, data, tmp_path,
                                                           run_cli):
    """A reply nested 100,000 deep inside its content is a well-formed chat completion: the
    cache may hold it. Every later run on that cache refuses it again, without a crash."""
    base_url = f"{hostile_server.url.removesuffix('/v1')}/hostile/content-deep-string/v1"
    common = ["evaluate", *data.args(), "--model", "fault-model", "--base-url", base_url,
              "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--reasks", "0"]
    first = run_cli(*common, "--out", str(tmp_path / "one"))
    hostile_server.stats.reset()
    again = run_cli(*common, "--out", str(tmp_path / "two"))
    for outcome in (first, again):
        check_clean(outcome, tmp_path)
        assert outcome.code == 4
    errors = [c["error"] for c in _calls(tmp_path / "two").values()]
    assert all("nested deeper" in e for e in errors)


def test_a_password_in_the_base_url_is_written_nowhere(hostile_server, data, tmp_path,
                                                       run_cli, canary):
    """``http://user:KEY@host`` puts a secret into the URL itself: manifests, summaries and
    the cache record the endpoint with the password masked."""
    url = hostile_server.url.removesuffix("/v1").replace("http://", f"http://me:{canary}@")
    outcome = run_cli("evaluate", *data.args(), "--model", "fault-model", "--base-url",
                      f"{url}/hostile/usage-null/v1", "--cache-dir", str(tmp_path / "cache"),
                      "--out", str(tmp_path / "run"), "--no-progress")
    check_clean(outcome, tmp_path)
    assert outcome.code == 0, outcome.err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "me:<redacted>@" in manifest["options"]["base_url"]


def test_markup_in_the_system_name_prints_as_text_after_a_run(hostile_server, tmp_path,
                                                              run_cli):
    """evaluate's summary table carries the system name and the error rows' texts."""
    from .conftest import DIALOGUE, PREDICTION, SCHEMA, jsonl

    name = "[/x] [bold]sys\x1b[31m"
    data = Data(SCHEMA, jsonl(tmp_path / "d.jsonl", [DIALOGUE]),
                jsonl(tmp_path / "p.jsonl", [{**PREDICTION, "system_name": name}]))
    base = f"{hostile_server.url.removesuffix('/v1')}/hostile/refusal-markup/v1"
    outcome = run_cli("evaluate", *data.args(), "--model", "fault-model", "--base-url", base,
                      "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run"),
                      "--no-progress")
    check_clean(outcome, tmp_path)
    assert outcome.code == 4
    flat = " ".join(outcome.out.split())  # the terminal width wraps the title
    assert "[/x] [bold]sys[31m" in flat and "refused: [/x] I [bold refuse" in flat
