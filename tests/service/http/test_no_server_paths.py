"""No response, artifact, bundle or page carries a path of the server's machine or a secret, and
no log line a secret (issue 36: results and bundles named ``"rules": "/…/rules/multiwoz.json"``).

A real ``dst-judge serve`` runs finished jobs of every kind (judge runs with the built-in and
an uploaded rule set, their retry, an imported bundle, metrics, agreement, compare, audit);
then every GET route of the app's route table, read at run time (``/v1``, ``/ui`` and the
rest, so a route added tomorrow is scanned tomorrow), is fetched for every job and file, every
exported bundle is unpacked, and everything is searched for the data directory, the
installation's folder (both as given and resolved), the endpoint's key and the bearer token.
The server's log is searched for the key and the token (an operator's own log may name the
operator's folders)."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge.service import build_settings, create_app
from judge.web import mount_web
from tests.app_surface import RouteInfo, routes, web_login
from tests.conftest import EXAMPLES
from tests.service.conftest import CANARY_KEY, FINAL
from tests.service.serve_process import ROOT, ServeProcess, create_token

# one server process, a dozen jobs and a few hundred reads: longer than the suite's 60 s
pytestmark = [pytest.mark.timeout(420), pytest.mark.servers]

STREAM_SECONDS = 2.0
"""How long an event stream that does not end by itself (the runs list's) is read."""


def _forbidden(data: Path, token: str) -> dict[str, str]:
    found = {"the endpoint's key": CANARY_KEY, "the bearer token": token}
    for name, path in (("the data directory", data), ("the installation", ROOT)):
        found[name] = str(path)
        found[f"{name} (resolved)"] = str(path.resolve())
    return found


class Reader:
    """What a client reads, with every text kept for the scan."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.read: list[tuple[str, str]] = []

    def keep(self, where: str, body: bytes) -> None:
        if body[:2] == b"\x1f\x8b":  # a bundle or a gzipped download: what it holds
            body = gzip.decompress(body)
            if body[257:262] == b"ustar":
                with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                    for member in tar.getmembers():
                        content = tar.extractfile(member)
                        self.read.append((f"{where} » {member.name}",
                                          content.read().decode("utf-8", "replace")
                                          if content else ""))
                return
        self.read.append((where, body.decode("utf-8", "replace")))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        response = self.client.get(url, **kw)
        self.keep(f"GET {url} ({response.status_code})", response.content)
        self.read.append((f"GET {url} headers", json.dumps(dict(response.headers))))
        return response

    def stream(self, url: str) -> None:
        chunks: list[bytes] = []
        deadline = time.monotonic() + STREAM_SECONDS
        try:
            with self.client.stream("GET", url, timeout=httpx.Timeout(30, read=STREAM_SECONDS)
                                    ) as response:
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        break
        except httpx.ReadTimeout:
            pass  # a stream that goes on: what came so far is scanned
        self.keep(f"GET {url} (stream)", b"".join(chunks))


def _wait(client: httpx.Client, job_id: str, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in FINAL:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
        time.sleep(0.1)


def _jobs_of_every_kind(client: httpx.Client) -> tuple[dict[str, str], dict[str, str]]:
    """Finished jobs of every kind, one failed (name → id), and the files they read
    (name → id)."""
    def upload(kind: str, path: Path, name: str | None = None) -> str:
        done = client.post("/v1/files", data={"kind": kind},
                           files={"file": (name or path.name, path.read_bytes())})
        assert done.status_code in (200, 201), done.text
        return done.json()["id"]

    def run(kind: str, inputs: dict[str, Any], expect: str = "succeeded", **options: Any
            ) -> str:
        created = client.post("/v1/jobs", json={"kind": kind, "inputs": inputs,
                                                "options": options})
        assert created.status_code == 201, created.text
        job = _wait(client, created.json()["id"])
        assert job["status"] == expect, job
        return job["id"]

    files = {"schema": upload("schema", EXAMPLES / "schema.json"),
             "dialogues": upload("dialogues", EXAMPLES / "dialogues.jsonl"),
             "predictions": upload("predictions", EXAMPLES / "predictions.jsonl"),
             "rules": upload("rules", ROOT / "rules" / "multiwoz.json", "my-rules.json")}
    judged = {k: files[k] for k in ("schema", "dialogues", "predictions")}
    jobs = {"evaluate": run("evaluate", judged, model="fake-model"),
            "evaluate-rules": run("evaluate", {**judged, "rules": files["rules"]},
                                  model="fake-model", limit=1)}
    jobs["retry"] = run("retry-errors", {"run": jobs["evaluate"]})
    rows = [json.loads(line) for line in
            client.get(f"/v1/jobs/{jobs['evaluate']}/judgments").text.splitlines()]
    labels = "".join(json.dumps({"dialogue_id": r["dialogue_id"], "turn_index": r["turn_index"],
                                 "label": 1}) + "\n" for r in rows)
    files["labels"] = client.post("/v1/files", data={"kind": "labels"}, files={
        "file": ("labels.jsonl", labels.encode())}).json()["id"]
    jobs["metrics"] = run("metrics", {**judged, "predictions": [files["predictions"]]})
    jobs["agreement"] = run("agreement", {"run": jobs["evaluate"], "human": files["labels"]},
                            n_boot=20)
    jobs["compare"] = run("compare", {"runs": [jobs["evaluate"], jobs["retry"]]})
    # runs of different turns cannot be compared: a failed job, whose error is scanned too
    jobs["failed"] = run("compare", {"runs": [jobs["evaluate"], jobs["evaluate-rules"]]},
                         expect="failed")
    jobs["audit"] = run("audit", {"run": jobs["evaluate"]})
    bundle = client.get(f"/v1/jobs/{jobs['evaluate']}/export").content
    imported = client.post("/v1/bundles", files={"file": ("b.tar.gz", bundle)})
    assert imported.status_code == 201, imported.text
    jobs["imported"] = imported.json()["id"]
    return jobs, files


def _values(route: RouteInfo, jobs: dict[str, str], files: dict[str, str],
            turn: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every way to fill the route's path parameters from what the test made."""
    choices = {"job_id": list(jobs.values()), "file_id": list(files.values()),
               "name": ["audit.html"], "dialogue_id": [turn["dialogue_id"]],
               "turn_index": [turn["turn_index"]]}
    unknown = [p for p in route.params if p not in choices]
    assert not unknown, (f"GET {route.path} takes {unknown}: say what such a parameter names "
                         "so the scan reaches it")
    for combination in itertools.product(*(choices[p] for p in route.params)):
        yield dict(zip(route.params, combination, strict=True))


def test_no_response_bundle_page_or_log_line_names_a_server_path_or_a_secret(tmp_path,
                                                                             fake_model):
    data = tmp_path / "serve"
    token = create_token(data, "lab", "read,submit,review,admin")
    endpoints = {"fake": {"base_url": fake_model.url, "api_key": CANARY_KEY}}
    table = create_app(build_settings({"data_dir": tmp_path / "table"}), run_worker=False)
    mount_web(table)  # the route table only: nothing of this app runs
    gets = [r for r in routes(table) if "GET" in r.methods]
    with ServeProcess(data, endpoints=endpoints, args=["--log-level", "info"],
                      max_seconds=400) as server, \
            httpx.Client(base_url=server.url, trust_env=False, timeout=60,
                         headers={"Authorization": f"Bearer {token}"}) as client:
        jobs, files = _jobs_of_every_kind(client)
        web_login(client, token)
        turn = json.loads(client.get(f"/v1/jobs/{jobs['evaluate']}/judgments").text
                          .splitlines()[0])
        reader = Reader(client)
        for route in gets:
            for values in _values(route, jobs, files, turn):
                url = route.url(values)
                if url.endswith("/events"):
                    reader.stream(url)
                else:
                    reader.get(url)
                    if "job_id" in route.query:
                        reader.get(url, params={"job_id": jobs["evaluate"]})
        for job_id in jobs.values():  # the labels of each run as a labels file
            reader.get("/v1/labels", params={"job_id": job_id, "format": "labels"})
        reader.get("/ui/compare", params={"runs": [jobs["evaluate"], jobs["imported"]]})
        log = server.log.read_text(encoding="utf-8", errors="replace")
    scanned = {where for where, _ in reader.read}
    assert any("export" in w for w in scanned) and any("/ui/runs/" in w for w in scanned)
    assert any("» summary.json" in w for w in scanned)  # a bundle was opened
    leaks = [f"{where}: {what} ({text[max(0, i - 60):i + 80]!r})"
             for where, text in reader.read for what, needle in _forbidden(data, token).items()
             if (i := text.find(needle)) >= 0]
    assert not leaks, "\n".join(leaks[:20])
    # the operator's log: no key, no token (it may name the operator's own folders)
    assert CANARY_KEY not in log and token not in log
    assert "GET /v1/jobs/" in log  # the access log was on: there was something to search


def test_the_names_of_server_paths_never_replace_the_root_folder(tmp_path):
    """A data directory of ``/`` (or an installation there) must not turn every ``/`` of a
    result into a name."""
    from judge.service.queue._inputs import server_paths

    assert "/" not in dict(server_paths(Path("/")))
    named = dict(server_paths(tmp_path))
    assert named[str(tmp_path)] == "<data dir>" and named[str(ROOT)] == "<dst-judge>"
    lengths = [len(path) for path, _ in server_paths(tmp_path)]
    assert lengths == sorted(lengths, reverse=True)  # the longest (most specific) first


@pytest.mark.parametrize(("url", "said"), [
    ("sqlite:////srv/secret/place/dst-judge.db", "SQLite file dst-judge.db"),
    ("sqlite://", "SQLite in memory"),
    ("postgresql+psycopg://user:pw@db.internal:5432/dsj", "Postgres database dsj"),
    ("postgresql+psycopg://postgres:@/postgres?host=/run/secret/pg", "Postgres database postgres"),
    ("not a url", "a database"),
])
def test_a_log_line_describes_a_database_by_kind_and_name_only(url, said):
    from judge.service.db._db import describe_database

    assert describe_database(url) == said
