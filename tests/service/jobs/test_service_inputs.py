"""Inputs of the service held at their edges: uploads (gzip past one block, converted
predictions), bundle members and rows, human labels, slim judgment reads, endpoint settings and
the slot-name warnings of a job. Written against survivors of a sampled mutation run."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa

from judge._errors import ServiceError
from judge.service.auth._auth import Principal, ensure_project
from judge.service.db._db import job_calls, judgments
from judge.service.db._settings import EndpointConfig, UploadCaps
from judge.service.http._bundles import _copy_member, _insert_rows, _last_calls
from judge.service.storage import _reads
from judge.service.storage._files import validate_upload
from judge.service.storage._labels import LabelStore
from judge.service.storage._reads import JudgmentReads
from judge.service.storage._slotcheck import job_warnings
from judge.service.storage._unpack import _CHUNK, unpack_upload
from tests.conftest import EXAMPLES, FIXTURES
from tests.service.conftest import insert_job

MB = 1 << 20


# --- uploads --------------------------------------------------------------------------------


def _text(size: int, seed: int = 7) -> bytes:
    """JSON Lines text of about ``size`` bytes that gzip packs some 3 times (level 1)."""
    rng = random.Random(seed)
    words = [f"w{n:03d}" for n in range(400)]
    pool = [json.dumps({"t": " ".join(rng.choice(words) for _ in range(30))}).encode() + b"\n"
            for _ in range(1000)]
    return b"".join(rng.choices(pool, k=size // len(pool[0]) + 1))


def test_a_gzip_upload_of_many_blocks_unpacks_whole_under_the_ratio_cap(tmp_path):
    """The ratio cap compares the unpacked bytes with every packed byte read so far, not the
    last block's: a 1.5 MB text sent as several 64 KB gzip blocks is not taken for a bomb."""
    plain = _text(3 * MB // 2)
    packed = gzip.compress(plain, compresslevel=1)
    assert len(packed) > 2 * _CHUNK and len(plain) / len(packed) < 20
    caps = UploadCaps(packed=64 * MB, unpacked=64 * MB, ratio=20.0)
    done = unpack_upload(io.BytesIO(packed), tmp_path / "plain", tmp_path / "packed.gz", caps)
    assert (tmp_path / "plain").read_bytes() == plain
    assert done.size == len(plain) and done.packed == len(packed)
    assert done.sha256 == hashlib.sha256(plain).hexdigest()
    assert gzip.decompress((tmp_path / "packed.gz").read_bytes()) == plain


def test_a_gzip_upload_past_the_ratio_cap_is_a_413(tmp_path):
    """The same text under a ratio cap below its own ratio is refused as a possible bomb."""
    packed = gzip.compress(_text(3 * MB // 2), compresslevel=1)
    caps = UploadCaps(packed=64 * MB, unpacked=64 * MB, ratio=2.0)
    with pytest.raises(ServiceError) as refused:
        unpack_upload(io.BytesIO(packed), tmp_path / "plain", tmp_path / "packed.gz", caps)
    assert refused.value.status == 413
    assert "more than 2 times its packed size" in str(refused.value)


def _unpack(tmp_path: Path, sent: bytes, **caps: Any) -> tuple[Any, bytes]:
    limits = {"packed": 64 * MB, "unpacked": 64 * MB, **caps}
    done = unpack_upload(io.BytesIO(sent), tmp_path / "plain", tmp_path / "packed.gz",
                         UploadCaps(**limits))
    return done, (tmp_path / "plain").read_bytes()


def test_gzip_members_and_zero_padding_between_them_unpack_whole(tmp_path):
    """A gzip of several members, with zero padding up to a read block between them (as
    tape-style writers leave) and after the last, unpacks to every member's bytes."""
    first, second = b'{"a": 1}\n' * 50, b'{"b": 2}\n' * 70
    one, two = gzip.compress(first), gzip.compress(second)
    padding = b"\0" * (2 + _CHUNK - len(one))  # the second member starts a new read block
    sent = one + padding + two + b"\0" * 100
    done, plain = _unpack(tmp_path, sent)
    assert plain == first + second
    assert done.size == len(first + second) and done.packed == len(sent)
    assert (tmp_path / "packed.gz").read_bytes() == sent


def test_gzip_output_held_when_the_input_ends_is_written_too(tmp_path):
    """A dense gzip whose last packed bytes unpack to many blocks is unpacked to its end."""
    content = b'{"z": "' + b"0" * (3 * MB) + b'"}\n'
    done, plain = _unpack(tmp_path, gzip.compress(content), ratio=10_000.0)
    assert plain == content and done.size == len(content)


@pytest.mark.parametrize("sent, says", [  # mtime=0: the same test ids in every xdist worker
    (gzip.compress(b"x" * 1000, mtime=0)[:-12],
     "not a valid gzip file: the gzip stream ends early"),
    (gzip.compress(b"x" * 1000, mtime=0)[:10] + b"\xff" * 40, "not a valid gzip file: Error -3"),
    (gzip.compress(b"x", mtime=0) + b"junk after", "not a valid gzip file: Error -3"),
])
def test_a_broken_gzip_upload_is_a_422_on_the_file(tmp_path, sent, says):
    """A gzip cut short, corrupted, or followed by bytes that are not a member is a 422
    on ``file`` whose message says what is wrong."""
    with pytest.raises(ServiceError) as refused:
        _unpack(tmp_path, sent)
    assert (refused.value.status, refused.value.field) == (422, "file")
    assert refused.value.reason.startswith(says)


def test_predictions_in_another_format_are_converted_and_counted(tmp_path):
    """A predictions upload in a foreign format (TRADE-style turns) is read through its
    converter, and every dialogue is counted."""
    source = FIXTURES / "formats" / "turns_predictions.jsonl"
    info = validate_upload("predictions", source, str(tmp_path))
    dialogues = {json.loads(line)["dialogue_id"]
                 for line in source.read_text(encoding="utf-8").splitlines() if line.strip()}
    assert info["dialogues"] == len(dialogues)
    assert info["system_name"] is None


def test_a_converted_predictions_record_out_of_shape_is_a_422_naming_where(tmp_path):
    """Each converted record is validated: a bad one is a 422 whose field says where in the
    source file it was."""
    source = FIXTURES / "formats" / "turns_predictions.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["turn_id"] = "not a turn"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(ServiceError) as refused:
        validate_upload("predictions", bad, str(tmp_path))
    assert refused.value.status == 422
    assert str(tmp_path) not in str(refused.value)


# --- bundles --------------------------------------------------------------------------------


def _caps(record: int) -> UploadCaps:
    return UploadCaps(packed=64 * MB, unpacked=64 * MB, record=record)


def test_a_bundle_document_over_the_record_cap_is_a_413_naming_the_cap_in_mb():
    """A ``.json`` member counts as one record: one byte over the cap is 413, and the
    message names the member and the cap in MB; exactly the cap is copied whole."""
    out = io.BytesIO()
    _copy_member(io.BytesIO(b"x" * MB), out, "summary.json", _caps(MB))
    assert out.getvalue() == b"x" * MB
    with pytest.raises(ServiceError) as refused:
        _copy_member(io.BytesIO(b"x" * (MB + 1)), io.BytesIO(), "summary.json", _caps(MB))
    assert refused.value.status == 413
    assert str(refused.value) == ("summary.json: a document is larger than the server's "
                                  "limit of 1 MB")


def test_a_bundle_line_over_the_record_cap_is_a_413_but_many_short_lines_are_not():
    """A JSON Lines member is capped per line (a line may span read blocks), not in total."""
    short = (b"y" * 1000 + b"\n") * 3000  # 3 MB of short lines
    out = io.BytesIO()
    _copy_member(io.BytesIO(short), out, "judgments.jsonl", _caps(MB))
    assert out.getvalue() == short
    spanning = b"a\n" + b"z" * (MB + 10) + b"\nb\n"
    with pytest.raises(ServiceError) as refused:
        _copy_member(io.BytesIO(spanning), io.BytesIO(), "calls.jsonl", _caps(MB))
    assert refused.value.status == 413
    assert str(refused.value) == "calls.jsonl: a line is larger than the server's limit of 1 MB"
    edge = b"z" * MB + b"\n" + b"z" * MB + b"\n"
    out = io.BytesIO()
    _copy_member(io.BytesIO(edge), out, "judgments.jsonl", _caps(MB))
    assert out.getvalue() == edge


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_bundle_rows_and_the_last_call_of_each_id_go_in_across_batches(db, tmp_path):
    """Imported judgment rows keep their order past one insert batch (500), and of calls
    sharing a custom_id only the last line is kept, also past one batch."""
    project_id = ensure_project(db, "lab")
    insert_job(db, "job_imp", project_id, "tok_x", "succeeded")
    judged = _jsonl(tmp_path / "judgments.jsonl",
                    [{"dialogue_id": f"d{n}", "turn_index": n, "verdict": n % 2 == 0,
                      "rule": "1", **({"error": "x"} if n == 3 else {})} for n in range(1001)])
    calls_rows = [{"custom_id": f"c{n}", "n": n} for n in range(1002)]
    calls_rows += [{"custom_id": "c5", "n": "again"}, {"custom_id": "c1001", "n": "last"}]
    calls = _jsonl(tmp_path / "calls.jsonl", calls_rows)
    last_of = _last_calls(calls)
    assert len(last_of) == 1002 and last_of["c5"] == 1003 and last_of["c0"] == 1
    with db.write() as conn:
        _insert_rows(conn, "job_imp", judged, calls, last_of)
    with db.read() as conn:
        rows = conn.execute(sa.select(judgments).where(judgments.c.job_id == "job_imp")
                            .order_by(judgments.c.seq)).all()
        kept = {r.custom_id: r.record for r in conn.execute(
            sa.select(job_calls).where(job_calls.c.job_id == "job_imp"))}
    assert [r.seq for r in rows] == list(range(1001))
    assert [r.turn_index for r in rows] == list(range(1001))
    assert rows[1000].dialogue_id == "d1000" and rows[2].verdict is True
    assert rows[3].has_error and not rows[4].has_error
    assert len(kept) == 1002
    assert kept["c5"] == {"custom_id": "c5", "n": "again"}
    assert kept["c1001"]["n"] == "last" and kept["c1000"]["n"] == 1000


def test_bundle_rows_without_calls_go_in_alone(db, tmp_path):
    """A bundle without calls.jsonl imports its judgments and no call."""
    project_id = ensure_project(db, "lab")
    insert_job(db, "job_nocalls", project_id, "tok_x", "succeeded")
    judged = _jsonl(tmp_path / "j.jsonl", [{"dialogue_id": "d", "turn_index": 0,
                                            "verdict": True, "rule": "1"}])
    with db.write() as conn:
        _insert_rows(conn, "job_nocalls", judged, None, _last_calls(None))
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(judgments)).scalar() == 1
        assert conn.execute(sa.select(sa.func.count()).select_from(job_calls)).scalar() == 0


# --- labels ---------------------------------------------------------------------------------


def _reviewer(project_id: str, name: str = "bob", token_id: str = "tok_bob") -> Principal:
    return Principal(token_id=token_id, token_name=name, project_id=project_id,
                     project_name="lab", scopes=("review",))


def test_replacing_a_label_keeps_its_id_and_created_at(db, monkeypatch):
    """A reviewer's second label of the same turn and subject replaces the first: same id,
    the first created_at, a new updated_at, label, note and token."""
    import judge.service.storage._labels as labels_module

    moments = iter([100.0, 200.0, 300.0])
    monkeypatch.setattr(labels_module, "now", lambda: next(moments))
    project_id = ensure_project(db, "lab")
    store = LabelStore(db)
    values = {"subject": "a" * 64, "dialogue_id": "d1", "turn_index": 2, "label": "correct",
              "job_id": "job_x", "note": "fine"}
    first = store.put(_reviewer(project_id), values)
    assert first["created_at"] == 100.0 and first["updated_at"] == 100.0
    assert first["slot"] == "" and first["reviewer"] == "bob" and first["note"] == "fine"
    again = store.put(_reviewer(project_id, token_id="tok_bob2"),
                      {**values, "label": "incorrect", "note": None})
    assert again["id"] == first["id"]
    assert again["created_at"] == 100.0 and again["updated_at"] == 200.0
    assert again["label"] == "incorrect" and again["note"] is None
    assert again["token_id"] == "tok_bob2"
    other = store.put(_reviewer(project_id), {**values, "slot": "hotel-area"})
    assert other["id"] != first["id"] and other["created_at"] == 300.0
    listed = store.list(project_id, subject="a" * 64)
    assert [(r["slot"], r["label"]) for r in listed] == [("", "incorrect"),
                                                         ("hotel-area", "correct")]
    assert "project_id" not in listed[0]


def test_a_label_without_a_subject_is_a_422(db):
    """A label must say what it judges."""
    project_id = ensure_project(db, "lab")
    with pytest.raises(ServiceError) as refused:
        LabelStore(db).put(_reviewer(project_id), {"subject": "", "dialogue_id": "d",
                                                   "turn_index": 0, "label": "correct"})
    assert refused.value.status == 422 and refused.value.field == "subject"


# --- slim reads -----------------------------------------------------------------------------


def _run_rows(db, count: int = 9) -> tuple[str, str]:
    project_id = ensure_project(db, "lab")
    insert_job(db, "job_r", project_id, "tok_x", "succeeded")
    rows = [{"job_id": "job_r", "seq": seq, "dialogue_id": f"d{seq // 3}",
             "turn_index": seq % 3, "verdict": True, "has_error": False,
             "row": {"seq": seq, "dialogue_id": f"d{seq // 3}", "calls": [{"x": 1}],
                     "trace": ["t"], "state": {"a": "b"}, "verdict": True}}
            for seq in range(count)]
    with db.write() as conn:
        conn.execute(judgments.insert(), rows)
    return project_id, "job_r"


@pytest.mark.parametrize("trimmed_in_sql", [True, False], ids=["sql", "python"])
def test_slim_rows_leave_out_the_bulk_with_or_without_the_sql_trim(db, monkeypatch,
                                                                   trimmed_in_sql):
    """Slim rows lack calls, trace and state whether the database trims them (SQLite,
    Postgres) or, for a database without that expression, Python does."""
    if not trimmed_in_sql:
        monkeypatch.setattr(_reads, "_SLIM", {})
    project_id, job_id = _run_rows(db)
    reads = JudgmentReads(SimpleNamespace(db=db))
    slim = list(reads.slim_rows(project_id, job_id, batch=4))
    assert [seq for seq, _ in slim] == list(range(9))
    assert slim[4][1] == {"seq": 4, "dialogue_id": "d1", "verdict": True}
    window = list(reads.slim_rows(project_id, job_id, start=2, stop=5, batch=2))
    assert [seq for seq, _ in window] == [2, 3, 4]
    assert list(reads.slim_rows(ensure_project(db, "other"), job_id)) == []
    full = reads.dialogue_rows(project_id, job_id, "d2")
    assert [r["seq"] for r in full] == [6, 7, 8] and full[0]["calls"] == [{"x": 1}]


# --- endpoint settings ----------------------------------------------------------------------


@pytest.mark.parametrize("values, batch", [
    ({"base_url": "https://api.openai.com/v1"}, True),
    ({"base_url": "https://api.openai.com/v1/"}, True),
    ({}, True),
    ({"base_url": "https://api.openai.com/v1X"}, False),
    ({"base_url": "https://api.openai.com/v1 "}, False),
    ({"base_url": "http://127.0.0.1:8000/v1"}, False),
    ({"base_url": "http://127.0.0.1:8000/v1", "batch_api": True}, True),
    ({"batch_api": False}, False),
])
def test_batch_jobs_run_only_on_openais_own_api_unless_set(values, batch):
    """Batch mode is offered on OpenAI's API URL (with or without a trailing slash) and
    nowhere else, unless ``batch_api`` says otherwise."""
    assert EndpointConfig(**values).offers_batch() is batch


# --- slot-name warnings ---------------------------------------------------------------------


class _Files:
    """A file store of a schema and predictions records whose content is not on disk."""

    def __init__(self, records: dict[str, dict[str, Any]],
                 paths: dict[str, Path] | None = None) -> None:
        self.records = records
        self.paths = {"schema": EXAMPLES / "schema.json", **(paths or {})}

    def get(self, project_id: str, file_id: str) -> dict[str, Any]:
        if file_id not in self.records:
            raise ServiceError(f"no file {file_id!r}", status=404)
        return self.records[file_id]

    def local_path(self, sha256: str) -> Path:
        if sha256 in self.paths:
            return self.paths[sha256]
        raise OSError(f"the content {sha256} is not here")


def test_slot_warnings_come_from_the_names_recorded_with_the_upload():
    """The names an upload recorded (``info.slot_names``) are compared with the schema
    without reading the file again; a file without them is read (here: unreadable, skipped)."""
    store = _Files({
        "f_schema": {"sha256": "schema", "name": "schema.json", "info": {}},
        "f_pred": {"sha256": "gone", "name": "p.jsonl",
                   "info": {"slot_names": {"hotel-priceranges": 3, "hotel-area": 5}}},
        "f_old": {"sha256": "gone", "name": "old.jsonl", "info": {}},
    })
    warnings = job_warnings(store, "prj", "evaluate", {"schema": "f_schema",
                                                       "predictions": ["f_pred", "f_old"]})
    assert [w["file"] for w in warnings] == ["f_pred"]
    assert warnings[0]["name"] == "p.jsonl"
    assert [s["slot"] for s in warnings[0]["slots"]] == ["hotel-priceranges"]
    assert warnings[0]["message"].startswith("p.jsonl: ")
    one = job_warnings(store, "prj", "metrics", {"schema": "f_schema", "predictions": "f_pred"})
    assert [w["file"] for w in one] == ["f_pred"]
    assert job_warnings(store, "prj", "agreement", {"schema": "f_schema",
                                                    "predictions": "f_pred"}) == []


# --- job requests ---------------------------------------------------------------------------


def _settings(tmp_path: Path, **values: Any) -> Any:
    from tests.service.conftest import service_settings

    settings = service_settings(tmp_path / "data", "http://127.0.0.1:9/v1", **values)
    return settings


def _check(tmp_path: Path, kind: str, inputs: dict[str, Any], options: dict[str, Any] | None
           = None, mode: str = "live", **settings: Any) -> Any:
    from judge.service.jobs._jobspec import JobRequest, check_job

    request = JobRequest(kind=kind, inputs=inputs, options=options or {}, mode=mode)
    return check_job(request, _settings(tmp_path, **settings))


EVALUATE = {"schema": "f_s", "dialogues": "f_d", "predictions": "f_p"}

REFUSED_JOBS = [
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {}, "batch", "mode",
     "a metrics job runs live only; mode 'batch' is for evaluate jobs"),
    ("evaluate", {**EVALUATE, "extra": "x"}, {}, "live", "inputs.extra",
     "unknown input for a evaluate job (expected schema, dialogues, predictions, rules, "
     "corrections)"),
    ("evaluate", {"schema": "f_s", "dialogues": "f_d"}, {}, "live", "inputs.predictions",
     "a evaluate job needs this input"),
    ("metrics", {**EVALUATE, "predictions": []}, {}, "live", "inputs.predictions",
     "give at least one id"),
    ("evaluate", {**EVALUATE, "predictions": ["a", "b"]}, {}, "live", "inputs.predictions",
     "expected one id (a string)"),
    ("evaluate", EVALUATE, {"use_cache": True}, "live", "options.use_cache",
     "not accepted: the server decides caching (one cache per project)"),
    ("evaluate", EVALUATE, {"seed": 1.0}, "live", "options.seed",
     "must be a whole number from -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807"),
    ("evaluate", EVALUATE, {"max_tokens": 15}, "live", "options.max_tokens",
     "must be a whole number from 16 to 1,000,000"),
    ("evaluate", EVALUATE, {"max_retries": True}, "live", "options.max_retries",
     "must be a whole number from 0 to 20"),
    ("evaluate", EVALUATE, {"temperature": 2.5}, "live", "options.temperature",
     "must be a number from 0 to 2"),
    ("evaluate", EVALUATE, {"temperature": False}, "live", "options.temperature",
     "must be a number from 0 to 2"),
    ("evaluate", EVALUATE, {"budget": float("inf")}, "live", "options.budget",
     "must be a number from 0 to 1e+06"),
    ("evaluate", EVALUATE, {"batch_max_requests": 5}, "live", "options.batch_max_requests",
     "unknown option; accepted: model, method, semantics, rule_match, prompt_variant, "
     "response_format, temperature, top_p, seed, max_tokens, timeout, max_retries, "
     "concurrency, reasks, prompt_cache_key, budget, limit, dialogue_ids, endpoint"),
    ("evaluate", EVALUATE, {}, "batch", "mode",
     "endpoint 'fake' has no Batch API on this server (its configuration does not set "
     "batch_api); submit with mode 'live'"),
    ("evaluate", EVALUATE, {"endpoint": "nowhere"}, "live", "options.endpoint",
     "unknown endpoint; this server offers: fake, other"),
    ("evaluate", EVALUATE, {"endpoint": "other", "model": "m2"}, "live", "options.model",
     "endpoint 'other' offers: allowed-model"),
    ("evaluate", EVALUATE, {"model": "-bad"}, "live", "options.model", "not a model name"),
    ("evaluate", EVALUATE, {"model": 5}, "live", "options.model", "not a model name"),
    ("evaluate", EVALUATE, {"concurrency": 17}, "live", "options.concurrency",
     "at most 16 on endpoint 'fake'"),
    ("evaluate", EVALUATE, {"limit": 0}, "live", "options.limit",
     "must be a whole number from 1 to 100,000,000"),
    ("evaluate", EVALUATE, {"dialogue_ids": []}, "live", "options.dialogue_ids",
     "must be a list of 1 to 100000 dialogue ids (strings)"),
    ("evaluate", EVALUATE, {"dialogue_ids": ["a", ""]}, "live", "options.dialogue_ids",
     "must be a list of 1 to 100000 dialogue ids (strings)"),
    ("evaluate", EVALUATE, {"dialogue_ids": "a"}, "live", "options.dialogue_ids",
     "must be a list of 1 to 100000 dialogue ids (strings)"),
    ("retry-errors", {"run": "job_a"}, {"model": "m"}, "live", "options.model",
     "unknown option; accepted: concurrency, timeout, max_retries, budget"),
    ("audit", {"run": "job_a"}, {"seed": 1}, "live", "options.seed",
     "unknown option (this kind takes none)"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"gold": 2.1}, "live", "options.gold",
     "an annotation version such as '2.1'"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"gold": "x" * 51}, "live",
     "options.gold", "an annotation version such as '2.1'"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"per_dialogue": "yes"}, "live",
     "options.per_dialogue", "must be true or false"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"fga_lambdas": [0.5, True]}, "live",
     "options.fga_lambdas", "must be a list of at most 100 numbers from 0 to 1,000,000"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"fga_lambdas": [0.5] * 101}, "live",
     "options.fga_lambdas", "must be a list of at most 100 numbers from 0 to 1,000,000"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"none_values": ["x" * 101]}, "live",
     "options.none_values", "must be a list of at most 100 strings of up to 100 characters"),
    ("metrics", {**EVALUATE, "predictions": ["f_p"]}, {"aga_unit": "slot"}, "live",
     "options.aga_unit", None),
    ("agreement", {"run": "job_a"}, {"n_boot": 20001}, "live", "options.n_boot",
     "must be a whole number from 0 to 20,000"),
    ("agreement", {"run": "job_a"}, {"confidence": 0}, "live", "options.confidence",
     "a number strictly between 0 and 1"),
    ("agreement", {"run": "job_a"}, {"tuning": "x"}, "live", "options.tuning",
     "tuning must be one of loo, plain or a number in [0, 1] (got 'x')"),
    ("compare", {"runs": "job_a"}, {"n_boot": 5}, "live", "options.n_boot",
     "unknown option; accepted: confidence, tuning"),
]


