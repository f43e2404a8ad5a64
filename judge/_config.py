"""One configuration object for the judge: CLI flags, environment and a config file all map
onto :class:`JudgeConfig`, and the cache key of a model call is derived from it.

Precedence: CLI flags > environment (``DST_JUDGE_*``; ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``
also work) > config file (JSON or TOML) > defaults.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ._errors import InputError, OptionError
from ._io import loads, read_text
from ._validation import first_problem

Method = Literal["two-dim", "two-dim-cot", "direct", "cot"]
METHODS: tuple[Method, ...] = ("two-dim", "two-dim-cot", "direct", "cot")
DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FILE_VALUES: ContextVar[dict[str, Any] | None] = ContextVar("_FILE_VALUES", default=None)


class OptionsFileSource(PydanticBaseSettingsSource):
    """The values of the options file a command names (``--config`` for the judge's options,
    ``--settings`` for the server's): below flags and the environment, above the defaults.
    :func:`options_file` sets them while a settings model is built."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return (_FILE_VALUES.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_VALUES.get() or {})


@contextmanager
def options_file(path: str | Path | None) -> Iterator[None]:
    """While the block runs, :class:`OptionsFileSource` reads the values of ``path`` (TOML or
    JSON; none without a path)."""
    token = _FILE_VALUES.set(read_options_file(Path(path)) if path else {})
    try:
        yield
    finally:
        _FILE_VALUES.reset(token)


class LayeredSettings(BaseSettings):
    """Settings read from the keyword arguments (a command's flags), else the environment,
    else the options file of :func:`options_file`, else the defaults: no ``.env`` file, no
    secrets directory. The judge's options and the server's settings both layer so."""

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, OptionsFileSource(settings_cls)


class JudgeConfig(LayeredSettings):
    """Everything that decides how the judge talks to a model and scores turns."""

    model_config = SettingsConfigDict(env_prefix="DST_JUDGE_", extra="forbid",
                                      populate_by_name=True, frozen=True, allow_inf_nan=False)

    # --- endpoint -----------------------------------------------------------------------------
    base_url: str | None = Field(
        None, validation_alias=AliasChoices("base_url", "DST_JUDGE_BASE_URL", "OPENAI_BASE_URL"),
        description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1.")
    api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("api_key", "DST_JUDGE_API_KEY", "OPENAI_API_KEY"),
        description="API key; never written to any file or message.")
    organization: str | None = Field(
        None, validation_alias=AliasChoices("organization", "DST_JUDGE_ORGANIZATION",
                                            "OPENAI_ORG_ID"),
        description="Sent as the OpenAI-Organization header when set.")
    project: str | None = Field(
        None, validation_alias=AliasChoices("project", "DST_JUDGE_PROJECT", "OPENAI_PROJECT_ID"),
        description="Sent as the OpenAI-Project header when set.")
    model: str = Field("gpt-4-turbo", description="Model name as the endpoint knows it.")
    # --- generation ---------------------------------------------------------------------------
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (the "
                               "paper: 0).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass (the paper: 1).")
    seed: int | None = Field(None, description="Sampling seed, where the server honours one.")
    max_tokens: int = Field(1024, ge=16, description="Reply length cap; a reply cut there is an "
                            "error row (truncated), never a verdict.")
    response_format: Literal["json_schema", "json_object", "text"] = Field(
        "json_schema", description="How to ask for JSON: json_schema where the server supports "
        "it (OpenAI gpt-4o and later, llama-server), json_object (gpt-4-turbo), or text.")
    # --- transport ----------------------------------------------------------------------------
    timeout: float = Field(120.0, gt=0, description="Seconds per request.")
    max_retries: int = Field(4, ge=0, description="Retries on timeouts, connection errors, "
                             "429 and 5xx (exponential backoff with jitter).")
    concurrency: int = Field(8, ge=1, description="Requests in flight at once.")
    http_backend: Literal["aiohttp", "httpx"] = Field(
        "aiohttp", description="HTTP stack of live calls: aiohttp (default; about 0.35 ms of "
        "client CPU per call) or httpx (several times that at high concurrency).")
    reasks: int = Field(1, ge=0, description="Re-asks after an invalid answer.")
    rpm: int | None = Field(None, ge=1, description="Requests per minute at most.")
    tpm: int | None = Field(None, ge=1, description="Tokens per minute at most (estimated).")
    stop_grace: float = Field(10.0, ge=0, description="Seconds calls in flight may take to "
                              "finish (and be recorded) after Ctrl-C, SIGTERM or the budget "
                              "stops a run.")
    prompt_cache_key: bool = Field(False, description="Send a per-dialogue prompt_cache_key "
                                   "(OpenAI) so a dialogue's calls share a cache route.")
    # --- untrusted replies --------------------------------------------------------------------
    max_reply_bytes: int = Field(1_000_000, ge=1024, description="Largest reply accepted, "
                                 "counted both as received (compressed) and decompressed; "
                                 "reading stops there and the call is an error row.")
    max_reply_depth: int = Field(64, ge=8, le=10_000, description="Deepest JSON nesting "
                                 "accepted in a reply.")
    max_reply_chars: int = Field(100_000, ge=1000, description="Longest message content "
                                 "accepted (characters); a longer one is an error row.")
    # --- Batch API ----------------------------------------------------------------------------
    batch_max_requests: int = Field(50_000, ge=1, description="Requests per Batch API request "
                                    "file (the API's limit: 50,000); more go into further "
                                    "files, one batch each.")
    batch_max_bytes: int = Field(200_000_000, ge=10_000, description="Bytes per Batch API "
                                 "request file (the API's limit: 200 MB).")
    # --- cost ---------------------------------------------------------------------------------
    budget: float | None = Field(None, gt=0, description="Stop cleanly (resumable) once the "
                                 "run has spent this many USD.")
    prices: Path | None = Field(None, description="Price table (JSON); default: packaged.")
    # --- method -------------------------------------------------------------------------------
    method: Method = Field("two-dim", description="two-dim (the paper's method), two-dim-cot, "
                           "direct or cot (the paper's baselines).")
    prompt_variant: Literal["zero-shot", "few-shot"] = Field(
        "zero-shot", description="few-shot adds worked examples (small local models need them).")
    semantics: Literal["default", "paper"] = Field(
        "default", description="How replies are filtered and integrated into verdicts: paper "
        "reproduces the reference implementation, default fixes its known flaws. It changes "
        "filtering and integration only, never the requests sent.")
    rule_match: Literal["exact", "nospace"] | None = Field(
        None, description="RULE verdict matching; default: exact for single-prompt methods, "
        "nospace for two-prompt methods (as the reference scripts).")
    # --- cache --------------------------------------------------------------------------------
    cache_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_cache_dir("dst-judge")),
                            description="Reply cache directory.")
    use_cache: bool = True

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        """An http(s) URL with a host (and a valid port), without its trailing slash."""
        if not value:
            return value
        try:
            parts = urlsplit(value)
            port = parts.port  # raises ValueError when out of range or not a number
        except ValueError as exc:
            raise ValueError(f"not a valid URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host, e.g. "
                             "http://127.0.0.1:8080/v1")
        if port == 0:
            raise ValueError("port 0 is not a port a server listens on")
        return value.rstrip("/")

    @property
    def endpoint(self) -> str:
        """The base URL to call, without a trailing slash."""
        return self.base_url or DEFAULT_BASE_URL

    @property
    def secret(self) -> str | None:
        """The API key in clear, for the request header and for redaction only."""
        return self.api_key.get_secret_value() if self.api_key else None

    @property
    def effective_rule_match(self) -> Literal["exact", "nospace"]:
        if self.rule_match is not None:
            return self.rule_match
        return "exact" if self.method in ("direct", "cot") else "nospace"

    def generation_identity(self) -> dict[str, Any]:
        """The settings that can change a model's answer: part of every cache key."""
        return {"endpoint": self.endpoint, "model": self.model, "temperature": self.temperature,
                "top_p": self.top_p, "seed": self.seed, "max_tokens": self.max_tokens,
                "response_format": self.response_format}

    def answer_identity(self) -> dict[str, Any]:
        """Everything that decides which calls a run makes and what they answer (resume
        refuses to continue a run when this changed); written to run manifests, so a password
        in the base URL is masked."""
        return {**self.generation_identity(), "endpoint": public_url(self.endpoint),
                "method": self.method,
                "prompt_variant": self.prompt_variant, "reasks": self.reasks,
                "prompt_cache_key": self.prompt_cache_key}

    def public_dict(self) -> dict[str, Any]:
        """Every option for results and logs, with the API key left out (and a password in
        the base URL masked)."""
        data = self.model_dump(mode="json", exclude={"api_key"})
        data["api_key_set"] = self.api_key is not None
        data["base_url"] = public_url(self.base_url) if self.base_url else None
        data["endpoint"] = public_url(self.endpoint)
        data["effective_rule_match"] = self.effective_rule_match
        return data


