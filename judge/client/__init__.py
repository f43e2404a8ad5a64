"""The Python client of the evaluation service: ``judge.Client(url, token)``.

It needs httpx and pydantic only (core dependencies), not the ``serve`` extra, so anyone can
submit jobs to a lab's server without installing FastAPI or a database driver. Its answers are
the API's models, exported here for type hints (``judge.client.Job``).
"""

from .._api_models import (
    BatchProgress,
    CreatedJob,
    Endpoint,
    FileKind,
    Headline,
    Health,
    Job,
    JobProgress,
    JobWarning,
    Label,
    LabelRequest,
    Me,
    TokenUsage,
    UploadedFile,
    Usage,
    UsageFigures,
)
from ._client import Client

__all__ = [
    "BatchProgress",
    "Client",
    "CreatedJob",
    "Endpoint",
    "FileKind",
    "Headline",
    "Health",
    "Job",
    "JobProgress",
    "JobWarning",
    "Label",
    "LabelRequest",
    "Me",
    "TokenUsage",
    "UploadedFile",
    "Usage",
    "UsageFigures",
]
