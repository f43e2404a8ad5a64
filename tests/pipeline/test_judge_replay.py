"""End-to-end judge runs replayed from cassettes recorded with a real llama-server
(Qwen2.5-Coder-1.5B-Instruct). Tests assert plumbing and bookkeeping, not the model's taste."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from judge import evaluate, load_config
from judge.errors import CassetteMiss
from judge.pipeline import plan_evaluation

from ..conftest import mount_cassette

CASES = [
    ("example-two-dim.json", {"method": "two-dim"}),
    ("example-two-dim-cot.json", {"method": "two-dim-cot"}),
    ("example-direct.json", {"method": "direct"}),
    ("example-cot.json", {"method": "cot"}),
    ("example-two-dim-few-shot.json", {"method": "two-dim", "prompt_variant": "few-shot"}),
]


def _config(tmp_path, **values):
    return load_config({"model": "local", "cache_dir": str(tmp_path / "cache"), **values})


def _run(config, data):
    schema, dialogues, predictions = data
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        return router, evaluate(config, schema, dialogues, predictions,
                                http_client=httpx.AsyncClient())


@pytest.mark.parametrize(("cassette", "options"), CASES, ids=[c for c, _ in CASES])
def test_replay_each_method(tmp_path, example_data, cassette, options):
    config = _config(tmp_path, **options)
    schema, dialogues, predictions = example_data
    plan = plan_evaluation(config, schema, dialogues, predictions)
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, cassette)
        result = evaluate(config, schema, dialogues, predictions,
                          http_client=httpx.AsyncClient())
        sent = router.calls.call_count
    summary = result.summary
    assert sent == len(plan.calls) == summary["calls"]["sent"]
    assert summary["turns"] == 11 and len(result.rows) == 11
    assert summary["method"] == options["method"]
    assert summary["scored_turns"] + summary["error_turns"] == 11
    for row in result.rows:
        dims = {c["dimension"] for c in row["calls"]}
        assert dims == ({"joint"} if options["method"] in ("direct", "cot")
                        else {"accuracy", "completeness"})
        for call in row["calls"]:
            assert len(call["template_hash"]) == 64 and len(call["prompt_hash"]) == 64
            if not call["skipped"]:
                assert call["attempts"] and call["attempts"][0]["text"] is not None
        if row["error"] is None:
            # a turn is correct exactly when nothing survived the filters and no predicted
            # pair was rejected (the trace records every rejection)
            rejected = [t for t in row["trace"] if t["step"] == "prediction"
                        and t["decision"] == "dropped"]
            assert row["verdict"] == (not row["incorrect"] and not row["missed"] and not rejected)
    # the RULE side is independent of the model: nospace for two-prompt, exact for one-prompt
    assert summary["rule_match"] == ("exact" if options["method"] in ("direct", "cot")
                                     else "nospace")
    assert set(summary["rule"]) == {"2.1", "2.4"}


def test_rerun_is_served_from_cache_with_zero_calls(tmp_path, example_data):
    config = _config(tmp_path)
    schema, dialogues, predictions = example_data
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "example-two-dim.json")
        first = evaluate(config, schema, dialogues, predictions, http_client=httpx.AsyncClient())
        calls_first = router.calls.call_count
        second = evaluate(config, schema, dialogues, predictions, http_client=httpx.AsyncClient())
        assert router.calls.call_count == calls_first  # nothing new went out
    assert second.summary["calls"]["sent"] == 0
    assert second.summary["calls"]["cache_hits"] == first.summary["calls"]["planned"]
    assert second.summary["tsa"] == first.summary["tsa"]
    assert [r["verdict"] for r in second.rows] == [r["verdict"] for r in first.rows]


def test_unmatched_request_fails_instead_of_reaching_the_network(tmp_path, example_data):
    config = _config(tmp_path, temperature=0.5)  # a body the cassette never saw
    schema, dialogues, predictions = example_data
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "example-two-dim.json")
        with pytest.raises(CassetteMiss):
            evaluate(config, schema, dialogues, predictions, http_client=httpx.AsyncClient())


def test_truncated_replies_are_error_rows_never_verdicts(tmp_path, example_data):
    config = _config(tmp_path, response_format="text", max_tokens=24, reasks=0)
    schema, dialogues, predictions = example_data
    first_dialogue = dialogues.subset([dialogues.dialogues[0].dialogue_id])
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "truncated-text.json")
        result = evaluate(config, schema, first_dialogue, predictions,
                          http_client=httpx.AsyncClient())
    truncated = [r for r in result.rows if r["error"] and "truncated" in r["error"]]
    assert truncated, "the recording was made with max_tokens=24 to provoke truncation"
    for row in truncated:
        assert row["verdict"] is None
    assert result.summary["error_turns"] == len([r for r in result.rows if r["error"]])
    assert result.summary["scored_turns"] == 3 - result.summary["error_turns"]


def test_cli_replay_is_the_readme_main_job(tmp_path, capsys):
    from judge.cli import main

    from ..conftest import CASSETTES, EXAMPLES

    code = main(["evaluate", "--schema", str(EXAMPLES / "schema.json"),
                 "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                 "--predictions", str(EXAMPLES / "predictions.jsonl"), "--model", "local",
                 "--replay", str(CASSETTES / "example-two-dim.json"),
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0
    assert "Turn state accuracy" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["turns"] == 11 and summary["error_turns"] == 0
    assert "api_key" not in summary["options"]
    rows = (tmp_path / "run" / "judgments.jsonl").read_text().splitlines()
    assert len(rows) == 11


def test_on_result_hears_each_finished_call_once(tmp_path, example_data):
    """The service journals every call it hears of: a call reported twice would be stored
    twice."""
    config = _config(tmp_path)
    schema, dialogues, predictions = example_data
    heard: list[str] = []
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "example-two-dim.json")
        evaluate(config, schema, dialogues, predictions, http_client=httpx.AsyncClient(),
                 out_dir=tmp_path / "run", on_result=lambda r: heard.append(r.custom_id))
    plan = plan_evaluation(config, schema, dialogues, predictions)
    sent = [c.custom_id for c in plan.calls if not c.skipped]
    assert sorted(heard) == sorted(sent) and len(heard) == len(set(heard))
