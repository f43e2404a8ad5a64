"""Issue 40, items 1, 2 and 5 against a real ``dst-judge serve``: every layer of compression
capped (a gzip inside the upload's gzip is refused in its first bytes, so a 660-byte upload no
longer unpacks to 300 MB in the loaders, and an upload is accounted by what it really holds),
one record and one string bounded, names in a file's ``info`` bounded (a 15 MB reviewer name
no longer makes every file listing 15 MB), and the web interface's JSON route held to the
API's body rules (a body of 666,000 values 413, JSON nested 500,000 deep 422, not 500).

Every refusal leaves every row count as it was, and the API process's RSS is measured around
each upload (psutil)."""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from judge.service import Database, create_token
from tests.app_surface import web_login
from tests.service import hostile
from tests.service.hostile import gzip_stream
from tests.service.serve_process import EXAMPLES, ServeProcess
from tests.web import synthetic

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.servers

RSS_LIMIT_MB = 64
TURN = ("SYN00001.json", 0)
LABEL = {"dialogue_id": "d1", "turn_index": 0, "label": 1}



def _megabytes_of(byte: bytes, megabytes: int) -> Iterator[bytes]:
    block = byte * (1 << 20)
    return (block for _ in range(megabytes))


def nested_zeros(megabytes: int = 300) -> bytes:
    """gzip(gzip(``megabytes`` MB of zeros)): about 660 bytes."""
    return gzip.compress(gzip_stream(_megabytes_of(b"\0", megabytes)), 9)


def one_record(field: str, megabytes: int) -> Iterator[bytes]:
    """A labels line whose ``field`` holds ``megabytes`` MB of one letter."""
    head = json.dumps({**LABEL, field: ""})[:-2].encode()
    return iter([head, *_megabytes_of(b"a", megabytes), b'"}\n'])


