"""Chat-completions request bodies: one builder, so live calls, Batch API lines, the cache key
and the dry-run estimate all see the same bytes."""

from __future__ import annotations

from typing import Any

from .._config import JudgeConfig
from ._parse import response_schema
from ._prompts import Dimension


def build_body(config: JudgeConfig, messages: list[dict[str, str]], dimension: Dimension,
               *, dialogue_id: str | None = None) -> dict[str, Any]:
    """The chat-completions request body; live calls and Batch API lines share it."""
    body: dict[str, Any] = {"model": config.model, "messages": messages,
                            "temperature": config.temperature, "top_p": config.top_p,
                            "max_tokens": config.max_tokens}
    if config.seed is not None:
        body["seed"] = config.seed
    if config.response_format == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": f"dst_judge_{dimension}", "schema": response_schema(dimension),
            "strict": False}}
    elif config.response_format == "json_object":
        body["response_format"] = {"type": "json_object"}
    if config.prompt_cache_key and dialogue_id:
        body["prompt_cache_key"] = f"dst-judge:{dimension}:{dialogue_id}"[:64]
    return body
