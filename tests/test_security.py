"""The API key never appears in any artefact: cassettes, cache, run log, judgments, summary,
manifest, reports, console output or error messages, even when a (fixture) server echoes it
back in replies and errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import respx

from judge.cli import main

from .conftest import EXAMPLES

SENTINEL = "sk-SENTINEL-dstjudge-7f3a9c2e1b4d5a6f8e9d0c1b2a3f4e5d"
BASE = "http://127.0.0.1:8995/v1"


def _echoing_fixture(request: httpx.Request) -> httpx.Response:
    """A hand-written server that leaks the bearer token into everything it returns."""
    token = request.headers.get("authorization", "")
    system = json.loads(request.content)["messages"][0]["content"]
    key = "missed_domain_slot" if '"missed_domain_slot"' in system else "incorrect_domain_slot"
    content = json.dumps({"explanation": f"your header was {token}", key: {}})
    return httpx.Response(200, json={"id": "fixture", "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                          "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}})


def _files_containing(root, secret):
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            hits.append(path)
    return hits


def test_sentinel_key_appears_in_no_artefact(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    data = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions",
            str(EXAMPLES / "predictions.jsonl"), "--model", "m", "--base-url", BASE,
            "--cache-dir", str(tmp_path / "cache")]
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(f"{BASE}/chat/completions").mock(side_effect=_echoing_fixture)
        assert main(["evaluate", *data, "--record", str(tmp_path / "cassette.json"),
                     "--out", str(tmp_path / "run")]) == 0
        assert main(["evaluate", *data, "--out", str(tmp_path / "run2")]) == 0  # fills cache
        # the key was really sent, so the test would notice a leak
        assert route.calls[0].request.headers["authorization"] == f"Bearer {SENTINEL}"
        router.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(
            401, json={"error": {"message": f"Incorrect API key provided: {SENTINEL}"}}))
        code = main(["evaluate", *data, "--no-cache", "--out", str(tmp_path / "run3")])
        assert code == 5  # authentication refused
    assert main(["agreement", str(tmp_path / "run"), "--json",
                 str(tmp_path / "agreement.json")]) == 0
    out, err = capsys.readouterr()
    assert "Incorrect API key provided: <redacted>" in err
    assert SENTINEL not in out and SENTINEL not in err
    assert _files_containing(tmp_path, SENTINEL) == []
    explanation = json.loads((tmp_path / "run" / "judgments.jsonl").read_text().splitlines()[0])
    assert "<redacted>" in json.dumps(explanation)  # the echo was stored, without the key


class _EchoingHandler(BaseHTTPRequestHandler):
    """A real (loopback) server that leaks the bearer token: in replies, then in a 401 body."""

    protocol_version = "HTTP/1.1"
    fail = False

    def log_message(self, format, *args):  # keep the test output clean
        pass

    def do_POST(self):
        request = self.rfile.read(int(self.headers["content-length"]))
        token = self.headers.get("authorization", "")
        if type(self).fail:
            payload = json.dumps({"error": {"message": f"Incorrect API key provided: {token}"}})
            status = 401
        else:
            system = json.loads(request)["messages"][0]["content"]
            key = ("missed_domain_slot" if '"missed_domain_slot"' in system
                   else "incorrect_domain_slot")
            content = json.dumps({"explanation": f"your header was {token}", key: {}})
            payload = json.dumps({"id": "fixture", "model": "m", "choices": [
                {"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
            status = 200
        body = payload.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_sentinel_key_stays_out_of_artefacts_over_the_aiohttp_transport(tmp_path, capsys,
                                                                        monkeypatch):
    """The default (aiohttp) transport against a real echoing server on 127.0.0.1."""
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    _EchoingHandler.fail = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    data = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions",
            str(EXAMPLES / "predictions.jsonl"), "--model", "m", "--base-url", base,
            "--cache-dir", str(tmp_path / "cache"), "--http-backend", "aiohttp"]
    try:
        assert main(["evaluate", *data, "--out", str(tmp_path / "run")]) == 0
        _EchoingHandler.fail = True
        assert main(["evaluate", *data, "--no-cache", "--out", str(tmp_path / "run2")]) == 5
    finally:
        server.shutdown()
        server.server_close()
    out, err = capsys.readouterr()
    assert "HTTP 401: Incorrect API key provided: Bearer <redacted>" in err
    assert SENTINEL not in out and SENTINEL not in err
    assert _files_containing(tmp_path, SENTINEL) == []
    first = (tmp_path / "run" / "judgments.jsonl").read_text().splitlines()[0]
    assert "your header was Bearer <redacted>" in first  # the key really went out and came back
