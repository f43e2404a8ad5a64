"""A thin, synchronous client of ``dst-judge serve``'s ``/v1`` API (httpx).

Every refusal of the server becomes :class:`judge.ServiceError` (status, message, field); the
token travels only in the ``Authorization`` header and is never part of a message.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from .._errors import ServiceError

FINAL = ("succeeded", "failed", "cancelled", "stopped")
INPUTS_FILE = "inputs.json"
"""In a run directory written by :meth:`Client.download_run`: kind → path of the job's input
file, relative to the directory (``audit`` reads its dialogues and schema from there)."""


class Client:
    """``Client("http://127.0.0.1:8765", token)``; the token defaults to ``DST_JUDGE_TOKEN``."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        token = token if token is not None else os.environ.get("DST_JUDGE_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout,
                                  transport=transport, trust_env=False)

    # --- plumbing ---------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServiceError(f"cannot reach {self.url}: {exc}", status=0) from None
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the API ----------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/healthz")

    def me(self) -> dict[str, Any]:
        return self._json("GET", "/v1/me")

    def upload(self, path: str | Path, kind: str, *, name: str | None = None) -> dict[str, Any]:
        """Upload a schema, dialogues, predictions, labels or rules file (``.gz`` ok)."""
        file = Path(path)
        with file.open("rb") as handle:
            return self._json("POST", "/v1/files", data={"kind": kind, "name": name or file.name},
                              files={"file": (file.name, handle, "application/octet-stream")})

    def files(self, kind: str | None = None) -> list[dict[str, Any]]:
        params = {"kind": kind} if kind else {}
        return self._json("GET", "/v1/files", params=params)["files"]

    def delete_file(self, file_id: str) -> None:
        self._request("DELETE", f"/v1/files/{file_id}")

    def submit(self, kind: str, inputs: Mapping[str, str | Sequence[str]],
               options: Mapping[str, Any] | None = None, *, mode: str = "live"
               ) -> dict[str, Any]:
        """Queue a job; returns it (``id``, ``status`` ...)."""
        body = {"kind": kind, "inputs": {k: v if isinstance(v, str) else list(v)
                                         for k, v in inputs.items()},
                "options": dict(options or {}), "mode": mode}
        return self._json("POST", "/v1/jobs", json=body)

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{job_id}")

    def jobs(self, *, status: str | None = None, kind: str | None = None,
             limit: int = 50) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        if kind:
            params["kind"] = kind
        return self._json("GET", "/v1/jobs", params=params)["jobs"]

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{job_id}/cancel")

    def resume(self, job_id: str, *, budget: float | None = None) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{job_id}/resume",
                          json={"budget": budget} if budget is not None else None)

    def delete_job(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{job_id}")

    def events(self, job_id: str) -> Iterator[dict[str, Any]]:
        """The job's server-sent events as they come (the last one has a final status)."""
        with self._http.stream("GET", f"/v1/jobs/{job_id}/events", timeout=None) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            data: list[str] = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    yield json.loads("\n".join(data))
                    data = []

    def wait(self, job_id: str, *, timeout: float | None = None, poll: float = 0.5,
             on_update: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Poll until the job is final (or ``timeout`` seconds pass: ServiceError 408)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if on_update is not None:
                on_update(job)
            if job["status"] in FINAL:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise ServiceError(f"job {job_id} is still {job['status']} after {timeout} s",
                                   status=408)
            time.sleep(poll)

    def results(self, job_id: str) -> dict[str, Any]:
        """The summary JSON of a finished job."""
        return self._json("GET", f"/v1/jobs/{job_id}/results")

    def judgments(self, job_id: str, **filters: Any) -> Iterator[dict[str, Any]]:
        """Per-turn rows (streamed JSON Lines); filters: verdict, error, dialogue_id,
        offset, limit."""
        params = {k: (str(v).lower() if isinstance(v, bool) else v)
                  for k, v in filters.items() if v is not None}
        with self._http.stream("GET", f"/v1/jobs/{job_id}/judgments", params=params) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def download_run(self, job_id: str, out_dir: str | Path, *, inputs: bool = True) -> Path:
        """Write ``summary.json`` and ``judgments.jsonl``: a run directory that ``agreement``,
        ``compare``, ``systems`` and ``audit`` read. With ``inputs`` (the default), also the
        job's schema, dialogues and predictions under ``inputs/<kind>/<name>`` and their paths
        in ``inputs.json`` (:data:`INPUTS_FILE`), where ``audit`` finds its dialogues and
        schema."""
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        if inputs:
            self._download_inputs(job_id, folder)
        summary = self.results(job_id)
        with (folder / "judgments.jsonl").open("w", encoding="utf-8") as handle:
            for row in self.judgments(job_id):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        (folder / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False)
                                             + "\n", encoding="utf-8")
        return folder

    def _download_inputs(self, job_id: str, folder: Path) -> None:
        """The files an evaluate job read (a retry's: those of the run it retried)."""
        job = self.job(job_id)
        seen = {job_id}
        while job["kind"] == "retry-errors" and job["inputs"].get("run") not in seen:
            seen.add(job["inputs"]["run"])
            job = self.job(job["inputs"]["run"])
        written: dict[str, str] = {}
        for kind in ("schema", "dialogues", "predictions"):
            file_id = job["inputs"].get(kind)
            if not isinstance(file_id, str):
                continue
            record = self._json("GET", f"/v1/files/{file_id}")
            name = Path(str(record.get("name") or kind)).name or kind  # no folder from afar
            target = folder / "inputs" / kind / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with self._http.stream("GET", f"/v1/files/{file_id}/content") as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error(response)
                with target.open("wb") as handle:
                    for block in response.iter_bytes():
                        handle.write(block)
            written[kind] = target.relative_to(folder).as_posix()
        (folder / INPUTS_FILE).write_text(json.dumps({"job": job_id, **written}, indent=2)
                                          + "\n", encoding="utf-8")

    def export(self, job_id: str, path: str | Path) -> Path:
        """Save the job's bundle (``.tar.gz``) to ``path``."""
        target = Path(path)
        target.write_bytes(self._request("GET", f"/v1/jobs/{job_id}/export").content)
        return target

    def import_bundle(self, path: str | Path) -> dict[str, Any]:
        file = Path(path)
        with file.open("rb") as handle:
            return self._json("POST", "/v1/bundles",
                              files={"file": (file.name, handle, "application/gzip")})

    def artifact(self, job_id: str, name: str) -> bytes:
        return self._request("GET", f"/v1/jobs/{job_id}/artifacts/{name}").content

    def usage(self) -> dict[str, Any]:
        return self._json("GET", "/v1/usage")

    def evaluate(self, *, schema: str | Path, dialogues: str | Path, predictions: str | Path,
                 options: Mapping[str, Any] | None = None, wait: bool = True,
                 timeout: float | None = None) -> dict[str, Any]:
        """Upload the three files, queue an evaluate job and (by default) wait for it."""
        inputs = {"schema": self.upload(schema, "schema")["id"],
                  "dialogues": self.upload(dialogues, "dialogues")["id"],
                  "predictions": self.upload(predictions, "predictions")["id"]}
        job = self.submit("evaluate", inputs, options)
        return self.wait(job["id"], timeout=timeout) if wait else job


def _error(response: httpx.Response) -> ServiceError:
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
    except ValueError:
        error = None
    if isinstance(error, dict):
        return ServiceError(str(error.get("message")), status=response.status_code,
                            field=error.get("field"))
    return ServiceError(f"HTTP {response.status_code}: {response.text[:200]}",
                        status=response.status_code)