@pytest.mark.parametrize("kind, inputs, options, mode, field, reason", REFUSED_JOBS,
                         ids=[f"{r[4]}-{n}" for n, r in enumerate(REFUSED_JOBS)])
def test_a_job_request_out_of_bounds_is_a_422_naming_field_and_reason(
        tmp_path, kind, inputs, options, mode, field, reason):
    """Every refusal of a job request is a 422 naming the field (a JSON path) and why."""
    with pytest.raises(ServiceError) as refused:
        _check(tmp_path, kind, inputs, options, mode)
    assert (refused.value.status, refused.value.field) == (422, field)
    if reason is not None:
        assert refused.value.reason == reason


def test_an_evaluate_request_is_normalised_with_its_endpoint_and_references(tmp_path):
    """A good evaluate request keeps its options as given, gets the endpoint's default model,
    its subset options, the endpoint name and every reference it reads."""
    spec = _check(tmp_path, "evaluate", {**EVALUATE, "rules": "f_r"},
                  {"temperature": 0.5, "seed": None, "limit": 3, "dialogue_ids": ["d1"],
                   "concurrency": 4, "budget": 2.0})
    assert spec.kind == "evaluate" and spec.mode == "live" and spec.endpoint == "fake"
    assert spec.options == {"temperature": 0.5, "seed": None, "concurrency": 4, "budget": 2.0,
                            "limit": 3, "dialogue_ids": ["d1"]}
    assert spec.budget == 2.0
    assert spec.references == [("inputs.schema", "schema", "f_s"),
                               ("inputs.dialogues", "dialogues", "f_d"),
                               ("inputs.predictions", "predictions", "f_p"),
                               ("inputs.rules", "rules", "f_r")]
    chosen = _check(tmp_path, "evaluate", EVALUATE, {"endpoint": "other",
                                                     "model": "allowed-model"})
    assert chosen.endpoint == "other" and chosen.options == {"model": "allowed-model"}


