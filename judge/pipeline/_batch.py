"""Batch API request files written from an evaluation plan (the same bodies a live run sends),
and the answers of a finished batch matched back to every call.

The Batch API takes at most 50,000 requests and 200 MB per input file, so requests are split
into numbered files (``requests-001.jsonl``, ...; one batch each) at whichever limit comes
first. Calls whose request bodies are identical (the same history and state in two turns)
are written and paid for once: collecting fans the answer out to every call with that body.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import JudgeConfig
from .._digest import file_digest, text_digest
from .._errors import InputError, ModelError, OptionError
from .._io import iter_jsonl_lines, open_output, read_json, write_text
from ..model import CHAT_URL, Completion, call_key, submit
from ._plan import EvaluationPlan, PlannedCall

BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_BYTES = 200_000_000

Records = dict[tuple[str, int, str], Completion | ModelError]


@dataclass
class RequestFiles:
    """What ``write_requests`` wrote: the files (one batch each) and the request counts."""

    files: list[Path] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    calls: int = 0
    """Planned calls (skipped ones excluded)."""
    duplicates: int = 0
    """Calls whose body another call already carries (answered by that call's line)."""

    @property
    def requests(self) -> int:
        return sum(self.counts)


def distinct_calls(plan: EvaluationPlan) -> Iterator[tuple[PlannedCall, bool]]:
    """Every planned call with whether its body is the first of its kind in plan order."""
    seen: set[str] = set()
    for call in plan.calls:
        digest = text_digest(call.body)
        yield call, digest not in seen
        seen.add(digest)


def part_path(path: Path, number: int) -> Path:
    """``requests.jsonl`` → ``requests-003.jsonl``."""
    return path.with_name(f"{path.stem}-{number:03d}{path.suffix}")


def _stale_parts(path: Path, keep: int) -> list[Path]:
    pattern = re.compile(re.escape(path.stem) + r"-(\d{3})" + re.escape(path.suffix) + "$")
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.iterdir()
                  if (m := pattern.match(p.name)) and int(m.group(1)) > keep)


def _request_line(call: PlannedCall) -> bytes:
    return (json.dumps({"custom_id": call.custom_id, "method": "POST", "url": CHAT_URL,
                        "body": call.body}, ensure_ascii=False) + "\n").encode("utf-8")


def _split(sizes: Sequence[int], max_requests: int, max_bytes: int) -> list[int]:
    """How many of the lines (of these sizes, in order) go into each file."""
    counts: list[int] = []
    used = 0
    for size in sizes:
        if not counts or counts[-1] >= max_requests or used + size > max_bytes:
            counts.append(0)
            used = 0
        counts[-1] += 1
        used += size
    return counts or [0]


def write_requests(plan: EvaluationPlan, path: str | Path, *, max_requests: int | None = None,
                   max_bytes: int | None = None) -> RequestFiles:
    """Write one Batch API request line per distinct request body (skipped calls need none),
    split into files of at most ``max_requests`` lines and ``max_bytes`` bytes (defaults:
    the config's ``batch_max_requests`` and ``batch_max_bytes``).

    One file is written to ``path`` itself; more are numbered beside it
    (``requests-001.jsonl``, ...), and numbered files of an earlier, larger split are removed
    so that ``batch submit DIR`` never sends stale requests. The split is decided first (a
    pass that only measures lines), so no file is ever renamed or written twice.
    """
    target = Path(path)
    max_requests = max_requests or plan.config.batch_max_requests
    max_bytes = max_bytes or plan.config.batch_max_bytes
    out = RequestFiles()
    sizes: list[int] = []
    for call, first in distinct_calls(plan):
        out.calls += 1
        if not first:
            out.duplicates += 1
            continue
        size = len(_request_line(call))
        if size > max_bytes:
            raise OptionError(f"the request of {call.custom_id} alone has {size:,} bytes, "
                              f"more than batch_max_bytes ({max_bytes:,})")
        sizes.append(size)
    out.counts = _split(sizes, max_requests, max_bytes)
    out.files = [target] if len(out.counts) == 1 else [
        part_path(target, n + 1) for n in range(len(out.counts))]
    lines = (_request_line(call) for call, first in distinct_calls(plan) if first)
    for file, count in zip(out.files, out.counts, strict=True):
        written = 0
        with open_output(file, "wb") as handle:
            for _ in range(count):
                line = next(lines)
                handle.write(line)
                written += len(line)
        out.sizes.append(written)
    for stale in _stale_parts(target, len(out.files) if len(out.files) > 1 else 0):
        stale.unlink(missing_ok=True)
    return out


