"""The bodies of the service's HTTP API (``/v1``), as pydantic models.

One definition serves both ends: the server (``judge.service``) declares them as the
``response_model`` of its routes, so ``/openapi.json`` documents every body, and the Python
client (``judge.Client``) parses what it receives into the same classes. They live here, below
both, because the client must not import the service package (it needs httpx and pydantic
only). They are not the database tables: a row becomes one of these in the service's stores.

Responses ignore members they do not know (an older client reading a newer server keeps
working); request bodies forbid them (a typo is a 422 naming the field, not a silent default).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._names import JobStatus as JobStatus

Scope = Literal["read", "submit", "review", "admin"]
FINAL_STATUSES: tuple[JobStatus, ...] = ("succeeded", "failed", "cancelled", "stopped")
WORKING_STATUSES: tuple[JobStatus, ...] = ("running", "waiting")
"""The API's words for a job's states (the service's lifecycle, ``judge.service.jobs._lifecycle``,
owns them; a test keeps the two in step, since the client must not import the service)."""
JobKind = Literal["evaluate", "metrics", "agreement", "compare", "audit", "retry-errors",
                  "leaderboard"]
JobMode = Literal["live", "batch"]
FileKind = Literal["schema", "dialogues", "predictions", "labels", "rules", "sample",
                   "corrections"]
LabelValue = Literal["correct", "incorrect", "unsure"]

MAX_PAGE = 1000
"""The largest ``limit`` of a list request."""
MAX_OFFSET = 2**31 - 1
"""The largest ``offset`` (and row id) a request may name: what every database holds."""
MAX_TURN_INDEX = 2**31 - 1


class ApiModel(BaseModel):
    """A response body: unknown members are ignored when read."""

    model_config = ConfigDict(extra="ignore")


class RequestModel(BaseModel):
    """A request body: unknown members are refused, and so are loose types (``"5"`` or
    ``5.0`` for an integer), NaN and Infinity."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# --- errors --------------------------------------------------------------------------------------


class ErrorDetail(ApiModel):
    status: int = Field(description="The HTTP status, repeated.")
    message: str = Field(description="What is wrong, in words (never a traceback).")
    field: str | None = Field(None, description=(
        "The JSON path into the request that is at fault (`options.top_p`, `inputs.schema`, "
        "`kind`), or null."))


class Error(ApiModel):
    """Every error answer of the API."""

    error: ErrorDetail