def test_an_allow_list_holds_for_the_default_model_a_request_leaves_unnamed(tmp_path):
    """An endpoint with a ``models`` allow-list refuses a request that names no model (it would
    run the library's default, which the list leaves out), and says so."""
    with pytest.raises(ServiceError) as info:
        _check(tmp_path, "evaluate", EVALUATE, {"endpoint": "other"})
    assert info.value.status == 422 and info.value.field == "options.model"
    message = str(info.value)
    assert "endpoint 'other' offers: allowed-model" in message
    assert "this job names no model, so it would run the default 'gpt-4-turbo'" in message


def test_a_server_budget_cap_bounds_every_job(tmp_path):
    """With a server cap, a job's budget is the lower of its own and the cap, and the cap
    when it gives none."""
    assert _check(tmp_path, "evaluate", EVALUATE, {"budget": 9.0},
                  max_job_budget=5.0).budget == 5.0
    assert _check(tmp_path, "evaluate", EVALUATE, {"budget": 1.0},
                  max_job_budget=5.0).budget == 1.0
    assert _check(tmp_path, "evaluate", EVALUATE, {}, max_job_budget=5.0).budget == 5.0
    assert _check(tmp_path, "evaluate", EVALUATE, {}).budget is None


def test_other_kinds_normalise_their_options_and_list_inputs(tmp_path):
    """metrics takes lists of predictions (one id becomes a list), agreement fills its
    defaults, compare lists every run it reads."""
    metrics = _check(tmp_path, "metrics", {**EVALUATE, "predictions": "f_p"},
                     {"match": "exact", "gold": "2.1", "limit": 2, "num_slots": None})
    assert metrics.inputs["predictions"] == ["f_p"]
    assert ("inputs.predictions[0]", "predictions", "f_p") in metrics.references
    assert metrics.options == {"match": "exact", "num_slots": None, "gold": "2.1", "limit": 2}
    agreement = _check(tmp_path, "agreement", {"run": "job_a", "human": "f_h"})
    assert agreement.options == {"n_boot": 1000, "seed": 0, "confidence": 0.95,
                                 "tuning": "loo"}
    assert agreement.references == [("inputs.run", "job", "job_a"),
                                    ("inputs.human", "labels", "f_h")]
    tuned = _check(tmp_path, "agreement", {"run": "job_a"},
                   {"n_boot": 0, "seed": -3, "confidence": 0.5, "tuning": "plain"})
    assert tuned.options == {"n_boot": 0, "seed": -3, "confidence": 0.5, "tuning": "plain"}
    compare = _check(tmp_path, "compare", {"runs": ["job_a", "job_b"]})
    assert compare.references == [("inputs.runs[0]", "job", "job_a"),
                                  ("inputs.runs[1]", "job", "job_b")]
    retry = _check(tmp_path, "retry-errors", {"run": "job_a"}, {"concurrency": 2})
    assert retry.options == {"concurrency": 2}


