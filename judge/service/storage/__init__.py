"""What a project keeps besides its jobs: uploaded files (content-addressed, checked on upload),
human labels, review samples, reviewers' decisions, and the reads of judgment rows that pages
of many turns need."""

from ._decisions import (
    DecisionStore,
    candidate_id,
    corrections_records,
    may_adjudicate,
    outcomes,
    progress,
    reviewer_agreement,
)
from ._files import FileStore, bounded_info
from ._labels import LabelStore, job_subject, predictions_sha256, subject_key
from ._reads import JudgmentReads
from ._samples import ESTIMATE, ReviewSamples, separate_name
from ._slotcheck import job_warnings
from ._unpack import unpack_upload

__all__ = [
    "ESTIMATE",
    "DecisionStore",
    "FileStore",
    "JudgmentReads",
    "LabelStore",
    "ReviewSamples",
    "bounded_info",
    "candidate_id",
    "corrections_records",
    "job_subject",
    "job_warnings",
    "may_adjudicate",
    "outcomes",
    "predictions_sha256",
    "progress",
    "reviewer_agreement",
    "separate_name",
    "subject_key",
    "unpack_upload",
]
