"""``/v1/labels``: human labels of a run's turns, kept per predictions file and reviewer."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import Path, Query, Response, status

from ...._api_models import MAX_OFFSET, Label, LabelList, LabelRequest
from ...._errors import ServiceError
from .._service import Service
from .._streams import attachment
from ._common import Reader, Reviewer, ServiceDep, api_router, errors

router = api_router("labels")
_Id = Annotated[str | None, Query(max_length=40)]


def subject_of(service: Service, project_id: str, job_id: str | None,
               predictions: str | None) -> str | None:
    """What labels are about: the predictions of a judge run or of a predictions file."""
    subject = None
    if job_id is not None:
        subject = service.labels.subject_of_job(project_id, job_id)
    if predictions is not None:
        sha = service.labels.subject_of_file(project_id, predictions)
        if subject is not None and sha != subject:
            raise ServiceError(f"job {job_id!r} judged other predictions than file "
                               f"{predictions!r}", status=422, field="predictions")
        subject = sha
    return subject


@router.put("/labels", response_model=Label, responses=errors(403, 404, 422))
def put_label(principal: Reviewer, service: ServiceDep, request: LabelRequest) -> Label:
    """One label per reviewer (token name) per turn or slot of one predictions file,
    replaced on PUT. Say what was judged with `job_id` (a judge run) or `predictions` (a
    predictions file id); 422 naming `job_id` when neither does."""
    subject = subject_of(service, principal.project_id, request.job_id, request.predictions)
    if subject is None:
        raise ServiceError("say what the label judges: job_id (a judge run) or "
                           "predictions (a predictions file id)", status=422, field="job_id")
    values = request.model_dump(exclude={"predictions"})
    return Label.model_validate(service.labels.put(principal, {**values, "subject": subject}))


@router.get("/labels", response_model=LabelList,
            responses={200: {"content": {"application/x-ndjson": {"schema": {
                "type": "string", "description": "format=labels: the human labels file "
                "that `dst-judge agreement --human` reads."}}}},
                       **errors(404, 422)})
def list_labels(principal: Reader, service: ServiceDep, job_id: _Id = None,
                predictions: _Id = None,
                reviewer: Annotated[str | None, Query(max_length=200)] = None,
                format: Literal["json", "labels"] = "json") -> LabelList | Response:
    """The labels of a run's (or a file's) predictions, or of the whole project;
    `format=labels` (which needs `job_id` or `predictions`) gives the labels file that
    `dst-judge agreement --human` reads, with `predictions_sha256`."""
    subject = subject_of(service, principal.project_id, job_id, predictions)
    if subject is None and format == "labels":
        raise ServiceError("a labels file holds the labels of one predictions file: give "
                           "job_id or predictions", status=422, field="job_id")
    items = service.labels.list(principal.project_id, subject=subject, reviewer=reviewer)
    if format == "labels":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n"
                       for r in service.labels.as_label_file(items))
        return Response(text, media_type="application/x-ndjson",
                        headers=attachment("labels.jsonl"))
    return LabelList(labels=[Label.model_validate(i) for i in items])


@router.delete("/labels/{label_id}", status_code=status.HTTP_204_NO_CONTENT,
               response_class=Response, responses=errors(403, 404, 422))
def delete_label(principal: Reviewer, service: ServiceDep,
                 label_id: Annotated[int, Path(ge=1, le=MAX_OFFSET)]) -> Response:
    """Delete one of the caller's labels (admin: anyone's)."""
    service.labels.delete(principal, label_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