@pytest.mark.parametrize("options, field, reason", [
    ({"n_boot": 20001}, "options.n_boot", "must be a whole number from 0 to 20,000"),
    ({"n_boot": 2.0}, "options.n_boot", "must be a whole number from 0 to 20,000"),
    ({"seed": "1"}, "options.seed",
     "must be a whole number from -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807"),
    ({"confidence": True}, "options.confidence", "a number strictly between 0 and 1"),
    ({"confidence": "0.9"}, "options.confidence", "a number strictly between 0 and 1"),
    ({"other": 1}, "options.other", "unknown option; accepted: n_boot, seed, confidence, "
     "tuning"),
])
def test_agreement_options_checked_on_their_own_name_field_and_reason(options, field, reason):
    """The agreement options' model says what each wants, in the API's words."""
    from judge.service.jobs._jobspec import _agreement_options

    with pytest.raises(ServiceError) as refused:
        _agreement_options(options)
    assert (refused.value.status, refused.value.field, refused.value.reason) == (
        422, field, reason)
    assert _agreement_options({"n_boot": 20000, "confidence": 1 - 1e-9, "tuning": 0.5})[
        "n_boot"] == 20000


# --- the file store -------------------------------------------------------------------------


def test_the_file_store_keeps_one_blob_per_content_and_frees_it_with_its_last_file(
        db, tmp_path):
    """Uploads are content-addressed: the same bytes again (any name) are the same file; the
    same bytes as another kind are a new file sharing the blob, which goes (row and local
    copy) only with the last file that holds it; then its content is 410."""
    from judge.service.db._db import blobs
    from judge.service.storage._files import FileStore

    store = FileStore(db, tmp_path / "data", max_upload=MB, max_unpacked=4 * MB)
    lab, other = ensure_project(db, "lab"), ensure_project(db, "other")
    content = (EXAMPLES / "dialogues.jsonl").read_bytes()
    first, new = store.add(lab, "dialogues", "../some dir/my dialogues.jsonl",
                           io.BytesIO(content), token_id="tok_a")
    assert new is True and first["id"].startswith("file_")
    assert first["name"] == "my_dialogues.jsonl" and first["kind"] == "dialogues"
    assert first["size"] == len(content)
    assert first["sha256"] == hashlib.sha256(content).hexdigest()
    assert first["info"]["dialogues"] > 0 and first["info"]["turns"] > 0
    assert set(first) == {"id", "kind", "name", "sha256", "size", "info", "created_at"}
    again, new = store.add(lab, "dialogues", "renamed.jsonl", io.BytesIO(content))
    assert new is False and again == first
    theirs, new = store.add(other, "dialogues", None, io.BytesIO(content))
    assert new is True and theirs["id"] != first["id"] and theirs["name"] == "dialogues.jsonl"
    assert store.get(lab, first["id"]) == first
    with pytest.raises(ServiceError) as missing:
        store.get(other, first["id"])
    assert missing.value.status == 404
    assert missing.value.reason == f"no file {first['id']!r} in this project"
    assert [f["id"] for f in store.list(lab)] == [first["id"]]
    assert store.list(lab, kind="schema") == []
    local = store.local_path(first["sha256"])
    assert local.read_bytes() == content
    local.unlink()  # another replica's disk: fetched again from the database
    assert b"".join(store.open_content(first["sha256"])) == content
    store.delete(lab, first["id"])
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(blobs)).scalar() == 1
    assert store.local_path(first["sha256"]).read_bytes() == content
    store.delete(other, theirs["id"])
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(blobs)).scalar() == 0
    assert not local.exists()
    with pytest.raises(ServiceError) as gone:
        store.local_path(first["sha256"])
    assert gone.value.status == 410
    assert gone.value.reason == f"the content {first['sha256']} is gone (deleted)"


