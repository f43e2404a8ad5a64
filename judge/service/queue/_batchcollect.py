"""A batch job's last visit: its finished batches' answers into the project's ledger first
(what they paid for is never paid again, by any job), the calls left out of its request files
answered from the ledger, then :func:`judge.pipeline.collect` keeping the run in the job's run
store (:class:`~judge.service.jobs.JobRunLog`) as a live job's run is kept, and the one finish
step of a judge run (:func:`._evaluate.judged`).

The run is kept as an ``evaluate`` run (``retry-errors`` continues it live) whose manifest
carries what the job submitted under ``batch``; its log goes with the job's outcome, in the
transaction of its status (:class:`~judge.service.jobs.HeldRecords`).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..._config import JudgeConfig
from ..._errors import ModelError, ReplyError
from ...model import ReplyLimits, call_key, download, parse_chat_reply, read_output
from ...pipeline import collect
from ..db import Database, JobRow, now
from ..jobs import HeldRecords, JobRunLog
from ..ledger import DatabaseLedger, batch_owner
from ._evaluate import judged
from ._inputs import Inputs
from ._runners import Live, Outcome, Park

log = logging.getLogger("dst_judge.service")


async def collect_job(job: JobRow, config: JudgeConfig, endpoint_name: str,
                      loaded: dict[str, Any], rows: list[dict[str, Any]], live: Live,
                      inputs: Inputs, *, db: Database, ledger: DatabaseLedger, run_dir: Path,
                      planned: dict[str, Any] | None, poll_seconds: float) -> Outcome | Park:
    """Collect a batch job whose batches have all ended (``rows``: its batches; ``loaded``:
    its inputs and plan; ``planned``: what it submitted; ``db``: where its run store is;
    ``run_dir``: the folder of its request files, where the output is downloaded). Parks
    the job while another job still holds requests it left out."""
    folder = run_dir / "batch" / "output"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    records: dict[Any, Any] = {}
    bodies: dict[Any, bytes] = {}
    limits = ReplyLimits.from_config(config)
    for row in rows:
        try:
            paths = await download(config, row["batch_id"], folder)
        except ModelError:
            if row["status"] == "completed":
                raise
            continue  # failed, expired or cancelled with no output: its calls are errors
        for path in paths:
            records.update(await asyncio.to_thread(read_output, path, limits=limits,
                                                   secret=config.secret, bodies=bodies))
    plan = loaded["plan"]
    origin = batch_owner(job.id)  # the replies' origin: this job paid for them
    # what the batches paid for is recorded before this job waits on anything, so two
    # batch jobs waiting on each other's requests never wait forever
    keys = loaded["keys"]
    await asyncio.to_thread(record_paid, origin, plan, keys, bodies, ledger)
    from_ledger, waiting = await asyncio.to_thread(
        answers_from_ledger, config, plan, keys, loaded["answered"], ledger, limits)
    if waiting:
        log.info("job %s: %d request(s) it left to other jobs have no reply yet; waiting",
                 job.id, waiting)
        return Park(now() + poll_seconds)
    recorded = await asyncio.to_thread(ledger.count_origin, origin)
    records.update(from_ledger)
    held = HeldRecords()
    # the plan record (kind batch-requests) gives way to the run it planned (force), which
    # keeps it under "batch"; a job collected before (then resumed) continues its own run
    result = await asyncio.to_thread(
        collect, config, loaded["schema"], loaded["dialogues"], loaded["predictions"],
        records, rules=loaded["rules"], sources=loaded["sources"], plan=plan,
        store=JobRunLog(db, job.id, writer=held), force=True,
        kind="evaluate", extra={"batch": planned})
    shutil.rmtree(run_dir, ignore_errors=True)
    return judged(result, endpoint_name, inputs, loaded["corrected"], live,
                  calls={"ledger": {"answered": len(from_ledger), "recorded": recorded}},
                  extra={"batches": [{"id": r["batch_id"], "status": r["status"],
                                      "requests": r["requests"]} for r in rows]},
                  records=held.records)


def record_paid(origin: str, plan: Any, keys: dict[str, str], bodies: dict[Any, bytes],
                ledger: DatabaseLedger) -> None:
    """Put every reply the batches paid for into the project's ledger, before anything else
    can fail: later jobs (live or batch) sending the same request get it free. A key another
    job holds or replied to keeps its row; the job's claims that got no reply become
    failures."""
    paid: dict[str, bytes] = {}
    for call in plan.calls:
        body = bodies.get(call_key(call.dialogue_id, call.turn_index, call.dimension))
        if body is not None:
            paid.setdefault(keys[call.custom_id], body)
    ledger.record_replies(paid.items(), origin=origin)


def answers_from_ledger(config: JudgeConfig, plan: Any, keys: dict[str, str],
                        answered: Collection[str], ledger: DatabaseLedger,
                        limits: ReplyLimits) -> tuple[dict[Any, Any], int]:
    """The answers of the calls left out of the request files, read from the ledger with the
    same checks as a live reply (not billed to this job), and how many requests another job
    still holds (their replies are to come: the job waits). A reply that is not there and
    not to come (the other job's request failed, or retention deleted it) is the call's
    error: ``retry-errors`` sends it."""
    wanted = {call_key(c.dialogue_id, c.turn_index, c.dimension): keys[c.custom_id]
              for c in plan.calls if c.custom_id in answered}
    replies = ledger.replies(wanted.values())
    missing = set(wanted.values()) - set(replies)
    waiting = len(ledger.covered(missing)) if missing else 0
    if waiting:
        return {}, waiting
    out: dict[Any, Any] = {}
    for call, key in wanted.items():
        reply = replies.get(key)
        if reply is None:
            out[call] = ModelError("left out of the batch for a reply the ledger was "
                                   "getting, which never came; retry-errors sends it")
            continue
        try:
            out[call] = parse_chat_reply(reply.content, limits=limits, secret=config.secret,
                                         request_key=key, cached=True)
        except ReplyError as exc:
            out[call] = exc
    return out, 0