def public_url(url: str) -> str:
    """A URL safe to write down: the password of ``user:password@host`` masked."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:<redacted>@{host}"))


def read_options_file(path: Path) -> dict[str, Any]:
    """A JSON or TOML file of options (``a-b`` keys as ``a_b``): a judge config file, or
    ``dst-judge serve --settings``; a parse error names the file and line."""
    if not path.is_file():
        raise InputError("config file not found", path=path)
    text = read_text(path)
    try:
        data = _parse_config_text(text, path)
    except json.JSONDecodeError as exc:
        raise InputError(f"cannot parse config file: {exc.msg} (column {exc.colno})", path=path,
                         line=exc.lineno) from None
    except ValueError as exc:
        # tomllib reports the place only in its message: "... (at line 2, column 5)"
        found = re.search(r"at line (\d+), column (\d+)", str(exc))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line = int(found.group(1)) if found else None
        column = f" (column {found.group(2)})" if found else ""
        raise InputError(f"cannot parse config file: {reason}{column}", path=path,
                         line=line) from None
    if not isinstance(data, dict):
        raise InputError("a config file must hold a table/object of options", path=path)
    return {key.replace("-", "_"): value for key, value in data.items()}


def _parse_config_text(text: str, path: Path) -> Any:
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10
            import tomli as tomllib
        return tomllib.loads(text)
    return loads(text)


def load_config(cli_values: dict[str, Any] | None = None,
                config_file: str | Path | None = None) -> JudgeConfig:
    """Build the configuration from CLI values (None means "not given"), environment and file."""
    values = {k: v for k, v in (cli_values or {}).items() if v is not None}
    with options_file(config_file):
        try:
            return JudgeConfig(**values)
        except ValidationError as exc:
            problem = first_problem(exc)
            raise OptionError(f"{problem.path or 'option'}: {problem.message}") from None
