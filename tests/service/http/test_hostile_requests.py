"""The hostile-request suite: a real ``dst-judge serve`` process, tried as an attacker or a
careless client would. Every case asserts its status (and the field of a 422), that the
server log holds no traceback, and, for every refused request, that no row of the database
changed. The API process's RSS is measured (psutil) around each amplification case, and the
bytes the server received around each request refused before its body.

Classes: amplification, body before token, loose types, overflow, NaN, headers, identity, and
our own (slow clients, chunked bodies, nesting, odd uploads); rate limits on a second server.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge.service import Database, create_token, rotate_token
from tests.service import hostile
from tests.service.serve_process import EXAMPLES, ServeProcess

psutil = pytest.importorskip("psutil")

RSS_LIMIT_MB = 64
SERVER_ARGS = ["--jobs", "0", "--auth-failures-per-minute", "0", "--requests-per-minute", "0",
               "--body-idle", "1", "--body-timeout", "3", "--header-timeout", "2"]
REPORT: dict[str, Any] = {}


pytestmark = pytest.mark.servers


@dataclass
class Env:
    server: ServeProcess
    client: httpx.Client
    db_path: Path
    tokens: dict[str, str]
    files: dict[str, str]
    job: str
    log_offset: int = 0
    rss: dict[str, float] = field(default_factory=dict)

    def token(self, who: str | None) -> dict[str, str]:
        if who is None:
            return {}
        if who.startswith("raw:"):
            return {"Authorization": who[4:]}
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def new_log(self) -> str:
        with self.server.log.open("rb") as handle:
            handle.seek(self.log_offset)
            text = handle.read().decode("utf-8", "replace")
        self.log_offset += len(text.encode("utf-8"))
        return text

    @property
    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid


def _make_tokens(db_url: str) -> dict[str, str]:
    db = Database(db_url)
    try:
        db.migrate()
        made = {"alice": create_token(db, "lab", "read,submit", name="alice")[0],
                "reader": create_token(db, "lab", "read", name="reader")[0],
                "bob": create_token(db, "lab", "review", name="bob")[0],
                "root": create_token(db, "lab", "admin", name="root")[0],
                "eve": create_token(db, "other", "read,submit,review", name="eve")[0]}
        revoked = create_token(db, "lab", "read,submit", name="gone")
        from judge.service import revoke_token
        revoke_token(db, revoked[1]["id"])
        made["revoked"] = revoked[0]
        return made
    finally:
        db.dispose()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    folder = tmp_path_factory.mktemp("hostile")
    db_path = folder / "dst-judge.db"
    tokens = _make_tokens(f"sqlite:///{db_path}")
    with ServeProcess(folder, args=SERVER_ARGS, max_seconds=900) as server, \
            httpx.Client(base_url=server.url, timeout=60, trust_env=False) as client:
        auth = {"Authorization": f"Bearer {tokens['alice']}"}
        files = {}
        for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                           ("predictions", "predictions.jsonl")):
            answer = client.post("/v1/files", headers=auth, data={"kind": kind},
                                 files={"file": (name, (EXAMPLES / name).read_bytes())})
            assert answer.status_code == 201, answer.text
            files[kind] = answer.json()["id"]
        job = client.post("/v1/jobs", headers=auth, json={"kind": "evaluate", "inputs": files,
                                                         "options": {"model": "m"}})
        assert job.status_code == 201, job.text
        # warm up every loader once, so a case's RSS counts the case, not first imports
        labels = b'{"dialogue_id": "d", "turn_index": 0, "label": 1, "annotator": "a"}\n'
        client.post("/v1/files", headers=auth, data={"kind": "labels"},
                    files={"file": ("l.jsonl", labels)})
        client.post("/v1/bundles", headers=auth,
                    files={"file": ("b.tar.gz", hostile.good_bundle())})
        environment = Env(server, client, db_path, tokens, files, job.json()["id"])
        environment.new_log()
        yield environment
        report = Path(os.environ.get("DST_JUDGE_HOSTILE_REPORT", folder / "report.json"))
        report.write_text(json.dumps({"rss_growth_mb": environment.rss, **REPORT}, indent=2))


# --- the cases ----------------------------------------------------------------------------------


Body = Callable[[Env], dict[str, Any]]


@dataclass
class Case:
    id: str
    method: str
    path: str | Callable[[Env], str]
    who: str | None
    status: int
    body: Body | None = None
    headers: dict[str, str] = field(default_factory=dict)
    field: str | None = None
    rss: bool = False


def _upload(kind: str, name: str, data: bytes | Callable[[], bytes]) -> Body:
    return lambda e: {"data": {"kind": kind},
                      "files": {"file": (name, data() if callable(data) else data)}}


def _bundle(data: bytes | Callable[[], bytes]) -> Body:
    return lambda e: {"files": {"file": ("b.tar.gz", data() if callable(data) else data)}}


def _json(make: Callable[[Env], Any]) -> Body:
    return lambda e: {"json": make(e)}


def _raw_json(text: str) -> Body:
    return lambda e: {"content": text.encode(), "headers": {"Content-Type": "application/json"}}


def _job(**options: Any) -> Body:
    return _json(lambda e: {"kind": "evaluate", "inputs": e.files,
                            "options": {"model": "m", **options}})


_CACHE: dict[str, bytes] = {}


def _cached(name: str, make: Callable[[], bytes]) -> Callable[[], bytes]:
    def get() -> bytes:
        if name not in _CACHE:
            _CACHE[name] = make()
        return _CACHE[name]
    return get


BOMB = _cached("bomb", lambda: hostile.gzip_bomb(3.0))
LINE = _cached("line", lambda: hostile.one_line_gz(400))
DIALOGUE = (EXAMPLES / "dialogues.jsonl").read_bytes().splitlines()[0]
REPEATED = _cached("repeated", lambda: hostile.repeated_lines_gz(DIALOGUE, 200))
SUMMARY_400 = _cached("summary", lambda: hostile.huge_member_bundle("summary.json", 400))
ROWS_200 = _cached("rows", lambda: hostile.huge_member_bundle("judgments.jsonl", 200))
TAR_BOMB = _cached("tarbomb", lambda: hostile.bundle(
    {"bundle.json": json.dumps(hostile.BUNDLE_META).encode(),
     "calls.jsonl": (300 << 20, hostile._repeat(b"\n" * (1 << 20), 300 << 20))}))

AMPLIFICATION = [
    *(Case(f"bomb-{kind}", "POST", "/v1/files", "alice", 413,
           _upload(kind, f"x.{kind}.gz", BOMB), rss=True)
      for kind in ("schema", "dialogues", "predictions", "labels", "rules")),
    *(Case(f"one-400mb-line-{kind}", "POST", "/v1/files", "alice", 413,
           _upload(kind, "x.jsonl.gz", LINE), rss=True)
      for kind in ("schema", "dialogues", "predictions", "labels", "rules")),
    Case("repeated-valid-dialogue", "POST", "/v1/files", "alice", 413,
         _upload("dialogues", "d.jsonl.gz", REPEATED), rss=True),
    Case("bomb-as-bundle", "POST", "/v1/bundles", "alice", 413, _bundle(BOMB), rss=True),
    Case("bundle-summary-400mb", "POST", "/v1/bundles", "alice", 413, _bundle(SUMMARY_400),
         rss=True),
    Case("bundle-judgments-200mb", "POST", "/v1/bundles", "alice", 413, _bundle(ROWS_200),
         rss=True),
    Case("bundle-tar-of-newlines", "POST", "/v1/bundles", "alice", 413, _bundle(TAR_BOMB),
         rss=True),
    Case("plain-17mb-line", "POST", "/v1/files", "alice", 413,
         _upload("dialogues", "d.jsonl", lambda: b'{"a": "' + b"a" * (17 << 20) + b'"}'),
         rss=True),
    Case("gzip-truncated", "POST", "/v1/files", "alice", 422,
         _upload("dialogues", "d.jsonl.gz", lambda: gzip.compress(
             (EXAMPLES / "dialogues.jsonl").read_bytes())[:-30]), field="file", rss=True),
]

SCOPED_ROUTES = [  # (method, path, scope it needs, a small junk body)
    ("POST", "/v1/files", "submit", "multipart"),
    ("POST", "/v1/bundles", "submit", "multipart"),
    ("POST", "/v1/jobs", "submit", "json"),
    ("PUT", "/v1/labels", "review", "json"),
    ("POST", "/v1/tokens", "admin", "json"),
    ("POST", "/v1/jobs/job_0/resume", "submit", "json"),
]
AUTH_VARIANTS = [(None, 401), ("raw:Bearer dsj_wrong", 401), ("raw:Basic eDp5", 401),
                 ("revoked", 401), ("lacks-scope", 403)]


def _lacking(scope: str) -> str:
    return {"submit": "bob", "review": "alice", "admin": "alice"}[scope]


def _junk(kind: str) -> Body:
    if kind == "multipart":
        return lambda e: {"content": b"--b\r\nnot a form", "headers": {
            "Content-Type": "multipart/form-data; boundary=b"}}
    return _raw_json("{this is not json")


BODY_BEFORE_TOKEN = [
    Case(f"{method}-{path}-{who or 'none'}-junk", method, path,
         _lacking(scope) if who == "lacks-scope" else who, status, _junk(kind))
    for method, path, scope, kind in SCOPED_ROUTES for who, status in AUTH_VARIANTS]
ANNOUNCED = [(method, path, _lacking(scope) if who == "lacks-scope" else who, status, kind)
             for method, path, scope, kind in SCOPED_ROUTES for who, status in AUTH_VARIANTS]

INT_OPTIONS = ["seed", "max_tokens", "max_retries", "concurrency", "reasks", "limit"]
FLOAT_OPTIONS = ["temperature", "top_p", "timeout", "budget"]
LOOSE_TYPES = [
    *(Case(f"int-option-{name}-{label}", "POST", "/v1/jobs", "alice", 422,
           _job(**{name: value}), field=f"options.{name}")
      for name in INT_OPTIONS
      for label, value in (("string", "64"), ("float", 64.0), ("bool", True),
                           ("huge", 10 ** 18))
      if not (name == "seed" and label == "huge")),
    *(Case(f"float-option-{name}-{label}", "POST", "/v1/jobs", "alice", 422,
           _job(**{name: value}), field=f"options.{name}")
      for name in FLOAT_OPTIONS
      for label, value in (("string", "0.5"), ("bool", True), ("too-big", 1e12),
                           ("negative", -1))),
    Case("concurrency-past-endpoint-cap-as-string", "POST", "/v1/jobs", "alice", 422,
         _job(concurrency="64"), field="options.concurrency"),
    Case("concurrency-past-endpoint-cap", "POST", "/v1/jobs", "alice", 422,
         _job(concurrency=64), field="options.concurrency"),
    Case("budget-string", "POST", "/v1/jobs", "alice", 422, _job(budget="5"),
         field="options.budget"),
    Case("prompt-cache-key-string", "POST", "/v1/jobs", "alice", 422,
         _job(prompt_cache_key="yes"), field="options.prompt_cache_key"),
    Case("dialogue-ids-not-strings", "POST", "/v1/jobs", "alice", 422,
         _job(dialogue_ids=[1, 2]), field="options.dialogue_ids"),
    Case("metrics-alpha-string", "POST", "/v1/jobs", "alice", 422, _json(lambda e: {
        "kind": "metrics", "inputs": {"schema": e.files["schema"],
                                      "dialogues": e.files["dialogues"],
                                      "predictions": [e.files["predictions"]]},
        "options": {"alpha": "0.5"}}), field="options.alpha"),
    Case("metrics-num-slots-float", "POST", "/v1/jobs", "alice", 422, _json(lambda e: {
        "kind": "metrics", "inputs": {"schema": e.files["schema"],
                                      "dialogues": e.files["dialogues"],
                                      "predictions": [e.files["predictions"]]},
        "options": {"num_slots": 30.0}}), field="options.num_slots"),
    Case("agreement-n-boot-string", "POST", "/v1/jobs", "alice", 422, _json(lambda e: {
        "kind": "agreement", "inputs": {"run": e.job}, "options": {"n_boot": "100"}}),
        field="options.n_boot"),
    *(Case(f"label-turn-index-{label}", "PUT", "/v1/labels", "bob", 422, _json(
        lambda e, v=value: {"dialogue_id": "d1", "turn_index": v, "label": "correct",
                            "job_id": e.job}), field="turn_index")
      for label, value in (("string", "0"), ("float", 0.0), ("bool", False), ("negative", -1),
                           ("past-32-bits", 2 ** 31))),
    *(Case(f"token-spend-cap-{label}", "POST", "/v1/tokens", "root", 422, _json(
        lambda e, v=value: {"name": f"cap-{v}", "scopes": ["read"], "spend_cap_usd": v}),
        field="spend_cap_usd")
      for label, value in (("string", "5"), ("bool", True), ("negative", -1),
                           ("too-big", 1e12))),
    Case("token-scopes-string", "POST", "/v1/tokens", "root", 422,
         _json(lambda e: {"name": "s", "scopes": "read"}), field="scopes"),
    Case("token-name-number", "POST", "/v1/tokens", "root", 422,
         _json(lambda e: {"name": 5, "scopes": ["read"]}), field="name"),
    *(Case(f"resume-budget-{label}", "POST", lambda e: f"/v1/jobs/{e.job}/resume", "alice",
           422, _json(lambda e, v=value: {"budget": v}), field="budget")
      for label, value in (("string", "5"), ("bool", True), ("zero", 0), ("too-big", 1e9))),
    Case("job-kind-number", "POST", "/v1/jobs", "alice", 422,
         _json(lambda e: {"kind": 1, "inputs": e.files}), field="kind"),
    Case("job-inputs-numbers", "POST", "/v1/jobs", "alice", 422,
         _json(lambda e: {"kind": "evaluate", "inputs": {"schema": 1}}), field="inputs.schema"),
]

BIG = 10 ** 23
OVERFLOW = [
    *(Case(f"list-{path}-{param}", "GET", f"/v1/{path}?{param}={BIG}", "alice", 422,
           field=param)
      for path in ("files", "jobs") for param in ("offset", "limit")),
    Case("judgments-offset", "GET", lambda e: f"/v1/jobs/{e.job}/judgments?offset={BIG}",
         "alice", 422, field="offset"),
    Case("judgments-limit", "GET", lambda e: f"/v1/jobs/{e.job}/judgments?limit={BIG}",
         "alice", 422, field="limit"),
    Case("judgments-negative-offset", "GET",
         lambda e: f"/v1/jobs/{e.job}/judgments?offset=-{BIG}", "alice", 422, field="offset"),
    Case("label-id-10e20", "DELETE", f"/v1/labels/{10 ** 20}", "bob", 422, field="label_id"),
    Case("label-id-negative", "DELETE", f"/v1/labels/-{10 ** 20}", "bob", 422,
         field="label_id"),
    Case("label-turn-index-10e30", "PUT", "/v1/labels", "bob", 422, _json(lambda e: {
        "dialogue_id": "d1", "turn_index": 10 ** 30, "label": "correct", "job_id": e.job}),
        field="turn_index"),
    *(Case(f"option-{name}-10e30", "POST", "/v1/jobs", "alice", 422,
           _job(**{name: 10 ** 30}), field=f"options.{name}")
      for name in ("seed", "limit", "max_retries", "max_tokens", "reasks")),
    Case("spend-cap-10e400", "POST", "/v1/tokens", "root", 422,
         _raw_json('{"name": "x", "scopes": ["read"], "spend_cap_usd": 1e400}'),
         field="spend_cap_usd"),
    Case("deep-int-in-list", "POST", "/v1/jobs", "alice", 422,
         _job(fga_lambdas=[1, 10 ** 40]), field="options.fga_lambdas[1]"),
]

CONSTANTS = ("NaN", "Infinity", "-Infinity")
NAN = [
    *(Case(f"token-spend-cap-{c}", "POST", "/v1/tokens", "root", 422,
           _raw_json(f'{{"name": "n", "scopes": ["read"], "spend_cap_usd": {c}}}'),
           field="spend_cap_usd") for c in CONSTANTS),
    *(Case(f"resume-budget-{c}", "POST", lambda e: f"/v1/jobs/{e.job}/resume", "alice", 422,
           _raw_json(f'{{"budget": {c}}}'), field="budget") for c in CONSTANTS),
    *(Case(f"job-{name}-{c}", "POST", "/v1/jobs", "alice", 422,
           lambda e, c=c, name=name: {"content": (
               '{"kind": "evaluate", "inputs": ' + json.dumps(e.files)
               + f', "options": {{"{name}": {c}}}}}').encode(),
               "headers": {"Content-Type": "application/json"}},
           field=f"options.{name}")
      for c in CONSTANTS for name in ("temperature", "budget", "top_p")),
    *(Case(f"label-note-{c}", "PUT", "/v1/labels", "bob", 422, _raw_json(
        '{"dialogue_id": "d1", "turn_index": 0, "label": "correct", "note": ' + c + "}"),
        field="note") for c in CONSTANTS),
    *(Case(f"bundle-{member}-nan", "POST", "/v1/bundles", "alice", 422, _bundle(
        lambda m=member, text=text: hostile.good_bundle(**{m: text})), field=member)
      for member, text in (
          ("summary.json", b'{"tsa": NaN}'),
          ("bundle.json", json.dumps(hostile.BUNDLE_META).encode()[:-1] + b', "x": Infinity}'),
          ("manifest.json", b'{"cost": -Infinity}'),
          ("judgments.jsonl", b'{"dialogue_id": "d1", "turn_index": 0, "verdict": true, '
                              b'"rule": "1", "score": NaN}\n'),
          ("calls.jsonl", b'{"custom_id": "c1", "cost": NaN}\n'))),
    Case("bundle-row-turn-index-huge", "POST", "/v1/bundles", "alice", 422, _bundle(
        lambda: hostile.good_bundle(**{"judgments.jsonl": json.dumps(
            {**hostile.GOOD_ROW, "turn_index": 10 ** 30}).encode()})), field="turn_index"),
    Case("bundle-row-turn-index-string", "POST", "/v1/bundles", "alice", 422, _bundle(
        lambda: hostile.good_bundle(**{"judgments.jsonl": json.dumps(
            {**hostile.GOOD_ROW, "turn_index": "3"}).encode()})), field="turn_index"),
]

GET_ROUTES = ["/v1/me", "/v1/endpoints", "/v1/files", "/v1/jobs", "/v1/usage", "/v1/labels"]
HEADERS = [
    *(Case(f"headers-{path}", "GET", path, "alice", 200) for path in GET_ROUTES),
    Case("headers-tokens", "GET", "/v1/tokens", "root", 200),
    Case("headers-job", "GET", lambda e: f"/v1/jobs/{e.job}", "alice", 200),
    Case("headers-file", "GET", lambda e: f"/v1/files/{e.files['schema']}", "alice", 200),
    Case("headers-file-content", "GET", lambda e: f"/v1/files/{e.files['schema']}/content",
         "alice", 200),
    Case("headers-404", "GET", "/v1/nothing-here", "alice", 404),
    Case("headers-401", "GET", "/v1/jobs", None, 401),
    Case("headers-403", "GET", "/v1/tokens", "alice", 403),
    Case("headers-405", "PATCH", "/v1/jobs", "alice", 405),
    Case("headers-healthz", "GET", "/healthz", None, 200),
    Case("headers-request-id-echoed", "GET", "/v1/me", "alice", 200,
         headers={"X-Request-ID": "client-id.42"}),
    Case("headers-request-id-too-long", "GET", "/v1/me", "alice", 200,
         headers={"X-Request-ID": "x" * 200}),
    Case("headers-request-id-odd", "GET", "/v1/me", "alice", 200,
         headers={"X-Request-ID": "<script>alert(1)</script>"}),
    Case("headers-new-token-secret", "POST", "/v1/tokens", "root", 201,
         _json(lambda e: {"name": "fresh-reader", "scopes": ["read"]})),
]

IDENTITY = [
    Case("second-live-alice", "POST", "/v1/tokens", "root", 409,
         _json(lambda e: {"name": "alice", "scopes": ["read", "review"]}), field="name"),
    Case("second-live-bob-other-scopes", "POST", "/v1/tokens", "root", 409,
         _json(lambda e: {"name": "bob", "scopes": ["admin"]}), field="name"),
    Case("name-of-revoked-token-is-free", "POST", "/v1/tokens", "root", 201,
         _json(lambda e: {"name": "gone", "scopes": ["read"]})),
    Case("token-name-too-long", "POST", "/v1/tokens", "root", 422,
         _json(lambda e: {"name": "n" * 201, "scopes": ["read"]}), field="name"),
    Case("token-name-empty", "POST", "/v1/tokens", "root", 422,
         _json(lambda e: {"name": "", "scopes": ["read"]}), field="name"),
    Case("delete-someone-elses-label", "DELETE", "/v1/labels/1", "eve", 404),
]

OWN = [
    Case("json-nested-too-deep", "POST", "/v1/jobs", "alice", 422,
         _raw_json("[" * 5000 + "]" * 5000)),
    Case("json-body-over-limit", "POST", "/v1/jobs", "alice", 413,
         _raw_json('{"kind": "evaluate", "x": "' + "a" * (3 << 20) + '"}')),
    Case("unknown-v1-path-without-token", "GET", "/v1/admin/secrets", None, 401),
    Case("upload-unknown-kind", "POST", "/v1/files", "alice", 422,
         _upload("weights", "w.bin", b"{}"), field="kind"),
    Case("upload-not-json", "POST", "/v1/files", "alice", 422,
         _upload("schema", "s.json", b"\x00\x01binary")),
    Case("upload-empty", "POST", "/v1/files", "alice", 422, _upload("dialogues", "e.jsonl", b"")),
    Case("upload-gzip-then-junk", "POST", "/v1/files", "alice", 422,
         _upload("dialogues", "d.jsonl.gz", lambda: hostile.repeated_lines_gz(DIALOGUE, 1)
                 + b"junk"), field="file"),
    Case("upload-without-file", "POST", "/v1/files", "alice", 422,
         lambda e: {"data": {"kind": "schema"}}),
    Case("upload-traversal-name", "POST", "/v1/files", "alice", 201,
         _upload("dialogues", "../../../etc/passwd",
                 lambda: (EXAMPLES / "dialogues.jsonl").read_bytes() + b"\n")),
    Case("bundle-not-a-tar", "POST", "/v1/bundles", "alice", 422,
         _bundle(b"\x1f\x8b" + b"\0" * 100), field="file"),
    Case("bundle-missing-summary", "POST", "/v1/bundles", "alice", 422, _bundle(
        lambda: hostile.bundle({"bundle.json": json.dumps(hostile.BUNDLE_META).encode()})),
        field="file"),
    Case("bundle-row-not-object", "POST", "/v1/bundles", "alice", 422, _bundle(
        lambda: hostile.good_bundle(**{"judgments.jsonl": b"[1, 2]\n"})),
        field="judgments.jsonl"),
    Case("bundle-call-without-id", "POST", "/v1/bundles", "alice", 422, _bundle(
        lambda: hostile.good_bundle(**{"calls.jsonl": b'{"x": 1}\n'})), field="custom_id"),
    Case("job-ids-too-many", "POST", "/v1/jobs", "alice", 422,
         _job(dialogue_ids=["d"] * 100_001), field="options.dialogue_ids"),
    Case("job-base-url", "POST", "/v1/jobs", "alice", 422,
         _job(base_url="http://169.254.169.254/"), field="options.base_url"),
    Case("label-unknown-field", "PUT", "/v1/labels", "bob", 422, _json(lambda e: {
        "dialogue_id": "d1", "turn_index": 0, "label": "correct", "job_id": e.job,
        "reviewer": "alice"}), field="reviewer"),
    Case("label-for-another-projects-job", "PUT", "/v1/labels", "eve", 404, _json(lambda e: {
        "dialogue_id": "d1", "turn_index": 0, "label": "correct", "job_id": e.job}),
        field="job_id"),
]


# --- running a case -----------------------------------------------------------------------------


def run(env: Env, case: Case) -> httpx.Response:
    before_rows = hostile.row_counts(env.db_path)
    request: dict[str, Any] = case.body(env) if case.body is not None else {}
    headers = {**env.token(case.who), **case.headers, **request.pop("headers", {})}
    path = case.path(env) if callable(case.path) else case.path
    with hostile.PeakRss(env.pid) as rss:
        response = env.client.request(case.method, path, headers=headers, **request)
    growth = rss.growth_mb
    log = env.new_log()
    assert response.status_code == case.status, (case.id, response.text[:500])
    assert "Traceback" not in log, log[-3000:]
    assert response.status_code < 500
    if case.field is not None:
        assert response.json()["error"]["field"] == case.field, response.text[:500]
    if response.status_code >= 400:
        assert hostile.row_counts(env.db_path) == before_rows, case.id
    if case.rss:
        env.rss[case.id] = round(growth, 1)
        assert growth <= RSS_LIMIT_MB, f"{case.id}: RSS grew by {growth:.0f} MB"
    return response


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


@pytest.mark.parametrize("case", AMPLIFICATION, ids=_ids(AMPLIFICATION))
def test_amplification(env: Env, case: Case) -> None:
    response = run(env, case)
    assert "limit" in response.json()["error"]["message"] or response.status_code == 422


@pytest.mark.parametrize("case", BODY_BEFORE_TOKEN, ids=_ids(BODY_BEFORE_TOKEN))
def test_body_before_token(env: Env, case: Case) -> None:
    """A junk body (bad JSON, a broken form) without a valid token or scope is 401/403, not
    the 400/422 its body would earn."""
    run(env, case)


@pytest.mark.parametrize(("method", "path", "who", "status", "kind"), ANNOUNCED,
                         ids=[f"{m}-{p}-{w}" for m, p, w, _, _ in ANNOUNCED])
def test_announced_150mb_body_before_token(env: Env, method: str, path: str,
                                           who: str | None, status: int, kind: str) -> None:
    """150 MB announced, sent as fast as the client can: answered from the headers, the
    server having received at most 1 MB of it."""
    before_rows = hostile.row_counts(env.db_path)
    before = hostile.received_bytes(env.server.url, env.tokens["root"])
    content_type = ("multipart/form-data; boundary=b" if kind == "multipart"
                    else "application/json")
    answered, seconds, _ = hostile.announced_upload(
        env.server.port, method, path, length=150 << 20,
        headers={**env.token(who), "Content-Type": content_type}, send_for=5.0)
    time.sleep(0.2)
    received = hostile.received_bytes(env.server.url, env.tokens["root"]) - before
    assert answered == status
    assert seconds is not None
    assert received <= 1 << 20, f"the server received {received / 2 ** 20:.1f} MB"
    REPORT.setdefault("announced_150mb", {})[f"{method} {path} {who}"] = {
        "status": answered, "answer_seconds": round(seconds, 3),
        "server_received_bytes": int(received)}
    assert "Traceback" not in env.new_log()
    assert hostile.row_counts(env.db_path) == before_rows


@pytest.mark.parametrize("case", LOOSE_TYPES, ids=_ids(LOOSE_TYPES))
def test_loose_types(env: Env, case: Case) -> None:
    run(env, case)


@pytest.mark.parametrize("case", OVERFLOW, ids=_ids(OVERFLOW))
def test_overflow(env: Env, case: Case) -> None:
    run(env, case)


@pytest.mark.parametrize("case", NAN, ids=_ids(NAN))
def test_nan_and_infinity(env: Env, case: Case) -> None:
    run(env, case)


@pytest.mark.parametrize("case", HEADERS, ids=_ids(HEADERS))
def test_headers(env: Env, case: Case) -> None:
    response = run(env, case)
    headers = response.headers
    assert headers["x-content-type-options"] == "nosniff"
    assert "strict-transport-security" not in headers  # plain HTTP
    given = case.headers.get("X-Request-ID")
    if given == "client-id.42":
        assert headers["x-request-id"] == given
    else:
        assert len(headers["x-request-id"]) == 32 and headers["x-request-id"].isalnum()
    if case.path != "/healthz":
        assert headers["cache-control"] == "no-store"
        assert headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("case", IDENTITY, ids=_ids(IDENTITY))
def test_identity(env: Env, case: Case) -> None:
    run(env, case)


@pytest.mark.parametrize("case", OWN, ids=_ids(OWN))
def test_own_cases(env: Env, case: Case) -> None:
    run(env, case)


def test_a_rotated_reviewer_keeps_and_deletes_its_labels(env: Env) -> None:
    """A second token named like a reviewer is refused (409), so nobody else can act as
    them; `token rotate` gives the reviewer a new secret and its labels stay its own."""
    label = {"dialogue_id": "d1", "turn_index": 0, "label": "correct", "job_id": env.job}
    given = env.client.put("/v1/labels", headers=env.token("bob"), json=label)
    assert given.status_code == 200, given.text
    db = Database(f"sqlite:///{env.db_path}")
    try:
        new_secret, record = rotate_token(db, "lab", "bob")
    finally:
        db.dispose()
    assert record["name"] == "bob"
    old = env.client.delete(f"/v1/labels/{given.json()['id']}", headers=env.token("bob"))
    assert old.status_code == 401
    env.tokens["bob"] = new_secret
    mine = env.client.get("/v1/labels", headers=env.token("bob"),
                          params={"reviewer": "bob"}).json()["labels"]
    assert [m["id"] for m in mine] == [given.json()["id"]]
    gone = env.client.delete(f"/v1/labels/{given.json()['id']}", headers=env.token("bob"))
    assert gone.status_code == 204
    assert "Traceback" not in env.new_log()


def test_a_slow_body_is_408_and_a_slow_head_is_closed(env: Env) -> None:
    with socket.create_connection(("127.0.0.1", env.server.port), timeout=10) as sock:
        sock.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                     f"Authorization: Bearer {env.tokens['alice']}\r\n"
                     "Content-Type: application/json\r\n\r\n{\"kind\"".encode())
        answer = sock.recv(4096)  # the server's body-idle limit is 1 s
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    with socket.create_connection(("127.0.0.1", env.server.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/me HTTP/1.1\r\nHost: x\r\n")  # never ends its head
        started = time.monotonic()
        assert sock.recv(4096) == b""  # closed by the server (header limit 2 s)
        assert time.monotonic() - started < 9
    assert "Traceback" not in env.new_log()


def test_a_chunked_body_past_the_limit_is_413(env: Env) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"kind": "evaluate", "x": "'
        for _ in range(64):
            yield b"a" * 65536
        yield b'"}'

    before_rows = hostile.row_counts(env.db_path)
    response = env.client.post("/v1/jobs", headers={**env.token("alice"),
                                                    "Content-Type": "application/json"},
                               content=chunks())
    assert response.status_code == 413, response.text
    assert hostile.row_counts(env.db_path) == before_rows
    assert "Traceback" not in env.new_log()


def test_the_connection_stays_usable_after_refusals(env: Env) -> None:
    """Refused requests whose body was read keep the connection; the next request on it
    works (a dropped keep-alive would fail it with a reset)."""
    with httpx.Client(base_url=env.server.url, trust_env=False) as client:
        for _ in range(3):
            refused = client.post("/v1/tokens", headers=env.token("root"),
                                  content=b'{"name": "n", "scopes": ["read"], '
                                          b'"spend_cap_usd": NaN}',
                                  )
            assert refused.status_code == 422
            assert client.get("/v1/me", headers=env.token("alice")).status_code == 200


def test_rate_limits_answer_429_with_retry_after(tmp_path: Path) -> None:
    """Failed authentications per address and requests per token (per replica); a valid
    token is never refused for its address's failures."""
    tokens = _make_tokens(f"sqlite:///{tmp_path / 'dst-judge.db'}")
    args = ["--jobs", "0", "--auth-failures-per-minute", "5", "--requests-per-minute", "20"]
    with ServeProcess(tmp_path, args=args, max_seconds=300) as server, \
            httpx.Client(base_url=server.url, trust_env=False) as client:
        own = {"Authorization": f"Bearer {tokens['reader']}"}
        answers = [client.get("/v1/me", headers=own) for _ in range(22)]
        assert [a.status_code for a in answers[:20]] == [200] * 20
        assert answers[21].status_code == 429 and int(answers[21].headers["retry-after"]) >= 1
        assert client.get("/v1/me", headers={  # another token of the address: its own bucket
            "Authorization": f"Bearer {tokens['alice']}"}).status_code == 200
        answers = [client.get("/v1/me", headers={"Authorization": "Bearer dsj_guess"})
                   for _ in range(7)]
        assert [a.status_code for a in answers[:5]] == [401] * 5
        assert answers[6].status_code == 429 and int(answers[6].headers["retry-after"]) >= 1
        # the limit slows the failures only: a valid token from the same address (the same
        # proxy, the same NAT) still passes, while the guesses stay refused
        assert client.get("/v1/me", headers={
            "Authorization": f"Bearer {tokens['alice']}"}).status_code == 200
        assert client.get("/v1/me", headers={
            "Authorization": "Bearer dsj_guess"}).status_code == 429
        assert "Traceback" not in server.log.read_text(errors="replace")


