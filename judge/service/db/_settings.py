"""What the operator decides and a job cannot: the database, the data directory, the model
endpoints with their keys and rate limits, upload limits, leases and retention.

Jobs name an endpoint; they never carry a URL or a key. That is the whole defence against
server-side request forgery: the only hosts the server talks to are the ones written here.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import SettingsConfigDict, SettingsError

from ..._config import DEFAULT_BASE_URL, LayeredSettings, options_file
from ..._errors import InputError, OptionError
from ..._io import MAX_RECORD_BYTES
from ..._validation import first_problem
from ...model import REPLAY_BASE_URL, Cassette, cassette_files

DEFAULT_PORT = 8765
ENV_PREFIX = "DST_JUDGE_SERVE_"
"""Every setting may come from the environment as ``DST_JUDGE_SERVE_<NAME>`` (upper case;
lists and tables as JSON), e.g. ``DST_JUDGE_SERVE_DB``, ``DST_JUDGE_SERVE_JOB_SLOTS``."""
SLOTS_PER_PROCESS = 4
"""Jobs one worker process runs at once by default before another process (core) is used:
past about four, a process's jobs wait on its one interpreter lock (bench/service_queue.py)."""


def default_data_dir() -> Path:
    """``<user data dir>/dst-judge/serve``: the embedded database, run directories, caches."""
    return Path(platformdirs.user_data_dir("dst-judge")) / "serve"


@dataclass(frozen=True)
class UploadCaps:
    """Limits on one upload: bytes as sent, bytes unpacked, compression ratio, one JSON
    record (line or document), and the project's quota (None: none)."""

    packed: int
    unpacked: int
    ratio: float = 100.0
    record: int = 16 * 1024 * 1024
    quota: int | None = None
    quota_bound: bool = False
    """The unpacked cap is what the project's quota has left (the message says so)."""


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
    replay: Path | None = Field(
        None, description="A cassette file or a folder of them: this endpoint answers exactly "
        "the recorded requests and nothing else (an unrecorded request is an error row "
        "naming it); no key, no network. Its base_url is " + REPLAY_BASE_URL + ".")

    @model_validator(mode="before")
    @classmethod
    def _replay_url(cls, values: Any) -> Any:
        """A replay endpoint talks to no server: its base URL is one that never resolves."""
        if isinstance(values, dict) and values.get("replay") and not values.get("base_url"):
            return {**values, "base_url": REPLAY_BASE_URL}
        return values

    @field_validator("replay")
    @classmethod
    def _cassettes_exist(cls, value: Path | None) -> Path | None:
        if value is not None:
            try:  # every cassette read now: a broken one is the operator's error at start
                for file in cassette_files(value):
                    Cassette.load(file)
            except InputError as exc:
                raise ValueError(str(exc)) from None
            return value.resolve()  # worker processes may start elsewhere
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")

    def offers_batch(self) -> bool:
        """Whether batch jobs may run on this endpoint."""
        if self.replay is not None:
            return False  # cassettes hold chat completions, not batches
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