def test_the_file_store_lists_newest_first_by_kind_and_page(db, tmp_path, monkeypatch):
    """A project's files list newest first, of one kind when asked, a page at a time; an
    unknown kind is refused before anything is read."""
    import judge.service.storage._files as files_module
    from judge.service.storage._files import FileStore

    moments = iter(range(1, 100))
    monkeypatch.setattr(files_module, "now", lambda: float(next(moments)))
    store = FileStore(db, tmp_path / "data", max_upload=MB, max_unpacked=4 * MB)
    lab = ensure_project(db, "lab")
    made = [store.add(lab, kind, name, io.BytesIO((EXAMPLES / name).read_bytes()))[0]["id"]
            for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                               ("predictions", "predictions.jsonl"))]
    assert [f["id"] for f in store.list(lab)] == made[::-1]
    assert [f["id"] for f in store.list(lab, limit=1, offset=1)] == [made[1]]
    assert [f["id"] for f in store.list(lab, kind="predictions")] == [made[2]]
    predictions = store.get(lab, made[2])
    assert predictions["info"]["system_name"] == "example-dst"
    assert predictions["info"]["dialogues"] > 0 and predictions["info"]["slot_names"]
    with pytest.raises(ServiceError) as refused:
        store.add(lab, "pictures", "a.png", io.BytesIO(b"x"))
    assert (refused.value.status, refused.value.field) == (422, "kind")
    assert refused.value.reason == ("kind must be one of schema, dialogues, predictions, "
                                    "labels, rules, sample, corrections")