def test_the_suite_has_at_least_200_cases() -> None:
    cases = (len(AMPLIFICATION) + len(BODY_BEFORE_TOKEN) + len(ANNOUNCED) + len(LOOSE_TYPES)
             + len(OVERFLOW) + len(NAN) + len(HEADERS) + len(IDENTITY) + len(OWN))
    assert cases >= 200, cases


def test_an_upload_announced_past_the_limit_is_413_before_its_body(env: Env) -> None:
    before = hostile.received_bytes(env.server.url, env.tokens["root"])
    answered, seconds, _ = hostile.announced_upload(
        env.server.port, "POST", "/v1/files", length=300 << 20,
        headers={**env.token("alice"), "Content-Type": "multipart/form-data; boundary=b"})
    time.sleep(0.2)
    received = hostile.received_bytes(env.server.url, env.tokens["root"]) - before
    assert answered == 413 and seconds is not None
    assert received <= 1 << 20
    assert "Traceback" not in env.new_log()


def test_an_event_stream_outlives_the_body_time_limits(env: Env) -> None:
    """The body limits (1 s idle, 3 s in all on this server) are for request bodies: a client
    following a job's events for longer is not cut off."""
    with socket.create_connection(("127.0.0.1", env.server.port), timeout=10) as sock:
        sock.sendall(f"GET /v1/jobs/{env.job}/events HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: Bearer {env.tokens['alice']}\r\n\r\n".encode())
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200") and b"text/event-stream" in first
        time.sleep(4.5)
        sock.settimeout(0.5)
        try:
            more = sock.recv(65536)
        except TimeoutError:
            more = None  # nothing new (the job waits in the queue), and still open
        assert more != b"", "the server closed the event stream"
    assert "Traceback" not in env.new_log()
