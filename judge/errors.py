"""The exceptions a caller of the library catches, and the CLI's exit statuses.

Every error raised on purpose derives from :class:`DSTJudgeError` (the tree is drawn in
``judge/_errors.py``, their one home); ``judge`` itself lists only the two most callers need,
:class:`DSTJudgeError` and :class:`InputError`."""

from ._errors import (
    BudgetReached,
    CassetteMiss,
    CorrectionConflicts,
    DataMismatchError,
    DSTJudgeError,
    ExitStatus,
    FormatError,
    InputError,
    LocalServerError,
    LocalSetupError,
    ModelError,
    OptionError,
    OutputError,
    ReplyError,
    RunConflict,
    RunDirectoryError,
    RunInterrupted,
    RunLocked,
    ServiceError,
    StoreError,
    exit_status_for,
)

__all__ = [
    "BudgetReached",
    "CassetteMiss",
    "CorrectionConflicts",
    "DSTJudgeError",
    "DataMismatchError",
    "ExitStatus",
    "FormatError",
    "InputError",
    "LocalServerError",
    "LocalSetupError",
    "ModelError",
    "OptionError",
    "OutputError",
    "ReplyError",
    "RunConflict",
    "RunDirectoryError",
    "RunInterrupted",
    "RunLocked",
    "ServiceError",
    "StoreError",
    "exit_status_for",
]
