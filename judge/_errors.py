"""The one exception tree of dst-judge.

Everything the library raises on purpose derives from :class:`DSTJudgeError`, so a caller
(and the CLI) can catch one type and print a clean message instead of a traceback::

    DSTJudgeError
    ├── InputError          a user-supplied file is malformed (names file, line, field)
    │   ├── DataMismatchError   files are individually valid but do not fit together
    │   ├── FormatError         a file is in none of the known formats
    │   ├── CorrectionConflicts corrections of the gold disagree, undecided
    │   └── OutputError     an output path cannot be written (names the path and why)
    ├── OptionError         an option value is invalid or unsupported for the input
    ├── ModelError          a model call failed after retries (``fatal`` ones stop the run)
    │   ├── CassetteMiss    a replayed run sent a request its cassette does not hold
    │   └── ReplyError      a reply arrived (and was paid for) but is not a usable completion
    ├── BudgetReached       the run spent its budget (resumable)
    ├── RunInterrupted      Ctrl-C or SIGTERM stopped the run (resumable)
    ├── RunDirectoryError   the run directory is not ours to write
    │   ├── RunLocked           another process holds its lock
    │   └── RunConflict         it holds another run's results (or results of no run)
    ├── StoreError          the ledger (reply store) is unreadable or of another format
    ├── LocalSetupError     installing local weights or building llama-server failed
    │   ├── ChecksumError
    │   └── BuildToolMissing
    ├── LocalServerError    starting, finding or stopping the local server failed
    └── ServiceError        the evaluation service refused a request (HTTP status, field)
        └── IllegalMove     a job status change the lifecycle does not allow (409)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any


class ExitStatus(IntEnum):
    """What a finished command reports to the shell (and the service in a job's status).

    The one table of meanings; :func:`exit_status_for` maps exceptions onto it and
    ``EvaluationResult.exit_status`` maps a finished run.
    """

    OK = 0
    """Every turn was judged."""
    ERROR_ROWS = 1
    """The run finished, but some turns are error rows (see summary.json ``errors``)."""
    BAD_INPUT = 2
    """Bad input or usage: a malformed file, an invalid option (nothing was judged)."""
    BUDGET_REACHED = 3
    """The run spent its budget and stopped (resumable with a higher ``--budget``)."""
    NOTHING_JUDGED = 4
    """No turn could be judged: every call failed (server down, every call HTTP 500, ...)."""
    AUTH_OR_MODEL = 5
    """The endpoint refused the key or does not know the model (HTTP 401, 403, 404)."""
    RUN_DIRECTORY = 6
    """The run directory is locked by another process or holds another run's results."""
    INTERRUPTED = 130
    """Ctrl-C (130) or SIGTERM (143) stopped the run; calls in flight were recorded."""


class DSTJudgeError(Exception):
    """Base class of every error dst-judge raises deliberately."""


class InputError(DSTJudgeError):
    """A user-supplied input file is malformed.

    The message always names the file and, where known, the line (1-based, for JSON Lines)
    and the field (a JSON path such as ``turns[3].pred_state.hotel-stars``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f": field '{self.field}'"
        return f"{where}: {self.reason}"


class DataMismatchError(InputError):
    """Dialogues and predictions (or labels) are each valid but do not fit together."""


class FormatError(InputError):
    """A file is in none of the formats dst-judge reads (or is another kind of file): the
    message names the first field that does not fit and lists the known formats."""


class CorrectionConflicts(InputError):
    """Corrections set one turn and slot of a gold annotation to different values and no
    adjudication decides between them; ``conflicts`` lists each (``describe()`` says it)."""

    def __init__(self, conflicts: Sequence[Any], *, shown: int = 10) -> None:
        self.conflicts = list(conflicts)
        lines = [c.describe() for c in self.conflicts[:shown]]
        more = len(self.conflicts) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more")
        count = len(self.conflicts)
        super().__init__(
            f"{count} {'turn and slot' if count == 1 else 'turns and slots'} with corrections "
            "that disagree (an adjudication, a record with \"adjudicated\": true, decides):"
            "\n  " + "\n  ".join(lines))


class OutputError(InputError):
    """An output path the user gave cannot be written: a directory where a file is expected,
    a missing or read-only folder, a full disk."""


class OptionError(DSTJudgeError):
    """An option has an invalid value, or one the input cannot support."""


class ModelError(DSTJudgeError):
    """A model call failed after retries (transport, HTTP status, or server error).

    For one call this becomes an error row, never a verdict. ``fatal`` errors (bad key, unknown
    model, a request missing from a replayed cassette) stop the whole run instead, because every
    other call would fail the same way.
    """

    def __init__(self, message: str, *, fatal: bool = False, status: int | None = None) -> None:
        self.fatal = fatal
        self.status = status
        super().__init__(message)


class CassetteMiss(ModelError):
    """A replayed run sent a request that the cassette does not hold."""

    def __init__(self, message: str) -> None:
        super().__init__(message, fatal=True)


class ReplyError(ModelError):
    """A reply arrived with HTTP 200 but is not a usable chat completion: malformed, larger
    than the size caps, nested too deep, or with over-long content.

    The reply was paid for, so it is recorded (as an error row with this reason), never sent
    again by the retry policy and never cached as an answer.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, fatal=False, status=200)


