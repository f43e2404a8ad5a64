"""OpenAI Batch API: custom ids, submit, poll, download, and read finished output files.

Request lines carry the same body a live call would send, with ``custom_id`` =
``<dialogue_id>::<turn_index>::<dimension>``; reading an output file yields completions that
feed the very same parsing, filters and integration as live calls.

Output files are untrusted like live replies: each line is read with the JSON depth limit and
its body validated by the same models (:func:`~judge.model.completion_from_body`); a bad body
is an error row for its call. Downloads are streamed line by line with the API key removed,
and every error the SDK reports (a 401 body echoes the key) is redacted before it is shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import httpx

from .._config import JudgeConfig
from .._errors import InputError, JSONTooDeep, ModelError, ReplyError
from .._io import iter_jsonl_lines, json_error_message, loads, open_output, printable
from ..data import dialogue_key
from ._reply import Completion, ReplyLimits, completion_from_body, redact

if TYPE_CHECKING:
    import openai

CHAT_URL: Final = "/v1/chat/completions"
ID_SEPARATOR = "::"
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]")
_CUSTOM_ID = re.compile(r'^\s*\{\s*(?:"id"\s*:\s*"[^"\\]*"\s*,\s*)?'
                        r'"custom_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
"""A record's custom id read without parsing it (as OpenAI writes records: first or second)."""


def custom_id(dialogue_id: str, turn_index: int, dimension: str) -> str:
    """Batch API id of one call: ``<dialogue_id>::<turn_index>::<dimension>``."""
    return f"{dialogue_id}{ID_SEPARATOR}{turn_index}{ID_SEPARATOR}{dimension}"


def system_custom_id(system: str, dialogue_id: str, turn_index: int, dimension: str) -> str:
    """Batch API id of one call of one of several systems sharing request files:
    ``<system>::<dialogue_id>::<turn_index>::<dimension>`` (their calls share the rest)."""
    return custom_id(f"{system}{ID_SEPARATOR}{dialogue_id}", turn_index, dimension)


def call_key(dialogue_id: str, turn_index: int, dimension: str) -> tuple[str, int, str]:
    """Join key of a call, tolerant of dialogue-id spellings (``SNG0073`` = ``SNG0073.json``)."""
    return dialogue_key(dialogue_id), turn_index, dimension


