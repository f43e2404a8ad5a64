"""Batch API request files written from an evaluation plan (the same bodies a live run sends),
and the answers of a finished batch matched back to every call.

The Batch API takes at most 50,000 requests and 200 MB per input file, so requests are split
into numbered files (``requests-001.jsonl``, ...; one batch each) at whichever limit comes
first. Calls whose request bodies are identical (the same history and state in two turns)
are written and paid for once: collecting fans the answer out to every call with that body.

Several systems judged on the same dialogues share one set of request files: each distinct
body is written once across them all, under the custom id of the first call that carries it,
qualified by that call's system (:func:`~judge.model.system_custom_id`; the systems' calls
share dialogue, turn and dimension).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import JudgeConfig
from .._digest import file_digest, text_digest
from .._errors import InputError, ModelError, OptionError
from .._io import iter_jsonl_lines, open_output, read_json, write_text
from ..model import (
    CHAT_URL,
    Completion,
    call_key,
    find_batch,
    parse_custom_id,
    submit,
    system_custom_id,
)
from ._plan import EvaluationPlan, PlannedCall

BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_BYTES = 200_000_000

Records = dict[tuple[str, int, str], Completion | ModelError]
System = tuple[str | None, EvaluationPlan]
"""A plan and the name that qualifies its custom ids (None: one system alone, plain ids)."""


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
    answered: int = 0
    """Calls left out because they are answered elsewhere (``answered``)."""
    separate: int = 0
    """Requests that separate request files, one set per system, would hold."""
    systems: int = 1
    """Systems sharing the files (their custom ids name the system when more than one)."""

    @property
    def requests(self) -> int:
        return sum(self.counts)


def distinct_calls(plan: EvaluationPlan) -> Iterator[tuple[PlannedCall, bool]]:
    """Every planned call with whether its body is the first of its kind in plan order."""
    for _, call, first in _distinct_lines([(None, plan)]):
        yield call, first


def line_id(system: str | None, call: PlannedCall) -> str:
    """The custom id of the request line that carries ``call`` (qualified by its system)."""
    if system is None:
        return call.custom_id
    return system_custom_id(system, call.dialogue_id, call.turn_index, call.dimension)


def _line_key(system: str | None, call: PlannedCall) -> tuple[str, int, str] | None:
    """How :func:`~judge.model.read_output` keys the line that ``call`` would carry."""
    return parse_custom_id(line_id(system, call))


def _distinct_lines(systems: Sequence[System]) -> Iterator[tuple[str | None, PlannedCall, bool]]:
    """Every call of every system, in order, with whether its body is the first of its kind
    across all of them."""
    seen: set[str] = set()
    for name, plan in systems:
        for call in plan.calls:
            digest = text_digest(call.body)
            yield name, call, digest not in seen
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


def _request_line(system: str | None, call: PlannedCall) -> bytes:
    return (json.dumps({"custom_id": line_id(system, call), "method": "POST", "url": CHAT_URL,
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


def write_requests(plans: EvaluationPlan | Sequence[EvaluationPlan], path: str | Path, *,
                   names: Sequence[str] | None = None, max_requests: int | None = None,
                   max_bytes: int | None = None,
                   answered: Collection[str] = ()) -> RequestFiles:
    """Write one Batch API request line per distinct request body (skipped calls need none),
    split into files of at most ``max_requests`` lines and ``max_bytes`` bytes (defaults:
    the config's ``batch_max_requests`` and ``batch_max_bytes``).

    Several plans (systems on the same dialogues, ``names`` from
    :func:`~judge.pipeline.system_dirs`) share the files: a body is written once across all
    of them, its custom id qualified by the system of the first call carrying it.

    ``answered``: custom ids (:func:`line_id`) of calls answered elsewhere (a ledger of
    replies already paid for); they get no line.

    One file is written to ``path`` itself; more are numbered beside it
    (``requests-001.jsonl``, ...), and numbered files of an earlier, larger split are removed
    so that ``batch submit DIR`` never sends stale requests. The split is decided first (a
    pass that only measures lines), so no file is ever renamed or written twice.
    """
    systems = _systems(plans, names)
    target = Path(path)
    config = systems[0][1].config
    max_requests = max_requests or config.batch_max_requests
    max_bytes = max_bytes or config.batch_max_bytes
    out = RequestFiles(systems=len(systems))
    out.separate = sum(len({text_digest(c.body) for c in plan.calls}) for _, plan in systems)
    sizes: list[int] = []
    keys: set[tuple[str, int, str] | None] = set()
    for name, call, first in _distinct_lines(systems):
        out.calls += 1
        if answered and line_id(name, call) in answered:
            out.answered += 1
            continue
        if not first:
            out.duplicates += 1
            continue
        key = _line_key(name, call)
        if key in keys:  # read_output could not tell the two lines apart
            raise OptionError(f"two request lines would share the custom id "
                              f"{line_id(name, call)!r} (system names that differ only in "
                              "case?); rename a system")
        keys.add(key)
        size = len(_request_line(name, call))
        if size > max_bytes:
            raise OptionError(f"the request of {line_id(name, call)} alone has {size:,} "
                              f"bytes, more than batch_max_bytes ({max_bytes:,})")
        sizes.append(size)
    out.counts = _split(sizes, max_requests, max_bytes)
    out.files = [target] if len(out.counts) == 1 else [
        part_path(target, n + 1) for n in range(len(out.counts))]
    lines = (_request_line(name, call) for name, call, first in _distinct_lines(systems)
             if first and not (answered and line_id(name, call) in answered))
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


def _systems(plans: EvaluationPlan | Sequence[EvaluationPlan],
             names: Sequence[str] | None) -> list[System]:
    """One plan alone keeps plain custom ids; several need a name each."""
    if isinstance(plans, EvaluationPlan):
        plans = [plans]
    if names is None:
        if len(plans) != 1:
            raise OptionError("several systems share request files only with a name each")
        return [(None, plans[0])]
    if len(names) != len(plans) or len(set(names)) != len(names):
        raise OptionError("each system needs its own name")
    return list(zip(names, plans, strict=True))


def fan_out(plan: EvaluationPlan, records: Records) -> Records:
    """Records for every planned call: a call whose body was sent once under another call's
    custom id gets that call's answer (the same body, the same answer), marked as not billed
    again."""
    return fan_out_systems([(None, plan)], records)[0]


def fan_out_systems(systems: Sequence[System], records: Records) -> list[Records]:
    """Records for every call of every system, keyed by the call (as one system alone keys
    them): a call answers from its own line, else from the line of any call, of any system,
    that carried the same body, marked as not billed again."""
    by_body: dict[str, Completion | ModelError] = {}
    own: list[Records] = []
    for name, plan in systems:
        mine: Records = {}
        for call in plan.calls:
            line = _line_key(name, call)
            found = records.get(line) if line is not None else None
            if found is not None:
                mine[call_key(call.dialogue_id, call.turn_index, call.dimension)] = found
                by_body.setdefault(text_digest(call.body), found)
        own.append(mine)
    out: list[Records] = []
    for (_, plan), mine in zip(systems, own, strict=True):
        answered = dict(mine)
        for call in plan.calls:
            key = call_key(call.dialogue_id, call.turn_index, call.dimension)
            if key in answered:
                continue
            shared = by_body.get(text_digest(call.body))
            if isinstance(shared, Completion):  # paid for once, by the call that carried it
                answered[key] = dataclasses.replace(shared, cached=True)
            elif shared is not None:
                answered[key] = shared
        out.append(answered)
    return out


def line_keys(systems: Sequence[System]) -> set[tuple[str, int, str] | None]:
    """The keys of every line these systems' calls could be answered by (their own)."""
    return {_line_key(name, call) for name, plan in systems for call in plan.calls}


# --- submitted batches -------------------------------------------------------------------------

RECORD = "batches.json"
RECORD_FORMAT = 1
FILE_TAG = "dst_judge_file"
"""The metadata key of a batch's request-file sha256."""
ADOPT_WITHIN = 26 * 3600.0
"""How old a batch found at the provider for an unrecorded file may be (its 24 h window)."""
_GONE = ("failed", "expired", "cancelled", "cancelling")


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
    ``resubmit``: sending it again would pay for every request twice. Each batch carries its
    file's sha256 as metadata; a file the record does not list is first looked up at the
    provider by it (created within :data:`ADOPT_WITHIN` seconds and not failed, expired or
    cancelled): a batch found there is recorded instead of paying again (its creation's reply
    was lost, or the record was). ``resubmit`` skips the look-up.
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
        tags = {FILE_TAG: digests[path]}
        found = None if resubmit else await find_batch(
            config, tags, since=time.time() - ADOPT_WITHIN, http_client=http_client)
        if found is not None and found.get("status") in _GONE:
            found = None
        batch = found or await submit(config, path, http_client=http_client, metadata=tags)
        entry = {"id": batch.get("id"), "file": str(path.resolve()), "sha256": digests[path],
                 "requests": sum(1 for _ in iter_jsonl_lines(path, max_string=None)),
                 "status": batch.get("status"), **({"found": True} if found else {})}
        entries.append(entry)
        write_text(record, json.dumps({"format": RECORD_FORMAT, "batches": entries}, indent=2,
                                      ensure_ascii=False) + "\n")
        submitted.append(entry)
        if on_submitted is not None:
            on_submitted(entry)
    return submitted