def test_uploads_of_each_kind_are_described_and_their_errors_name_no_server_folder(tmp_path):
    """validate_upload describes a schema and a labels file; an error is a 422 naming the
    file by its own name and the field, never the server's temporary folder; an empty
    dialogues or predictions file is refused as empty."""
    folder = tmp_path / "upload"
    folder.mkdir()
    assert validate_upload("schema", EXAMPLES / "schema.json", str(folder)) == {
        "domains": 5, "slots": 30}
    labels = folder / "labels.jsonl"
    _jsonl(labels, [{"dialogue_id": "d1", "turn_index": n, "label": 1, "annotator": a}
                    for n in range(3) for a in ("x", "y")])
    assert validate_upload("labels", labels, str(folder)) == {"labels": 6,
                                                              "annotators": ["x", "y"]}
    _jsonl(labels, [{"dialogue_id": "d1"}])
    with pytest.raises(ServiceError) as refused:
        validate_upload("labels", labels, str(folder))
    assert (refused.value.status, refused.value.field) == (422, "turn_index")
    assert refused.value.reason.startswith("labels.jsonl:1: field 'turn_index'")
    empty = folder / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    for kind in ("dialogues", "predictions"):
        with pytest.raises(ServiceError) as refused:
            validate_upload(kind, empty, str(folder))
        assert (refused.value.status, refused.value.reason) == (422, "empty.jsonl: file is empty")


