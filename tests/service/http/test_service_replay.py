"""Try the service without a key: ``dst-judge serve --replay cassettes/`` answers exactly the
recorded requests, so the example submitted over HTTP gets the TSA the README's first command
prints; a request the cassettes do not hold is an error row naming it, never a verdict."""

from __future__ import annotations

import asyncio
import json

import pytest

import judge
import judge.errors
from judge.cli import main as cli_main
from judge.model import ReplayTransport
from tests.conftest import EXAMPLES, SLOT_NOT_IN_SCHEMA, predictions_with_slot_errors
from tests.service.serve_process import ROOT, ServeProcess, cli, create_token

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]

README_COMMAND = ["evaluate", "--schema", "examples/schema.json", "--dialogues",
                  "examples/dialogues.jsonl", "--predictions", "examples/predictions.jsonl",
                  "--model", "local", "--replay", "cassettes/example-two-dim.json"]


def _readme_first_command() -> list[str]:
    """The README's replayed example command (its first ``dst-judge evaluate ... --replay``),
    without ``--out``; the known command when the README words it otherwise."""
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if "dst-judge evaluate" in line and "--replay cassettes/" in line:
            words = line.split("dst-judge ", 1)[1].split("#")[0].split()
            if "--out" in words:
                del words[words.index("--out"):words.index("--out") + 2]
            assert "--predictions" in words and "examples/predictions.jsonl" in words, words
            return words
    return README_COMMAND