class ServiceSettings(LayeredSettings):
    """Every server-side setting of ``dst-judge serve``: from its flags, else the environment
    (``DST_JUDGE_SERVE_<NAME>``, :data:`ENV_PREFIX`), else a settings file (``--settings``,
    TOML or JSON), else the default, as the judge's own options (``JudgeConfig``) are."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    db: str | None = Field(None, description="SQLAlchemy URL; default SQLite in data_dir.")
    data_dir: Path = Field(default_factory=default_data_dir)
    endpoints: dict[str, EndpointConfig] = Field(default_factory=dict)
    default_endpoint: str | None = None
    max_upload_mb: float = Field(200.0, gt=0, le=1_000_000, description="Largest upload "
                                 "body in MB, as sent (compressed when it is a .gz).")
    max_unpacked_mb: float = Field(
        512.0, gt=0, le=1_000_000, description="Largest upload once unpacked, in MB; for a "
        "bundle, all its members together. 512 MB takes the full SGD training set as one "
        "native JSON Lines file (about 140 MB, see docs/SERVICE.md) with room to spare.")
    max_ratio: float = Field(100.0, ge=2, le=100_000, description="Largest compression ratio "
                             "(unpacked / packed bytes), checked while unpacking once the "
                             "first MB is out: a gzip bomb is refused within its first MBs.")
    max_record_mb: float = Field(16.0, gt=0, le=MAX_RECORD_BYTES / 2 ** 20, description=(
        "Largest JSON Lines line, or whole file when it is one JSON document (a schema, a file "
        "in another format), in MB: what is parsed at once. At most the loaders' own cap "
        f"({MAX_RECORD_BYTES // 2 ** 20} MB), which the workers read every file under."))
    max_json_mb: float = Field(2.0, gt=0, le=1_000, description="Largest request body that "
                               "is not a multipart upload (JSON), in MB.")
    project_quota_gb: float | None = Field(
        10.0, gt=0, le=1_000_000, description="Unpacked size of all the files of one project, "
        "in GB (None: no quota).")
    body_timeout_seconds: float = Field(300.0, gt=0, le=86_400, description="Longest time a "
                                        "client may take to send a request body.")
    body_idle_seconds: float = Field(30.0, gt=0, le=86_400, description="Longest pause "
                                     "between two parts of a request body.")
    header_timeout_seconds: float = Field(10.0, gt=0, le=3_600, description="Longest time a "
                                          "new connection may take to send its request "
                                          "headers.")
    auth_failures_per_minute: int = Field(
        30, ge=0, le=1_000_000, description="Failed authentications allowed per client "
        "address and minute before 429 (0: no limit); per replica.")
    requests_per_minute: int = Field(
        1200, ge=0, le=10_000_000, description="Requests allowed per token and minute before "
        "429 (0: no limit); per replica.")
    trusted_proxies: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "::1"], description="Addresses (or networks) "
        "of reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (default: "
        "loopback, a proxy on this machine; ['none']: nobody).")
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

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        if value == ["none"]:
            return []
        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"not an address or network: {item!r}") from None
        return value

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

    @property
    def max_record_bytes(self) -> int:
        return int(self.max_record_mb * 1024 * 1024)

    @property
    def max_json_bytes(self) -> int:
        return int(self.max_json_mb * 1024 * 1024)

    @property
    def project_quota_bytes(self) -> int | None:
        return None if self.project_quota_gb is None else int(self.project_quota_gb * 1024 ** 3)

    def upload_caps(self) -> UploadCaps:
        """The caps every upload is unpacked and checked under."""
        return UploadCaps(packed=self.max_upload_bytes, unpacked=self.max_unpacked_bytes,
                          ratio=self.max_ratio, record=self.max_record_bytes,
                          quota=self.project_quota_bytes)

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
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10
                import tomli as tomllib
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


def replay_endpoint(source: str | Path, model: str = "local") -> dict[str, Any]:
    """The endpoint ``dst-judge serve --replay SOURCE`` adds (named ``replay``): the cassettes
    of SOURCE, jobs' model defaulting to the one the project's cassettes were recorded with."""
    return {"replay": str(source), "default_model": model}


def build_settings(values: dict[str, Any], settings_file: str | Path | None = None
                   ) -> ServiceSettings:
    """Settings from CLI values (None = not given), the environment (``DST_JUDGE_SERVE_*``)
    and an optional settings file; an invalid value is an OptionError."""
    given = {k: v for k, v in values.items() if v is not None}
    try:
        with options_file(settings_file):
            settings = ServiceSettings(**given)
    except ValidationError as exc:
        problem = first_problem(exc)
        raise OptionError(f"{problem.path or 'settings'}: {problem.message}") from None
    except SettingsError as exc:  # a list or table in the environment that is not JSON
        found = re.search(r'field "(\w+)"', str(exc))
        name = ENV_PREFIX + (found.group(1).upper() if found else "...")
        raise OptionError(f"{name}: not valid JSON (a list or table in the environment is "
                          "written as JSON)") from None
    names = settings.all_endpoints()
    if settings.default_endpoint and settings.default_endpoint not in names:
        raise OptionError(f"default_endpoint {settings.default_endpoint!r} is not one of the "
                          f"endpoints ({', '.join(names)})")
    return settings