def test_an_imported_bundle_becomes_a_finished_job_of_its_own(db, tmp_path):
    """Import makes a succeeded evaluate job of the importer's project: options and inputs
    as the bundle says, tokens summed from the summary, exit code 1 when it counted error
    turns, progress the number of distinct calls, the predictions digest as its subject."""
    from judge.service.db._db import jobs
    from judge.service.http._bundles import import_bundle
    from judge.service.jobs._jobs import JobStore
    from tests.service import hostile

    project_id = ensure_project(db, "lab")
    host = SimpleNamespace(settings=_settings(tmp_path), db=db, jobs=JobStore(db))
    meta = {**hostile.BUNDLE_META, "job_id": "j" * 150, "options": {"model": "m"},
            "inputs": {"predictions": {"id": "f", "sha256": "c" * 64}}}
    calls = b'{"custom_id": "c1", "n": 1}\n{"custom_id": "c2"}\n{"custom_id": "c1", "n": 2}\n'
    sent = hostile.good_bundle(**{
        "bundle.json": json.dumps(meta).encode(),
        "summary.json": json.dumps({"error_turns": 2, "tokens": {
            "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 999}}).encode(),
        "calls.jsonl": calls})
    job = import_bundle(host, _reviewer(project_id), io.BytesIO(sent))
    assert job["status"] == "succeeded" and job["kind"] == "evaluate" and job["imported"]
    assert job["options"] == {"model": "m"} and job["exit_code"] == 1
    assert job["endpoint"] is None
    with db.read() as conn:
        row = conn.execute(sa.select(jobs).where(jobs.c.id == job["id"])).first()
        kept = {r.custom_id: r.record for r in conn.execute(sa.select(job_calls))}
    assert row.project_id == project_id and row.token_id == "tok_bob"
    assert row.tokens_used == 120 and row.cost_usd == 0.0 and row.attempts == 0
    assert row.progress == {"total": 2, "done": 2}
    assert row.subject == "c" * 64 and row.mode == "live" and not row.cancel_requested
    assert row.inputs == {"bundle": {"job_id": "j" * 100, "inputs": meta["inputs"]}}
    assert row.created_at == row.started_at == row.finished_at == row.updated_at
    assert kept == {"c1": {"custom_id": "c1", "n": 2}, "c2": {"custom_id": "c2"}}
    clean = hostile.good_bundle(**{"summary.json": b'{"error_turns": 0, "tokens": "x"}'})
    plain = import_bundle(host, _reviewer(project_id), io.BytesIO(clean))
    with db.read() as conn:
        row = conn.execute(sa.select(jobs).where(jobs.c.id == plain["id"])).first()
    assert plain["exit_code"] == 0 and row.tokens_used == 0 and row.subject is None


def test_a_bundle_unpacks_under_the_data_directory_and_leaves_nothing(db, tmp_path,
                                                                    monkeypatch):
    """The unpacked members count against the disk the operator sized for the service (its
    data directory), not the system's temporary folder, and are gone once imported."""
    from judge.service.http import _bundles
    from judge.service.jobs._jobs import JobStore
    from tests.service import hostile

    project_id = ensure_project(db, "lab")
    settings = _settings(tmp_path)
    host = SimpleNamespace(settings=settings, db=db, jobs=JobStore(db))
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    seen: list[Path] = []
    unpack = _bundles._unpack_members

    def watched(stream, folder, caps):
        seen.append(folder)
        members = unpack(stream, folder, caps)
        assert members and all(path.parent == folder for path in members.values())
        return members

    monkeypatch.setattr(_bundles, "_unpack_members", watched)
    job = _bundles.import_bundle(host, _reviewer(project_id), io.BytesIO(hostile.good_bundle()))
    assert job["status"] == "succeeded"
    assert len(seen) == 1 and seen[0].parent == settings.data_dir / "tmp"
    assert not seen[0].exists() and list((settings.data_dir / "tmp").iterdir()) == []
    assert list(system_tmp.iterdir()) == []


def test_slot_warnings_read_a_file_that_recorded_no_names_and_skip_what_cannot_be_read(
        tmp_path):
    """An upload from before names were recorded is read for them; a missing file, a job
    without a schema or with an unreadable one gives no warning (the job reports those)."""
    record = json.loads((EXAMPLES / "predictions.jsonl").read_text().splitlines()[0])
    record["turns"][0]["pred_state"] = {"hotel-stars": "4", "hotel-starz": "4"}
    predictions = _jsonl(tmp_path / "p.jsonl", [record])
    store = _Files({"f_schema": {"sha256": "schema", "name": "schema.json", "info": {}},
                    "f_bad": {"sha256": "nowhere", "name": "s.json", "info": {}},
                    "f_old": {"sha256": "old", "name": "old.jsonl", "info": None}},
                   {"old": predictions})
    inputs = {"schema": "f_schema", "predictions": ["f_missing", "f_old"]}
    warnings = job_warnings(store, "prj", "evaluate", inputs)
    assert [(w["file"], w["name"]) for w in warnings] == [("f_old", "old.jsonl")]
    assert warnings[0]["slots"] == [{"slot": "hotel-starz", "turns": 1,
                                     "suggestion": "hotel-stars"}]
    assert job_warnings(store, "prj", "evaluate", {**inputs, "schema": "f_bad"}) == []
    assert job_warnings(store, "prj", "evaluate", {**inputs, "schema": "f_missing"}) == []
    assert job_warnings(store, "prj", "evaluate", {"predictions": ["f_old"]}) == []


def test_numeric_options_at_their_bounds_are_accepted(tmp_path):
    """The ranges are inclusive: a float option at its top and list numbers from 0 pass."""
    spec = _check(tmp_path, "evaluate", EVALUATE, {"temperature": 2.0, "top_p": 1.0})
    assert spec.options == {"temperature": 2.0, "top_p": 1.0}
    metrics = _check(tmp_path, "metrics", {**EVALUATE, "predictions": ["f_p"]},
                     {"fga_lambdas": [0, 0.5, 1_000_000]})
    assert metrics.options["fga_lambdas"] == [0, 0.5, 1_000_000]


def test_with_no_endpoints_configured_the_one_endpoint_is_openai_with_its_usual_key(tmp_path):
    """A server started with no endpoints file talks to OpenAI, with the key read from
    ``OPENAI_API_KEY`` (never stored in the settings)."""
    from judge.service import build_settings

    endpoints = build_settings({"data_dir": tmp_path}).all_endpoints()
    assert list(endpoints) == ["openai"]
    assert endpoints["openai"].api_key_env == "OPENAI_API_KEY"
    assert endpoints["openai"].offers_batch