def test_submit_to_a_replay_server_gives_the_readme_tsa(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    command = _readme_first_command()
    assert cli_main([*command, "--out", str(tmp_path / "local"), "--no-progress"]) == 0
    options = [word for flag in ("--model", "--method") if flag in command
               for word in (flag, command[command.index(flag) + 1])]
    local = judge.load_run(tmp_path / "local").summary
    data = tmp_path / "server"
    token = create_token(data, "lab")
    with ServeProcess(data, args=["--replay", "cassettes/"]) as server:
        env = {"DST_JUDGE_TOKEN": token, "DST_JUDGE_SERVER": server.url,
               "OPENAI_API_KEY": ""}
        done = cli("submit", "evaluate", "--schema", str(EXAMPLES / "schema.json"),
                   "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                   "--predictions", str(EXAMPLES / "predictions.jsonl"), *options, "--wait",
                   env=env)
        assert "succeeded (exit 0" in done.stdout, done.stdout + done.stderr + server.errors()
        assert "outside the schema" not in done.stderr  # the example's slots are all known
        # submit names a slot outside the schema, as evaluate does
        planted = predictions_with_slot_errors(tmp_path / "planted.jsonl", typo=False)
        warned = cli("submit", "metrics", "--schema", str(EXAMPLES / "schema.json"),
                     "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                     "--predictions", str(planted), env=env)
        assert f"{SLOT_NOT_IN_SCHEMA} (1 turn; closest schema slot:" in warned.stderr, \
            warned.stdout + warned.stderr
        job_id = done.stdout.split()[1]
        remote = judge.Client(server.url, token).results(job_id)
        assert remote["tsa"] == local["tsa"] and remote["judge_jga"] == local["judge_jga"]
        assert f"TSA {local['tsa']:.1f} %" in done.stdout
        assert remote["calls"]["failed"] == 0 and remote["error_turns"] == 0
        # a results directory carries what audit needs: the job's dialogues and schema
        fetched = tmp_path / "fetched"
        cli("results", job_id, "--out", str(fetched), env=env)
        pointer = json.loads((fetched / "inputs.json").read_text(encoding="utf-8"))
        assert (fetched / pointer["dialogues"]).read_bytes() == \
            (EXAMPLES / "dialogues.jsonl").read_bytes()
        audited = cli("audit", str(fetched), "--gold", "2.1", "--candidates",
                      str(tmp_path / "candidates.jsonl"), "--out", str(tmp_path / "a.html"),
                      env=env, check=False)
        assert audited.returncode == 0, audited.stdout + audited.stderr
        assert "ranked candidates" in audited.stdout and (tmp_path / "a.html").is_file()
        assert (tmp_path / "candidates.jsonl").read_text(encoding="utf-8").strip()
        # the weak system's prompts were recorded in another cassette of the folder; a
        # changed utterance was recorded nowhere: its turns are error rows, not verdicts
        changed = tmp_path / "changed.jsonl"
        lines = (EXAMPLES / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
        first = json.loads(lines[0])
        first["turns"][0]["user"] += " (never recorded)"
        changed.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n",
                           encoding="utf-8")
        done = cli("submit", "evaluate", "--schema", str(EXAMPLES / "schema.json"),
                   "--dialogues", str(changed), "--predictions",
                   str(EXAMPLES / "predictions.jsonl"), "--wait", env=env, check=False)
        assert "succeeded (exit 1" in done.stdout, done.stdout + done.stderr
        rows = list(judge.Client(server.url, token).judgments(done.stdout.split()[1]))
        errors = [r for r in rows if r["error"]]
        assert errors and all(r["verdict"] is None for r in errors)
        assert all("not recorded: POST /chat/completions" in r["error"] for r in errors)


def test_an_unrecorded_request_is_a_400_naming_it():
    transport = ReplayTransport(ROOT / "cassettes")
    assert transport.recorded > 100
    body = json.dumps({"model": "local", "messages": [{"role": "user", "content": "hello"}]})
    reply = asyncio.run(transport.post("http://replay.invalid/v1/chat/completions",
                                       body.encode(), {}))
    assert reply.status == 400
    message = json.loads(reply.content)["error"]["message"]
    assert "not recorded: POST /chat/completions (model 'local'" in message
    assert "ending 'hello'" in message and "never makes up a verdict" in message


def test_a_replay_endpoint_is_checked_at_start_and_talks_to_no_server(tmp_path):
    from judge.errors import OptionError
    from judge.service import build_settings, replay_endpoint

    settings = build_settings({"data_dir": tmp_path,
                               "endpoints": {"replay": replay_endpoint(ROOT / "cassettes")}})
    endpoint = settings.all_endpoints()["replay"]
    assert endpoint.base_url == "http://replay.invalid/v1" and endpoint.default_model == "local"
    assert not endpoint.offers_batch() and endpoint.replay.is_absolute()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "x.json").write_text('{"x": 1}', encoding="utf-8")
    for source, message in ((tmp_path / "nowhere", "no cassette file or folder here"),
                            (tmp_path / "broken", "'interactions' list")):
        try:
            build_settings({"data_dir": tmp_path,
                            "endpoints": {"replay": replay_endpoint(source)}})
        except OptionError as exc:
            assert message in str(exc) and "Value error" not in str(exc)
        else:
            raise AssertionError(f"{source} was accepted")


def test_a_replay_server_refuses_a_model_it_has_no_recording_of_and_fails_with_one_reason(
        tmp_path):
    """Issue 36: the job was accepted, then failed with the same cut-off message once per
    call. Now: 422 at submission naming the recorded models; a job whose every request is
    unrecorded fails with one whole reason."""
    data = tmp_path / "server"
    token = create_token(data, "lab")
    changed = tmp_path / "changed.jsonl"
    lines = []
    for line in (EXAMPLES / "dialogues.jsonl").read_text(encoding="utf-8").splitlines():
        dialogue = json.loads(line)
        for turn in dialogue["turns"]:
            turn["user"] += " (never recorded)"
        lines.append(json.dumps(dialogue))
    changed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with ServeProcess(data, args=["--replay", "cassettes/"]) as server:
        client = judge.Client(server.url, token)
        files = {"schema": client.upload(EXAMPLES / "schema.json", "schema").id,
                 "dialogues": client.upload(changed, "dialogues").id,
                 "predictions": client.upload(EXAMPLES / "predictions.jsonl",
                                              "predictions").id}
        before = len(client.jobs())
        with pytest.raises(judge.errors.ServiceError) as refused:
            client.submit("evaluate", files, {"model": "gpt-4o-mini"})
        assert refused.value.status == 422 and refused.value.field == "options.model"
        assert "holds none of model 'gpt-4o-mini': it recorded local" in str(refused.value)
        assert len(client.jobs()) == before  # nothing queued
        job = client.wait(client.submit("evaluate", files, {"model": "local"}).id,
                          timeout=120)
        assert job.status == "failed" and job.exit_code == 4, job
        reason = job.error or ""
        assert reason.startswith("nothing could be judged: 22 of 22 calls failed; the first: "
                                 "model error: HTTP 400: not recorded: POST /chat/completions"), \
            reason
        assert reason.count("not recorded") == 1, reason  # one reason, not one per call
        assert reason.endswith("never makes up a verdict"), reason  # whole, not cut off
        assert "Traceback" not in server.errors(), server.errors()
