"""OpenAI Batch API: custom ids, submit, poll, download, and read finished output files.

Request lines carry the same body a live call would send, with ``custom_id`` =
``<dialogue_id>::<turn_index>::<dimension>``; reading an output file yields completions that
feed the very same parsing, filters and integration as live calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

from .._config import JudgeConfig
from .._errors import InputError, ModelError
from .._io import iter_jsonl_lines
from ..data import dialogue_key
from ._client import Completion

CHAT_URL = "/v1/chat/completions"
ID_SEPARATOR = "::"
def custom_id(dialogue_id: str, turn_index: int, dimension: str) -> str:
    """Batch API id of one call: ``<dialogue_id>::<turn_index>::<dimension>``."""
    return f"{dialogue_id}{ID_SEPARATOR}{turn_index}{ID_SEPARATOR}{dimension}"


def call_key(dialogue_id: str, turn_index: int, dimension: str) -> tuple[str, int, str]:
    """Join key of a call, tolerant of dialogue-id spellings (``SNG0073`` = ``SNG0073.json``)."""
    return dialogue_key(dialogue_id), turn_index, dimension


def parse_custom_id(value: str) -> tuple[str, int, str] | None:
    parts = value.rsplit(ID_SEPARATOR, 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return call_key(parts[0], int(parts[1]), parts[2])




def read_output(path: str | Path) -> dict[tuple[str, int, str], Completion | ModelError]:
    """Completions (or per-request errors) by call key from a batch output or error file."""
    records: dict[tuple[str, int, str], Completion | ModelError] = {}
    for line, text in iter_jsonl_lines(path):
        try:
            item = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", path=path, line=line) from None
        if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
            raise InputError("a batch output line needs a 'custom_id' string", path=path,
                             line=line, field="custom_id")
        key = parse_custom_id(item["custom_id"])
        if key is None:
            raise InputError(f"custom_id {item['custom_id']!r} is not "
                             "'<dialogue_id>::<turn_index>::<dimension>'", path=path, line=line,
                             field="custom_id")
        records[key] = _completion_or_error(item, path=path, line=line)
    return records


def _completion_or_error(item: dict[str, Any], *, path: str | Path,
                         line: int) -> Completion | ModelError:
    error = item.get("error")
    response = item.get("response")
    if error:
        message = error.get("message") if isinstance(error, dict) else str(error)
        return ModelError(f"batch request failed: {message}")
    if not isinstance(response, dict):
        raise InputError("a batch output line needs 'response' or 'error'", path=path, line=line,
                         field="response")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200 or not isinstance(body, dict):
        message = body.get("error", {}).get("message") if isinstance(body, dict) else body
        return ModelError(f"HTTP {status}: {message}", status=status if isinstance(status, int)
                          else None)
    return Completion.from_chat_json(body)


@asynccontextmanager
async def _sdk(config: JudgeConfig, http_client: httpx.AsyncClient | None,
               what: str) -> AsyncIterator[openai.AsyncOpenAI]:
    """An SDK client for one Batch API step; its errors stop the command, naming the step."""
    client = openai.AsyncOpenAI(api_key=config.secret or "not-needed", base_url=config.endpoint,
                                max_retries=2, organization=config.organization,
                                project=config.project, timeout=config.timeout,
                                http_client=http_client)
    try:
        yield client
    except openai.OpenAIError as exc:
        raise ModelError(f"batch {what} failed: {exc}", fatal=True) from None
    finally:
        await client.close()


async def submit(config: JudgeConfig, requests: str | Path, *,
                 http_client: httpx.AsyncClient | None = None) -> dict[str, Any]:
    """Upload a request file and create a batch; returns the batch object as a dict."""
    async with _sdk(config, http_client, "submit") as client:
        with Path(requests).open("rb") as handle:
            uploaded = await client.files.create(file=handle, purpose="batch")
        batch = await client.batches.create(input_file_id=uploaded.id, endpoint=CHAT_URL,
                                            completion_window="24h",
                                            metadata={"source": "dst-judge"})
    return batch.model_dump(mode="json")


async def status(config: JudgeConfig, batch_id: str, *,
                 http_client: httpx.AsyncClient | None = None) -> dict[str, Any]:
    async with _sdk(config, http_client, "status") as client:
        batch = await client.batches.retrieve(batch_id)
    return batch.model_dump(mode="json")


async def download(config: JudgeConfig, batch_id: str, directory: str | Path, *,
                   http_client: httpx.AsyncClient | None = None) -> list[Path]:
    """Save a finished batch's output (and error) file; returns the paths written."""
    written: list[Path] = []
    async with _sdk(config, http_client, "download") as client:
        batch = await client.batches.retrieve(batch_id)
        if batch.status != "completed" and not batch.output_file_id:
            raise ModelError(f"batch {batch_id} is {batch.status}, not completed", fatal=True)
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
            if file_id:
                content = await client.files.content(file_id)
                target = folder / f"{batch_id}.{kind}.jsonl"
                target.write_bytes(content.read())
                written.append(target)
    return written
