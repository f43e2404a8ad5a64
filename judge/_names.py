"""The names the command line offers as choices (file kinds, formats, scoring profiles, job
statuses, transport options, local models) and the defaults it shows, written once. A root
module that imports nothing, so that building the CLI's parser (``dst-judge --help``) reads
them without loading the stages that use them (pydantic models, httpx, jsonschema). The stages
take their names from here; where a stage derives a list from its own table (formats,
profiles, local models), a test checks that the two agree."""

from __future__ import annotations

from typing import Literal

Kind = Literal["dialogues", "predictions", "schema"]
KINDS: tuple[Kind, ...] = ("dialogues", "predictions", "schema")
"""What a file to convert holds."""

FileKind = Literal["schema", "dialogues", "predictions", "labels", "sample", "corrections"]
FILE_KINDS: tuple[FileKind, ...] = ("schema", "dialogues", "predictions", "labels", "sample",
                                    "corrections")
"""The files ``dst-judge validate`` checks against a bundled JSON Schema."""

FORMAT_NAMES: tuple[str, ...] = (
    "native", "native-schema", "turns", "multiwoz", "sgd", "multiwoz22", "sgd-schema",
    "convlab", "convlab-predictions", "convlab-ontology", "mwzeval", "trade", "somdst", "trippy")
"""Every format ``judge.data`` reads or writes, in its table's order."""

PROFILE_NAMES: tuple[str, ...] = ("trade", "mwzeval", "sgd", "convlab")
"""The scoring profiles of ``judge.metrics`` (other toolkits' rules), in its table's order."""

DEFAULT_LAMBDAS = (0.25, 0.5, 0.75, 1.0)
"""The weights of the flexible goal accuracy reported by default."""

TRANSPORT_OPTIONS = ("base_url", "concurrency", "timeout", "max_retries", "rpm", "tpm", "budget",
                     "cache_dir", "stop_grace")
"""Options ``retry-errors`` may change: they decide how calls travel, not what they answer."""

JobStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled",
                    "stopped"]
"""A service job's status."""

LOCAL_MODELS: dict[str, str] = {
    "1.5b": "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (1.1 GB)",
    "0.5b": "Qwen2.5-Coder-0.5B-Instruct, GGUF Q4 (491 MB; faster, clearly worse)",
}
"""The local models ``judge.model.local`` can set up, by name, with their descriptions."""
DEFAULT_LOCAL_MODEL = "1.5b"