def error_body(status: int, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON of an :class:`Error` (for the handlers and middleware that write it raw)."""
    return Error(error=ErrorDetail(status=status, message=message, field=field)).model_dump()


# --- pages ---------------------------------------------------------------------------------------

class Page(ApiModel):
    """One page of a list, newest first."""

    limit: int = Field(description="The page size asked for.")
    offset: int = Field(description="How many items were skipped.")
    next_offset: int | None = Field(description=(
        "The offset of the next page, or null when this page is the last."))

    @staticmethod
    def next_of(offset: int, limit: int, count: int) -> int | None:
        return offset + count if count >= limit else None


# --- who is calling ------------------------------------------------------------------------------


class ProjectRef(ApiModel):
    id: str
    name: str


class Me(ApiModel):
    token_id: str
    name: str = Field(description="The token's name: the reviewer its labels are kept under.")
    project: ProjectRef
    scopes: list[Scope]
    spend_cap_usd: float | None


class Token(ApiModel):
    """A token as listed: never its secret, only a display prefix."""

    id: str
    project_id: str
    project: str = Field(description="The project's name.")
    name: str
    prefix: str
    scopes: list[Scope]
    spend_cap_usd: float | None = None
    created_at: float = Field(description="Unix seconds.")
    last_used_at: float | None = None
    revoked_at: float | None = None


class NewToken(Token):
    token: str = Field(description="The secret, shown this once (only its sha256 is stored).")


class TokenList(ApiModel):
    tokens: list[Token]


class TokenRequest(RequestModel):
    """The body of ``POST /v1/tokens``."""

    name: str = Field(min_length=1, max_length=200)
    scopes: list[Scope] = Field(min_length=1, max_length=4)
    spend_cap_usd: float | None = Field(None, ge=0, le=1_000_000_000, description=(
        "The most this token's jobs may spend in all, USD."))


# --- the server ----------------------------------------------------------------------------------


class Health(ApiModel):
    """Liveness: the process answers (``status`` is always ``ok``); to an admin token, also
    what it can reach besides."""

    status: Literal["ok"]
    version: str | None = Field(None, description="Only for a token with the admin scope.")
    database: Literal["ok", "unreachable"] | None = Field(
        None, description="Only for a token with the admin scope.")
    worker: dict[str, Any] | None = Field(None, description=(
        "This replica's worker (id, mode, alive, draining...), null on an API-only replica; "
        "only for a token with the admin scope."))


class Readiness(ApiModel):
    """Whether this replica should get traffic, and if not, why."""

    status: Literal["ready", "unavailable"]
    reason: str | None = Field(None, description=(
        "Why not: draining, the database unreachable, the schema not at head, or this "
        "replica's workers gone. Only for a token with the admin scope."))


class Endpoint(ApiModel):
    """A model endpoint a job may choose: its name and limits, never its URL or key."""

    name: str
    models: list[str] | None = Field(description="Models jobs may ask for; null: any.")
    default_model: str | None
    rpm: int | None = Field(description="Requests per minute shared by every job.")
    tpm: int | None = Field(description="Tokens per minute shared by every job.")
    max_concurrency: int = Field(description="The largest concurrency a job may ask for.")


class EndpointList(ApiModel):
    default: str | None = Field(description="The endpoint of a job that names none.")
    endpoints: list[Endpoint]


class UsageFigures(ApiModel):
    jobs: int
    cost_usd: float
    tokens: int


class TokenUsage(UsageFigures):
    token_id: str | None
    name: str | None
    spend_cap_usd: float | None


class Usage(ApiModel):
    project: UsageFigures
    tokens: list[TokenUsage]


# --- files ---------------------------------------------------------------------------------------


class UploadedFile(ApiModel):
    """An uploaded file; the same content uploaded again as the same kind is the same file.
    (Not called ``File``: generated clients have a binary type of that name.)"""

    id: str
    kind: FileKind
    name: str
    sha256: str = Field(description="Of the unpacked content.")
    size: int = Field(description="Unpacked bytes.")
    info: dict[str, Any] = Field(description=(
        "What the file holds (dialogues, turns, versions, system name...), by kind."))
    created_at: float = Field(description="Unix seconds.")


class FileList(Page):
    files: list[UploadedFile]


# --- jobs ----------------------------------------------------------------------------------------


class BatchProgress(ApiModel):
    """A batch job's batches, as the provider counts them."""

    files: int = Field(0, description="Request files, one batch each.")
    submitted: int = 0
    ended: int = Field(0, description="Completed, failed, expired or cancelled.")
    requests: int = 0
    requests_done: int = 0


class JobProgress(ApiModel):
    total: int | None = Field(description="Calls the job makes; null until planned.")
    done: int
    cache_hits: int
    errors: int
    tokens: int
    cost_usd: float
    eta_seconds: float | None
    worker: str | None = Field(None, description="The worker that ran it last.")
    batches: BatchProgress | None = Field(None, description="Batch jobs only.")


class Headline(ApiModel):
    """The main figures of a finished judge run, in percent."""

    tsa: float | None
    judge_jga: float | None
    rule_agreement: dict[str, float | None] = Field(description="By annotation version.")
    error_turns: int | None
    turns: int | None


class Job(ApiModel):
    id: str
    kind: JobKind
    mode: JobMode
    status: JobStatus
    endpoint: str | None
    inputs: dict[str, Any] = Field(description=(
        "Input name → file id, or job id for runs (lists where a kind takes several); an "
        "imported job's `bundle` describes where it came from."))
    options: dict[str, Any]
    budget_usd: float | None
    created_at: str = Field(description="ISO 8601, UTC.")
    started_at: str | None
    finished_at: str | None
    updated_at: str | None
    attempts: int = Field(description="Claims by a worker: more than one means it moved.")
    cancel_requested: bool
    exit_code: int | None = Field(description="The CLI's exit status of the run.")
    exit_meaning: str | None
    error: str | None
    imported: bool = Field(description="Made from an imported bundle.")
    progress: JobProgress
    headline: Headline | None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def working(self) -> bool:
        """Running, or a batch job waiting between two polls of its batches."""
        return self.status in WORKING_STATUSES

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


class SlotOutsideSchema(ApiModel):
    slot: str = Field(description="A predicted slot name the job's schema does not have.")
    turns: int = Field(description="Turns predicting it.")
    suggestion: str | None = Field(description="The closest schema slot, if one is close.")


class JobWarning(ApiModel):
    """Something the job will run with, but that looks wrong (it is queued all the same)."""

    file: str = Field(description="The file id it is about.")
    name: str
    slots: list[SlotOutsideSchema]
    message: str = Field(description="The sentence the CLI prints.")


class CreatedJob(Job):
    """The answer to a submission: the job, and what looked wrong in its inputs."""

    warnings: list[JobWarning] = Field(default_factory=list)


class JobList(Page):
    jobs: list[Job]


class ResumeRequest(RequestModel):
    """The optional body of ``POST /v1/jobs/{job_id}/resume``."""

    budget: float | None = Field(None, gt=0, le=1_000_000, description="New budget in USD.")


# --- labels --------------------------------------------------------------------------------------


class Label(ApiModel):
    """One reviewer's label of one turn (or one slot of it) of one predictions file."""

    id: int
    subject: str = Field(description="What was labelled: the predictions file's sha256.")
    job_id: str | None = Field(description="The run it was given on.")
    dialogue_id: str
    turn_index: int
    slot: str = Field(description="'' labels the whole turn.")
    label: LabelValue
    reviewer: str
    token_id: str | None
    note: str | None
    created_at: float
    updated_at: float
    blind: bool | None = Field(None, description=(
        "Given without seeing the judge's and the rules' verdicts and the gold (the review "
        "page of a sample hides them); null when not said."))


class LabelList(ApiModel):
    labels: list[Label]


class CorrectionRecord(ApiModel):
    """One line of ``GET /v1/jobs/{id}/corrections``: a decision on a label-error candidate
    as a corrections-file record (``dst-judge validate corrections --print-schema``)."""

    dialogue_id: str
    turn_index: int
    slot: str
    value: str | None = Field(description="The decided value (null: the slot holds none); "
                              "a reject gives the annotation's own value.")
    gold: str = Field(description="The annotation version it corrects.")
    reviewer: str
    time: str = Field(description="When it was decided (ISO 8601, UTC).")
    was: str | None = Field(description="The annotation's value when it was decided.")
    candidate: str = Field(description="The candidate it answers: dialogue:turn:slot.")
    note: str | None = None
    adjudicated: bool = Field(default=False,
                              description="An adjudicator's decision on a disputed candidate.")


class LabelRequest(RequestModel):
    """The body of ``PUT /v1/labels``: give ``job_id`` or ``predictions`` (or both; a 422
    naming ``job_id`` when neither is given). Not stated as an ``anyOf`` in the schema:
    generators would make two partial models of it."""

    dialogue_id: str = Field(min_length=1, max_length=300)
    turn_index: int = Field(ge=0, le=MAX_TURN_INDEX)
    slot: str = Field("", max_length=200, description="'' labels the whole turn.")
    label: LabelValue
    note: str | None = Field(None, max_length=5000)
    job_id: str | None = Field(None, max_length=40, description=(
        "The judge run whose turn is labelled; the label belongs to its predictions."))
    predictions: str | None = Field(None, max_length=40, description=(
        "Or the id of the predictions file whose turn state is labelled."))
    blind: bool | None = Field(None, description=(
        "Whether the reviewer labelled without seeing the judge's and the rules' verdicts "
        "and the gold (kept with the label and in its exports; null: not said)."))