def parse_custom_id(value: str) -> tuple[str, int, str] | None:
    parts = value.rsplit(ID_SEPARATOR, 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return call_key(parts[0], int(parts[1]), parts[2])


def read_output(path: str | Path, *, limits: ReplyLimits | None = None,
                secret: str | None = None,
                bodies: dict[tuple[str, int, str], bytes] | None = None,
                ) -> dict[tuple[str, int, str], Completion | ModelError]:
    """Completions (or per-request errors) by call key from a batch output or error file.

    A line that is not a batch output record at all (bad JSON, nested too deep, no
    ``custom_id``) is an :class:`~judge.InputError` naming file, line and field; a record whose
    reply is malformed, too large or too deep is a :class:`~judge.errors.ReplyError` for its call.

    ``bodies``, when given, receives the raw body of every HTTP 200 reply within the limits
    (as a live reply would be recorded, for a ledger to keep what the batch paid for).
    """
    limits = limits or ReplyLimits()
    records: dict[tuple[str, int, str], Completion | ModelError] = {}
    for line, text in iter_jsonl_lines(path, max_string=None):  # replies: ReplyLimits
        try:
            # the reply body sits three levels down in the record
            item = loads(text, max_depth=limits.max_depth + 3)
        except JSONTooDeep as exc:
            # a record nested too deep is its call's error, when the call can be told
            found = _CUSTOM_ID.search(text)
            key = parse_custom_id(json.loads(f'"{found.group(1)}"')) if found else None
            if key is None:
                raise InputError(json_error_message(exc), path=path, line=line) from None
            records[key] = ReplyError(f"the reply's JSON is nested deeper than "
                                      f"{limits.max_depth} levels (max_reply_depth)")
            continue
        except json.JSONDecodeError as exc:
            raise InputError(json_error_message(exc), path=path, line=line) from None
        if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
            raise InputError("a batch output line needs a 'custom_id' string", path=path,
                             line=line, field="custom_id")
        key = parse_custom_id(item["custom_id"])
        if key is None:
            shown = printable(item["custom_id"][:80], newlines=False)
            raise InputError(f"custom_id {shown!r} is not "
                             "'<dialogue_id>::<turn_index>::<dimension>'", path=path, line=line,
                             field="custom_id")
        if len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes + 4096:
            records[key] = ReplyError(f"the batch output line has more than "
                                      f"{limits.max_bytes:,} bytes (max_reply_bytes)")
            continue
        records[key] = _completion_or_error(item, path=path, line=line, limits=limits,
                                            secret=secret)
        if bodies is not None and isinstance(records[key], Completion):
            body = item["response"]["body"]
            bodies[key] = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return records


def _error_text(value: Any, secret: str | None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)[:300]
    return redact(printable(text[:300], newlines=False), secret) or ""


def _completion_or_error(item: dict[str, Any], *, path: str | Path, line: int,
                         limits: ReplyLimits, secret: str | None) -> Completion | ModelError:
    error = item.get("error")
    response = item.get("response")
    if error:
        reason = error.get("message") if isinstance(error, dict) else error
        return ModelError(f"batch request failed: {_error_text(reason, secret)}")
    if not isinstance(response, dict):
        raise InputError("a batch output line needs 'response' or 'error'", path=path, line=line,
                         field="response")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200 or not isinstance(body, dict):
        message: Any = body
        if isinstance(body, dict):
            inner = body.get("error")
            message = inner.get("message") if isinstance(inner, dict) else inner
        code = status if isinstance(status, int) and not isinstance(status, bool) else None
        return ModelError(f"HTTP {_error_text(status, None)}: {_error_text(message, secret)}",
                          status=code)
    try:
        return completion_from_body(body, limits=limits, secret=secret)
    except ReplyError as exc:
        return exc


@asynccontextmanager
async def _sdk(config: JudgeConfig, http_client: httpx.AsyncClient | None,
               what: str) -> AsyncIterator[openai.AsyncOpenAI]:
    """An SDK client for one Batch API step; its errors stop the command, naming the step,
    with the key removed from the server's words (a 401 body quotes it). The SDK is imported
    here, not with the module: it takes seconds, and only the Batch API steps use it."""
    import openai

    client = openai.AsyncOpenAI(api_key=config.secret or "not-needed", base_url=config.endpoint,
                                max_retries=2, organization=config.organization,
                                project=config.project, timeout=config.timeout,
                                http_client=http_client)
    try:
        yield client
    except openai.OpenAIError as exc:
        status = getattr(exc, "status_code", None)
        message = redact(printable(str(exc)[:500], newlines=False), config.secret)
        raise ModelError(f"batch {what} failed: {message}", fatal=True,
                         status=status if isinstance(status, int) else None) from None
    finally:
        await client.close()


def _public(batch: Any, secret: str | None) -> dict[str, Any]:
    """A batch object as a dict, every string redacted and printable."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(printable(value, newlines=False), secret)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {str(clean(k)): clean(v) for k, v in value.items()}
        return value

    return clean(batch.model_dump(mode="json"))


async def submit(config: JudgeConfig, requests: str | Path, *,
                 http_client: httpx.AsyncClient | None = None,
                 metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """Upload a request file and create a batch; returns the batch object as a dict.

    The creation is never retried by the SDK: a retry after a lost reply would create (and
    pay for) a second batch. A caller that must not submit twice tags the batch with
    ``metadata`` and looks for it with :func:`find_batch` before trying again."""
    path = Path(requests)
    if not path.is_file():
        raise InputError("request file not found", path=path)
    async with _sdk(config, http_client, "submit") as client:
        with path.open("rb") as handle:
            uploaded = await client.files.create(file=handle, purpose="batch")
        batch = await client.with_options(max_retries=0).batches.create(
            input_file_id=uploaded.id, endpoint=CHAT_URL, completion_window="24h",
            metadata={"source": "dst-judge", **(metadata or {})})
    return _public(batch, config.secret)


FIND_LIMIT = 2_000
"""Batches :func:`find_batch` looks through at most (newest first)."""
CLOCK_SLACK = 3600.0
"""How far the provider's clock may lag ours for :func:`find_batch` to still find a batch."""


async def find_batch(config: JudgeConfig, metadata: dict[str, str], *, since: float,
                     http_client: httpx.AsyncClient | None = None) -> dict[str, Any] | None:
    """The newest batch created at or after ``since`` (Unix time) whose metadata holds every
    pair of ``metadata``, or None: how a submission whose reply was lost (or whose submitter
    died before recording it) is found again instead of paid for twice."""
    async with _sdk(config, http_client, "lookup") as client:
        seen = 0
        async for batch in client.batches.list(limit=100):
            seen += 1
            if batch.created_at < since - CLOCK_SLACK or seen > FIND_LIMIT:
                break  # listed newest first: everything further is older
            tags = batch.metadata or {}
            if all(tags.get(k) == v for k, v in metadata.items()):
                return _public(batch, config.secret)
    return None


async def status(config: JudgeConfig, batch_id: str, *,
                 http_client: httpx.AsyncClient | None = None) -> dict[str, Any]:
    async with _sdk(config, http_client, "status") as client:
        batch = await client.batches.retrieve(batch_id)
    return _public(batch, config.secret)


async def cancel(config: JudgeConfig, batch_id: str, *,
                 http_client: httpx.AsyncClient | None = None) -> dict[str, Any]:
    """Ask the API to stop a batch (requests not yet run are not billed)."""
    async with _sdk(config, http_client, "cancel") as client:
        batch = await client.batches.cancel(batch_id)
    return _public(batch, config.secret)


def safe_file_stem(batch_id: str) -> str:
    """A batch id as part of a file name (nothing that could leave the folder)."""
    return _SAFE_ID.sub("_", batch_id)[:120] or "batch"


async def download(config: JudgeConfig, batch_id: str, directory: str | Path, *,
                   http_client: httpx.AsyncClient | None = None) -> list[Path]:
    """Save a finished batch's output (and error) file, streamed line by line with the key
    removed; returns the paths written."""
    written: list[Path] = []
    async with _sdk(config, http_client, "download") as client:
        batch = await client.batches.retrieve(batch_id)
        if batch.status != "completed" and not batch.output_file_id:
            shown = redact(printable(str(batch.status), newlines=False), config.secret)
            raise ModelError(f"batch {safe_file_stem(batch_id)} is {shown}, not completed",
                             fatal=True)
        folder = Path(directory)
        for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
            if not file_id:
                continue
            target = folder / f"{safe_file_stem(batch_id)}.{kind}.jsonl"
            async with client.files.with_streaming_response.content(file_id) as response:
                with open_output(target) as handle:
                    async for line in response.iter_lines():
                        handle.write((redact(line, config.secret) or "") + "\n")
            written.append(target)
    return written
