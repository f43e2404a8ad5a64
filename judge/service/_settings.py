"""What the operator decides and a job cannot: the database, the data directory, the model
endpoints with their keys and rate limits, upload limits, leases and retention.

Jobs name an endpoint; they never carry a URL or a key. That is the whole defence against
server-side request forgery: the only hosts the server talks to are the ones written here.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from .._config import DEFAULT_BASE_URL
from .._errors import InputError, OptionError

DEFAULT_PORT = 8765
SLOTS_PER_PROCESS = 4
"""Jobs one worker process runs at once by default before another process (core) is used:
past about four, a process's jobs wait on its one interpreter lock (bench/service_queue.py)."""


def default_data_dir() -> Path:
    """``<user data dir>/dst-judge/serve``: the embedded database, run directories, caches."""
    return Path(platformdirs.user_data_dir("dst-judge")) / "serve"


class EndpointConfig(BaseModel):
    """One OpenAI-compatible endpoint that jobs may name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = DEFAULT_BASE_URL
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the key (preferred).")
    api_key: SecretStr | None = Field(None, description="The key itself (prefer api_key_env).")
    organization: str | None = None
    project: str | None = None
    models: list[str] | None = Field(None, description="Models jobs may ask for (all if unset).")
    default_model: str | None = None
    rpm: int | None = Field(None, ge=1, description="Requests per minute, shared by every job "
                            "and replica.")
    tpm: int | None = Field(None, ge=1, description="Tokens per minute (estimated), shared.")
    max_concurrency: int = Field(16, ge=1, description="Largest per-job concurrency allowed.")
    prices: Path | None = Field(None, description="Price table (JSON); default: packaged.")
    http_backend: str | None = None
    batch_api: bool | None = Field(
        None, description="Whether jobs may use mode 'batch' (the OpenAI Batch API) here; "
        "unset: only when base_url is OpenAI's own API (local servers have no Batch API).")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")

    def offers_batch(self) -> bool:
        """Whether batch jobs may run on this endpoint."""
        if self.batch_api is not None:
            return self.batch_api
        return self.base_url.rstrip("/") == DEFAULT_BASE_URL.rstrip("/")

    def secret(self) -> str | None:
        """The key in clear (for the request header only)."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None


class ServiceSettings(BaseModel):
    """Every server-side setting of ``dst-judge serve`` (CLI flags map onto these)."""

    model_config = ConfigDict(extra="forbid")

    db: str | None = Field(None, description="SQLAlchemy URL; default SQLite in data_dir.")
    data_dir: Path = Field(default_factory=default_data_dir)
    endpoints: dict[str, EndpointConfig] = Field(default_factory=dict)
    default_endpoint: str | None = None
    max_upload_mb: float = Field(200.0, gt=0, description="Largest upload (compressed) in MB.")
    max_unpacked_mb: float = Field(2000.0, gt=0, description="Largest upload once unzipped.")
    lease_seconds: float = Field(30.0, ge=1.0, description="A job whose worker stops renewing "
                                 "its lease this long is taken over by another worker.")
    job_slots: int = Field(4, ge=0, description="Jobs run at once by this replica (0: API only).")
    grace_seconds: float = Field(20.0, ge=0, description="On SIGTERM: how long calls in flight "
                                 "may finish before their jobs are handed back to the queue.")
    poll_seconds: float = Field(0.5, gt=0, description="How often an idle worker looks for jobs.")
    batch_poll_seconds: float = Field(30.0, gt=0, description="How long a batch job waits, "
                                      "without a worker, between two looks at its batches.")
    worker_mode: Literal["thread", "process"] = Field(
        "thread", description="Run jobs in a thread of the API process, or in a process of "
        "their own (dst-judge serve's default: judging never slows the API).")
    worker_processes: int | None = Field(
        None, ge=1, le=64, description="Worker processes of this replica (worker_mode process); "
        "its job slots are split among them. Each has an interpreter of its own, so on a "
        "machine with spare cores more of them keep a full queue's jobs from waiting on one "
        "interpreter lock; they share the database like replicas do. Default: one per "
        f"{SLOTS_PER_PROCESS} job slots, at most one per core.")
    listen: bool = Field(
        True, description="On Postgres, workers LISTEN for jobs being queued and claim them at "
        "once (polling every poll_seconds stays as the fallback); off: polling only.")
    max_attempts: int = Field(
        3, ge=1, le=1000, description="Claims of a job whose worker died while running it "
        "before it is given up (ends failed with the reason): a job that kills its worker "
        "cannot take the queue's workers down one after another for ever.")
    retention_days: float | None = Field(
        None, gt=0, description="Delete finished jobs, unused files and ledger replies "
        "(cached model answers) older than this (default: keep).")
    max_job_budget: float | None = Field(None, gt=0, description="Spending cap per job (USD).")
    share_cache_across_projects: bool = Field(
        False, description="One reply cache for all projects (hits reveal others' requests).")

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir / 'dst-judge.db'}"

    @property
    def worker_process_count(self) -> int:
        """``worker_processes``, or by default one process per :data:`SLOTS_PER_PROCESS` job
        slots, at most one per core (and never more processes than slots)."""
        if self.worker_processes is not None:
            wanted = self.worker_processes
        else:
            wanted = min(math.ceil(self.job_slots / SLOTS_PER_PROCESS), os.cpu_count() or 1)
        return max(1, min(wanted, self.job_slots))

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_unpacked_bytes(self) -> int:
        return int(self.max_unpacked_mb * 1024 * 1024)

    def all_endpoints(self) -> dict[str, EndpointConfig]:
        """The configured endpoints; with none, ``openai`` with ``OPENAI_API_KEY``."""
        if self.endpoints:
            return dict(self.endpoints)
        return {"openai": EndpointConfig(api_key_env="OPENAI_API_KEY")}

    @property
    def default_endpoint_name(self) -> str:
        endpoints = self.all_endpoints()
        if self.default_endpoint:
            return self.default_endpoint
        return next(iter(endpoints))


def read_endpoints_file(path: str | Path) -> dict[str, Any]:
    """An endpoints file (TOML or JSON): ``[endpoints.NAME]`` tables and optional
    ``default_endpoint``; returns the values for :class:`ServiceSettings`."""
    file = Path(path)
    if not file.is_file():
        raise InputError("endpoints file not found", path=file)
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib  # type: ignore[no-redef]
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"cannot parse endpoints file: {exc}", path=file) from None
    if not isinstance(data, dict) or not isinstance(data.get("endpoints"), dict):
        raise InputError("an endpoints file needs a table 'endpoints' of named endpoints",
                         path=file, field="endpoints")
    values: dict[str, Any] = {"endpoints": data["endpoints"]}
    if "default_endpoint" in data:
        values["default_endpoint"] = data["default_endpoint"]
    return values


def build_settings(values: dict[str, Any]) -> ServiceSettings:
    """Settings from CLI values (None = not given); an invalid value is an OptionError."""
    given = {k: v for k, v in values.items() if v is not None}
    try:
        settings = ServiceSettings(**given)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise OptionError(f"{where}: {first['msg']}") from None
    names = settings.all_endpoints()
    if settings.default_endpoint and settings.default_endpoint not in names:
        raise OptionError(f"default_endpoint {settings.default_endpoint!r} is not one of the "
                          f"endpoints ({', '.join(names)})")
    return settings
