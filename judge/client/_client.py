"""A thin, synchronous client of ``dst-judge serve``'s ``/v1`` API (httpx).

Answers come back as the API's own models (:mod:`judge._api_models`, the classes the server
declares as its responses): a :class:`Job` with a typed ``status`` and ``progress``, not a dict.
Every refusal of the server becomes :class:`judge.errors.ServiceError` (status, message, field); the
token travels only in the ``Authorization`` header and is never part of a message.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from .._api_models import (
    CorrectionRecord,
    CreatedJob,
    Endpoint,
    EndpointList,
    FileKind,
    FileList,
    Health,
    Job,
    JobKind,
    JobList,
    JobMode,
    JobStatus,
    Label,
    LabelList,
    LabelRequest,
    Me,
    UploadedFile,
    Usage,
)
from .._errors import ServiceError
from .._io import write_text
from .._validation import first_problem

Model = TypeVar("Model", bound=BaseModel)
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

    def _model(self, model: type[Model], method: str, path: str, **kwargs: Any) -> Model:
        response = self._request(method, path, **kwargs)
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise ServiceError(f"{method} {path}: the server's answer is not a "
                               f"{model.__name__}: {first_problem(exc)}",
                               status=response.status_code) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the API ----------------------------------------------------------------------------

    def health(self) -> Health:
        return self._model(Health, "GET", "/healthz")

    def me(self) -> Me:
        return self._model(Me, "GET", "/v1/me")

    def endpoints(self) -> list[Endpoint]:
        return self._model(EndpointList, "GET", "/v1/endpoints").endpoints

    def upload(self, path: str | Path, kind: FileKind, *, name: str | None = None
               ) -> UploadedFile:
        """Upload a schema, dialogues, predictions, labels or rules file (``.gz`` ok)."""
        file = Path(path)
        with file.open("rb") as handle:
            return self._model(UploadedFile, "POST", "/v1/files",
                               data={"kind": kind, "name": name or file.name},
                               files={"file": (file.name, handle, "application/octet-stream")})

    def files(self, kind: FileKind | None = None, *, limit: int = 100,
              offset: int = 0) -> list[UploadedFile]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if kind:
            params["kind"] = kind
        return self._model(FileList, "GET", "/v1/files", params=params).files

    def delete_file(self, file_id: str) -> None:
        self._request("DELETE", f"/v1/files/{file_id}")

    def submit(self, kind: JobKind, inputs: Mapping[str, str | Sequence[str]],
               options: Mapping[str, Any] | None = None, *, mode: JobMode = "live"
               ) -> CreatedJob:
        """Queue a job; returns it (``id``, ``status`` ...) with ``warnings`` about its
        inputs."""
        body = {"kind": kind, "inputs": {k: v if isinstance(v, str) else list(v)
                                         for k, v in inputs.items()},
                "options": dict(options or {}), "mode": mode}
        return self._model(CreatedJob, "POST", "/v1/jobs", json=body)

    def job(self, job_id: str) -> Job:
        return self._model(Job, "GET", f"/v1/jobs/{job_id}")

    def jobs(self, *, status: JobStatus | None = None, kind: JobKind | None = None,
             limit: int = 50, offset: int = 0) -> list[Job]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status:
            params["status"] = status
        if kind:
            params["kind"] = kind
        return self._model(JobList, "GET", "/v1/jobs", params=params).jobs

    def cancel(self, job_id: str) -> Job:
        return self._model(Job, "POST", f"/v1/jobs/{job_id}/cancel")

    def resume(self, job_id: str, *, budget: float | None = None) -> Job:
        return self._model(Job, "POST", f"/v1/jobs/{job_id}/resume",
                           json={"budget": budget} if budget is not None else None)

    def delete_job(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{job_id}")

    def events(self, job_id: str) -> Iterator[Job]:
        """The job as its server-sent events report it, until it is final (a job deleted
        meanwhile ends the stream with ServiceError 404)."""
        with self._http.stream("GET", f"/v1/jobs/{job_id}/events", timeout=None) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            data: list[str] = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    payload = json.loads("\n".join(data))
                    data = []
                    if payload.get("status") == "deleted":
                        raise ServiceError(f"job {job_id} was deleted", status=404)
                    yield Job.model_validate(payload)

    def wait(self, job_id: str, *, timeout: float | None = None, poll: float = 0.5,
             on_update: Callable[[Job], None] | None = None) -> Job:
        """Poll until the job is final (or ``timeout`` seconds pass: ServiceError 408)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if on_update is not None:
                on_update(job)
            if job.final:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise ServiceError(f"job {job_id} is still {job.status} after {timeout} s",
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

    def corrections(self, job_id: str) -> list[CorrectionRecord]:
        """The decisions reviewers took on a judge run's label-error candidates (the web's
        candidates queue), as corrections-file records."""
        response = self._request("GET", f"/v1/jobs/{job_id}/corrections")
        return [CorrectionRecord.model_validate_json(line)
                for line in response.text.splitlines() if line.strip()]

    def export_corrections(self, job_id: str, path: str | Path) -> int:
        """Write a judge run's decided candidates as a corrections file (JSON Lines);
        returns how many corrections it holds."""
        records = self.corrections(job_id)
        text = "".join(r.model_dump_json(exclude_unset=True) + "\n" for r in records)
        write_text(path, text)  # gzip under a .gz name, like every other writer
        return len(records)

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
        while job.kind == "retry-errors" and job.inputs.get("run") not in seen:
            seen.add(job.inputs["run"])
            job = self.job(job.inputs["run"])
        written: dict[str, str] = {}
        for kind in ("schema", "dialogues", "predictions"):
            file_id = job.inputs.get(kind)
            if not isinstance(file_id, str):
                continue
            record = self._model(UploadedFile, "GET", f"/v1/files/{file_id}")
            name = Path(record.name or kind).name or kind  # no folder from afar
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
        """Save the job's bundle (``.tar.gz``) to ``path``: its bytes are gzip already, so
        they are written as they come (not through ``open_output``, which would pack them
        again under a ``.gz`` name)."""
        target = Path(path)
        target.write_bytes(self._request("GET", f"/v1/jobs/{job_id}/export").content)
        return target

    def import_bundle(self, path: str | Path) -> Job:
        file = Path(path)
        with file.open("rb") as handle:
            return self._model(Job, "POST", "/v1/bundles",
                               files={"file": (file.name, handle, "application/gzip")})

    def artifact(self, job_id: str, name: str) -> bytes:
        return self._request("GET", f"/v1/jobs/{job_id}/artifacts/{name}").content

    def usage(self) -> Usage:
        return self._model(Usage, "GET", "/v1/usage")

    def labels(self, *, job_id: str | None = None, predictions: str | None = None,
               reviewer: str | None = None) -> list[Label]:
        params = {k: v for k, v in (("job_id", job_id), ("predictions", predictions),
                                    ("reviewer", reviewer)) if v is not None}
        return self._model(LabelList, "GET", "/v1/labels", params=params).labels

    def put_label(self, label: LabelRequest) -> Label:
        """Record (or replace) this token's label of one turn or slot."""
        return self._model(Label, "PUT", "/v1/labels",
                           json=label.model_dump(mode="json", exclude_none=True))

    def delete_label(self, label_id: int) -> None:
        self._request("DELETE", f"/v1/labels/{label_id}")

    def evaluate(self, *, schema: str | Path, dialogues: str | Path, predictions: str | Path,
                 options: Mapping[str, Any] | None = None, wait: bool = True,
                 timeout: float | None = None) -> Job:
        """Upload the three files, queue an evaluate job and (by default) wait for it."""
        inputs = {"schema": self.upload(schema, "schema").id,
                  "dialogues": self.upload(dialogues, "dialogues").id,
                  "predictions": self.upload(predictions, "predictions").id}
        job = self.submit("evaluate", inputs, options)
        return self.wait(job.id, timeout=timeout) if wait else job


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
