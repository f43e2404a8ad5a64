"""``/v1/files``: upload, list, describe, download and delete input files."""

from __future__ import annotations

from typing import Annotated

from fastapi import File, Form, Path, Query, Response, UploadFile, status

from ...._api_models import MAX_OFFSET, MAX_PAGE, FileKind, FileList, UploadedFile
from .._streams import OctetStreamResponse, attachment
from ._common import Reader, ServiceDep, Submitter, api_router, errors

router = api_router("files")
FileId = Annotated[str, Path(max_length=40, description="A file id (`file_...`).")]


@router.post("/files", status_code=status.HTTP_201_CREATED, response_model=UploadedFile,
             responses={200: {"model": UploadedFile,
                              "description": "The same content was uploaded as this kind "
                              "before: that file."},
                        **errors(403, 422)})
def upload_file(principal: Submitter, service: ServiceDep, response: Response,
                file: Annotated[UploadFile, File(description=(
                    "The content; `.gz` is unpacked. Validated as the CLI validates it."))],
                kind: Annotated[FileKind, Form()],
                name: Annotated[str | None, Form(max_length=300)] = None) -> UploadedFile:
    """Multipart: `file`, `kind`, optional `name`; `.gz` is unpacked. 201 new; 200 when the
    same content (sha256 of the unpacked bytes) was uploaded as that kind before."""
    record, new = service.files.add(principal.project_id, kind, name or file.filename,
                                    file.file, principal.token_id)
    if not new:
        response.status_code = status.HTTP_200_OK
    return UploadedFile.model_validate(record)


@router.get("/files", response_model=FileList, responses=errors(422))
def list_files(principal: Reader, service: ServiceDep, kind: FileKind | None = None,
               limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
               offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> FileList:
    """The project's files, newest first."""
    items = service.files.list(principal.project_id, kind=kind, limit=limit, offset=offset)
    return FileList(files=[UploadedFile.model_validate(i) for i in items], limit=limit,
                    offset=offset, next_offset=FileList.next_of(offset, limit, len(items)))


@router.get("/files/{file_id}", response_model=UploadedFile, responses=errors(404, 422))
def get_file(principal: Reader, service: ServiceDep, file_id: FileId) -> UploadedFile:
    """The file's record; `info` describes it (dialogues, turns, versions, system name...)."""
    return UploadedFile.model_validate(service.files.get(principal.project_id, file_id))


@router.get("/files/{file_id}/content", response_class=OctetStreamResponse,
            responses={200: {"description": "The unpacked content, as an attachment."},
                       **errors(404, 410, 422)})
def get_file_content(principal: Reader, service: ServiceDep,
                     file_id: FileId) -> OctetStreamResponse:
    """The unpacked content, as an attachment."""
    record = service.files.get(principal.project_id, file_id)
    return OctetStreamResponse(service.files.open_content(record["sha256"]),
                               headers=attachment(record["name"]))


@router.delete("/files/{file_id}", status_code=status.HTTP_204_NO_CONTENT,
               response_class=Response, responses=errors(403, 404, 409, 422))
def delete_file(principal: Submitter, service: ServiceDep, file_id: FileId) -> Response:
    """Delete a file (409 while a queued or running job reads it)."""
    service.jobs.refuse_if_in_use(principal.project_id, file_id)
    service.files.delete(principal.project_id, file_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
