"""``/v1/bundles``: import a job exported by another server as a finished job."""

from __future__ import annotations

from typing import Annotated

from fastapi import File, UploadFile, status

from ...._api_models import Job
from .._bundles import import_bundle as read_bundle
from ._common import ServiceDep, Submitter, api_router, errors
from .jobs import JOB_LINKS

router = api_router("results")


@router.post("/bundles", status_code=status.HTTP_201_CREATED, response_model=Job,
             responses={201: {"description": "The imported job (`imported: true`).",
                              "links": {name: JOB_LINKS[name] for name in (
                                  "get_job", "get_job_results", "delete_job")}},
                        **errors(403, 422)})
def import_bundle(principal: Submitter, service: ServiceDep,
                      file: Annotated[UploadFile, File(description=(
                          "A bundle (`.tar.gz`) from `GET /v1/jobs/{job_id}/export`."))]
                      ) -> Job:
    """Multipart `file`: import a bundle as a finished job (`imported: true`)."""
    return Job.model_validate(read_bundle(service, principal, file.file))