def fan_out(plan: EvaluationPlan, records: Records) -> Records:
    """Records for every planned call: a call whose body was sent once under another call's
    custom id gets that call's answer (the same body, the same answer), marked as not billed
    again."""
    by_body: dict[str, Completion | ModelError] = {}
    for call in plan.calls:
        found = records.get(call_key(call.dialogue_id, call.turn_index, call.dimension))
        if found is not None:
            by_body.setdefault(text_digest(call.body), found)
    out = dict(records)
    for call in plan.calls:
        key = call_key(call.dialogue_id, call.turn_index, call.dimension)
        if key not in out:
            shared = by_body.get(text_digest(call.body))
            if isinstance(shared, Completion):  # paid for once, by the call that carried it
                out[key] = dataclasses.replace(shared, cached=True)
            elif shared is not None:
                out[key] = shared
    return out


# --- submitted batches -------------------------------------------------------------------------

RECORD = "batches.json"
RECORD_FORMAT = 1


def request_files(paths: Sequence[str | Path]) -> list[Path]:
    """Request files named directly or found in directories (their ``*.jsonl`` files, in name
    order, except output and error files that ``batch collect`` downloads)."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.jsonl")
                           if not p.name.endswith((".output.jsonl", ".errors.jsonl")))
            if not found:
                raise InputError("no request files (*.jsonl) in this directory", path=path)
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError("request file not found", path=path)
    return files


def default_record(files: Sequence[Path]) -> Path:
    """Where ``batch submit`` records batch ids by default: beside the first request file."""
    return files[0].parent / RECORD


def read_record(path: str | Path) -> list[dict[str, Any]]:
    """The batches a record file lists (each with ``id``, ``file``, ``sha256``, ``requests``)."""
    data = read_json(path)
    entries = data.get("batches") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError("a batch record is a JSON object with a 'batches' list", path=path,
                         field="batches")
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) \
                or not entry["id"]:
            raise InputError("each batch needs an 'id' string", path=path,
                             field=f"batches[{n}].id")
    return entries


def record_ids(path: str | Path) -> list[str]:
    return [entry["id"] for entry in read_record(path)]


async def submit_files(config: JudgeConfig, files: Sequence[Path], record: Path, *,
                       resubmit: bool = False, http_client: Any = None,
                       on_submitted: Callable[[dict[str, Any]], None] | None = None,
                       ) -> list[dict[str, Any]]:
    """Submit each request file as one batch, adding each batch to ``record`` as soon as it
    exists (a later failure never loses the id of a batch that is already paid for).

    A file the record lists as submitted, with the same content, is refused unless
    ``resubmit``: sending it again would pay for every request twice.
    """
    entries = read_record(record) if record.is_file() else []
    digests = {path: file_digest(path) for path in files}
    if not resubmit:
        for path in files:
            for entry in entries:
                if entry.get("sha256") == digests[path]:
                    raise OptionError(f"{path} was already submitted as batch {entry['id']} "
                                      f"(recorded in {record}); pass --resubmit to pay for it "
                                      "again")
    submitted = []
    for path in files:
        batch = await submit(config, path, http_client=http_client)
        entry = {"id": batch.get("id"), "file": str(path.resolve()), "sha256": digests[path],
                 "requests": sum(1 for _ in iter_jsonl_lines(path)),
                 "status": batch.get("status")}
        entries.append(entry)
        write_text(record, json.dumps({"format": RECORD_FORMAT, "batches": entries}, indent=2,
                                      ensure_ascii=False) + "\n")
        submitted.append(entry)
        if on_submitted is not None:
            on_submitted(entry)
    return submitted