@dataclass
class Env:
    server: ServeProcess
    client: httpx.Client
    db_path: Path
    tokens: dict[str, str]

    def auth(self, who: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    @property
    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def upload(self, kind: str, name: str, data: bytes) -> tuple[httpx.Response, float, float]:
        """Upload and answer: the response, the API's RSS growth (MB) and the seconds; the
        row counts are checked unchanged when it is refused."""
        before = hostile.row_counts(self.db_path)
        start = time.perf_counter()
        with hostile.PeakRss(self.pid) as rss:
            answer = self.client.post("/v1/files", headers=self.auth(), data={"kind": kind},
                                      files={"file": (name, data)})
        seconds = time.perf_counter() - start
        if answer.status_code >= 400:
            assert hostile.row_counts(self.db_path) == before, answer.text[:300]
        return answer, rss.growth_mb, seconds


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    folder = tmp_path_factory.mktemp("nested")
    db_path = folder / "dst-judge.db"
    db = Database(f"sqlite:///{db_path}")
    try:
        db.migrate()
        tokens = {"alice": create_token(db, "lab", "read,submit,review", name="alice")[0]}
    finally:
        db.dispose()
    with ServeProcess(folder, args=["--jobs", "0", "--requests-per-minute", "0"],
                      max_seconds=600) as server, \
            httpx.Client(base_url=server.url, timeout=120, trust_env=False) as client:
        environment = Env(server, client, db_path, tokens)
        # warm every loader once, so a case's RSS counts the case, not first imports
        labels = json.dumps({**LABEL, "reviewer": "warm"}).encode() + b"\n"
        environment.upload("labels", "warm.jsonl.gz", gzip.compress(labels))
        environment.upload("dialogues", "d.jsonl", (EXAMPLES / "dialogues.jsonl").read_bytes())
        yield environment


# --- item 1: every layer of compression capped --------------------------------------------------


def test_a_gzip_of_a_gzip_of_300mb_is_refused_at_once_without_growing_the_api(env):
    body = nested_zeros(300)
    assert len(body) < 2000
    answer, growth, seconds = env.upload("dialogues", "d.jsonl.gz", body)
    assert answer.status_code == 422, answer.text[:300]
    error = answer.json()["error"]
    assert error["field"] == "file" and "gzip inside gzip" in error["message"]
    assert growth <= RSS_LIMIT_MB, f"the API grew by {growth:.0f} MB"
    assert seconds < 5, seconds


def test_a_labels_file_of_one_150mb_record_twice_gzipped_is_refused(env):
    body = gzip.compress(gzip_stream(one_record("note", 150)), 9)
    assert len(body) < 2000
    answer, growth, _ = env.upload("labels", "l.jsonl.gz", body)
    assert answer.status_code == 422, answer.text[:300]
    assert "gzip inside gzip" in answer.json()["error"]["message"]
    assert growth <= RSS_LIMIT_MB, f"the API grew by {growth:.0f} MB"


def test_a_labels_file_of_one_150mb_record_once_gzipped_is_refused_early(env):
    answer, growth, _ = env.upload("labels", "l.jsonl.gz", gzip_stream(one_record("note", 150)))
    assert answer.status_code == 413, answer.text[:300]
    assert growth <= RSS_LIMIT_MB, f"the API grew by {growth:.0f} MB"


def test_an_upload_is_accounted_by_its_content_not_an_inner_gzip(env):
    """A real dialogues file gzipped twice was stored as its inner gzip, its size (what the
    quota and max_unpacked_mb count) some 10 times too small; now it is refused, and the same
    file gzipped once is recorded at its full size."""
    content = (EXAMPLES / "dialogues.jsonl").read_bytes() + b"\n\n"
    twice, _, _ = env.upload("dialogues", "twice.jsonl.gz", gzip.compress(gzip.compress(content)))
    assert twice.status_code == 422, twice.text[:300]
    once, _, _ = env.upload("dialogues", "once.jsonl.gz", gzip.compress(content))
    assert once.status_code == 201, once.text[:300]
    assert once.json()["size"] == len(content)


# --- item 2: bounded metadata -------------------------------------------------------------------


def test_a_15mb_reviewer_name_is_refused_and_listings_stay_small(env):
    name = os.urandom(15 << 19).hex()  # 15 MB that gzip cannot shrink past the ratio cap
    body = gzip.compress(json.dumps({**LABEL, "reviewer": name}).encode() + b"\n", 1)
    answer, growth, _ = env.upload("labels", "l.jsonl.gz", body)
    assert answer.status_code == 422, answer.text[:300]
    error = answer.json()["error"]
    assert error["field"] == "reviewer" and ":1:" in error["message"], error
    assert growth <= RSS_LIMIT_MB, f"the API grew by {growth:.0f} MB"
    listing = env.client.get("/v1/files", headers=env.auth())
    assert listing.status_code == 200 and len(listing.content) < 64 * 1024


@pytest.mark.parametrize("field", ["reviewer", "annotator"])
def test_a_name_past_200_characters_is_refused_naming_line_and_field(env, field):
    lines = [json.dumps({**LABEL, field: "a"}), json.dumps({**LABEL, "turn_index": 1,
                                                           field: "n" * 201})]
    answer, _, _ = env.upload("labels", "l.jsonl", "\n".join(lines).encode())
    assert answer.status_code == 422, answer.text[:300]
    error = answer.json()["error"]
    assert error["field"] == field and ":2:" in error["message"], error


def test_a_long_predicted_slot_name_never_reaches_info(env):
    """A name the loaders take (a slot a system predicted) is still bounded in ``info``."""
    record = json.loads((EXAMPLES / "predictions.jsonl").read_text().splitlines()[0])
    record["turns"][0]["pred_state"] = {"hotel-" + "x" * 300: "yes"}
    answer, _, _ = env.upload("predictions", "p.jsonl", json.dumps(record).encode())
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json()["error"]["field"].startswith("info.slot_names")


@pytest.mark.parametrize(("member", "text", "field"), [
    ("bundle.json", json.dumps({**hostile.BUNDLE_META, "inputs": {"schema": {"name": "s" * 300}}}),
     "bundle.json.inputs.schema.name"),
    ("summary.json", json.dumps({"tsa": 100.0, "rule": {"v" * 300: {"agreement": 1.0}}}),
     "summary.json (a key)")])
def test_an_imported_bundle_brings_no_long_name_into_job_listings(env, member, text, field):
    """A bundle's inputs and its summary's annotation versions are shown by every job
    listing: the same bound as a file's ``info``."""
    before = hostile.row_counts(env.db_path)
    answer = env.client.post("/v1/bundles", headers=env.auth(), files={
        "file": ("b.tar.gz", hostile.good_bundle(**{member: text.encode()}))})
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json()["error"]["field"].startswith(field.split(" ")[0]), answer.text[:300]
    assert hostile.row_counts(env.db_path) == before


# --- item 5: the web's JSON route meets the API's body rules ------------------------------------


@pytest.fixture(scope="module")
def review(env: Env) -> tuple[httpx.Client, str, str]:
    """A browser session that may review, and an imported judge run to review."""
    run = env.client.post("/v1/bundles", headers=env.auth(), files={
        "file": ("b.tar.gz", synthetic.bundle(synthetic.synthetic_rows(6)))})
    assert run.status_code == 201, run.text[:300]
    browser = httpx.Client(base_url=env.server.url, timeout=120, trust_env=False)
    csrf = web_login(browser, env.tokens["alice"])
    return browser, csrf, run.json()["id"]


def _post_label(browser: httpx.Client, csrf: str, job: str, content: bytes) -> httpx.Response:
    return browser.post(f"/ui/review/{job}/labels", content=content, headers={
        "Content-Type": "application/json", "Accept": "application/json",
        "X-CSRF-Token": csrf})


def test_the_review_route_saves_a_plain_label(review):
    browser, csrf, job = review
    body = json.dumps({"dialogue_id": TURN[0], "turn_index": TURN[1], "label": "correct"}).encode()
    for _ in range(100):  # the run's index is built in the background at first
        answer = _post_label(browser, csrf, job, body)
        if answer.status_code != 503:
            break
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text[:300]


@pytest.mark.parametrize("what", ["666000-values", "nested-500000-deep", "not-json-type"])
def test_the_review_route_refuses_what_the_api_refuses(env, review, what):
    browser, csrf, job = review
    head = json.dumps({"dialogue_id": TURN[0], "turn_index": TURN[1], "label": "incorrect",
                       "pad": 0})[:-2]
    bodies = {"666000-values": (head + "[" + ",".join(["{}"] * 666_000) + "]}").encode(),
              "nested-500000-deep": ("[" * 500_000 + "]" * 500_000).encode()}
    before = hostile.row_counts(env.db_path)
    if what == "not-json-type":
        answer = browser.post(f"/ui/review/{job}/labels", content=b"[[]]", headers={
            "Content-Type": "text/plain", "Accept": "application/json", "X-CSRF-Token": csrf})
        expected = 415
    else:
        assert len(bodies[what]) < 2 * 1024 * 1024  # within the JSON body limit
        with hostile.PeakRss(env.pid) as rss:
            answer = _post_label(browser, csrf, job, bodies[what])
        assert rss.growth_mb <= RSS_LIMIT_MB
        expected = 413  # more values than any request needs (500,000 brackets are too)
    assert answer.status_code == expected, answer.text[:300]
    assert hostile.row_counts(env.db_path) == before
    api = env.client.put("/v1/labels", headers={**env.auth(), "Content-Type":
                                                "application/json"}, content=bodies.get(
        what, b"[[]]"))
    if what != "not-json-type":
        assert api.status_code == expected, api.text[:300]  # the same rule as the API's
    assert "Traceback" not in env.server.log.read_text(errors="replace")