class JSONTooDeep(json.JSONDecodeError):
    """JSON nested deeper than the reader allows (refused before parsing, so that no reader
    recurses into it). A :class:`json.JSONDecodeError`, so every handler of bad JSON handles
    it and reports line and column."""


class BudgetReached(DSTJudgeError):
    """The run spent its budget; completed calls are in the run log, so it can resume."""


class RunInterrupted(DSTJudgeError):
    """Ctrl-C or SIGTERM stopped the run after its calls in flight were recorded (or their
    grace period ran out); ``--resume`` continues it."""

    def __init__(self, message: str, *, signal_number: int) -> None:
        self.signal_number = signal_number
        super().__init__(message)


class RunDirectoryError(DSTJudgeError):
    """The run directory cannot be written by this command."""


class RunLocked(RunDirectoryError):
    """Another process holds the run directory's lock (the message names it: pid and host)."""


class RunConflict(RunDirectoryError):
    """The directory holds results this run did not write: another run's (its manifest
    differs) or of no run (no manifest); nothing is overwritten."""


class StoreError(DSTJudgeError):
    """The ledger of paid replies cannot be read (corrupted, or a newer format)."""


class LocalSetupError(DSTJudgeError):
    """Installing the weights or building the server failed (the message says how to fix it)."""


class ChecksumError(LocalSetupError):
    """The assembled weights do not have the published size or sha256."""


class BuildToolMissing(LocalSetupError):
    """cmake, a build tool or a compiler needed for ``llama-server`` is not installed."""

    def __init__(self, message: str, missing: Sequence[str]) -> None:
        self.missing = list(missing)
        super().__init__(message)


class LocalServerError(DSTJudgeError):
    """Starting, finding or stopping the local server failed."""


class ServiceError(DSTJudgeError):
    """A request the evaluation service refuses (raised by the server, which answers it as a
    JSON error), or the refusal the Python client received: HTTP ``status``, a message, and
    the ``field`` at fault as a JSON path (``options.base_url``) where there is one."""

    def __init__(self, message: str, *, status: int, field: str | None = None) -> None:
        self.status = status
        self.field = field
        self.reason = message
        super().__init__(f"{field}: {message}" if field else message)


class IllegalMove(ServiceError):
    """A job move the lifecycle (``judge/service/jobs/_lifecycle.py``) does not allow: 409, the job
    is in a state that forbids it. ``source`` and ``target`` are job statuses (``None``: a new
    job)."""

    def __init__(self, source: Enum | None, target: Enum) -> None:
        where = "a new job" if source is None else f"a {source.value} job"
        super().__init__(f"{where} cannot become {target.value}", status=409)
        self.source = source
        self.target = target


class DatabaseUnavailable(ServiceError, StoreError):
    """The database does not answer (restarting, unreachable) or stays locked: the API answers
    503 and the worker waits for it, never a 500 or a failed job. A :class:`StoreError` too,
    since the ledger of paid replies lives there: the model client's background renewals
    and releases of ledger claims let it pass, as they do any ledger error."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("the database is unavailable for the moment (restarting or busy); "
                         "try again shortly", status=503)
        self.detail = f"{cause.__class__.__name__}: {str(cause).splitlines()[0][:200]}" \
            if str(cause) else cause.__class__.__name__



def exit_status_for(exc: BaseException) -> ExitStatus | int:
    """The exit status of a command that ended with ``exc``."""
    if isinstance(exc, BudgetReached):
        return ExitStatus.BUDGET_REACHED
    if isinstance(exc, RunInterrupted):
        return 128 + exc.signal_number
    if isinstance(exc, RunDirectoryError):
        return ExitStatus.RUN_DIRECTORY
    if isinstance(exc, CassetteMiss):
        return ExitStatus.BAD_INPUT
    if isinstance(exc, ModelError):
        if exc.status in (401, 403, 404):
            return ExitStatus.AUTH_OR_MODEL
        return ExitStatus.NOTHING_JUDGED
    if isinstance(exc, KeyboardInterrupt):
        return ExitStatus.INTERRUPTED
    return ExitStatus.BAD_INPUT
