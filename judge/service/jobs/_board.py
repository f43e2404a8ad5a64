"""What a ``leaderboard`` job may ask for: its inputs (systems as predictions files and judge
runs, mixed; the dialogues and schema; corrections) and its options, one typed model.

The model follows the shape of the other kinds' options (strict JSON types, ranges, no unknown
name, no NaN or Infinity), so it can join their table of one model per kind as it is. A refusal
is a 422 naming the field as a JSON path (``options.confidence``, ``inputs.systems[2]``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ..._errors import ServiceError
from ..._validation import first_problem

MAX_SYSTEMS = 100
MAX_VERSIONS = 10

LEADERBOARD_INPUTS: dict[str, tuple[str, bool, bool]] = {
    # input name -> (what it refers to, required, list); a system that is a job id
    # (``job_...``) refers to a judge run instead of a predictions file
    "systems": ("predictions", True, True),
    "schema": ("schema", True, False),
    "dialogues": ("dialogues", True, False),
    "corrections": ("corrections", False, True),
}

_Name = Annotated[str, StringConstraints(min_length=1, max_length=100)]
_Version = Annotated[str, StringConstraints(min_length=1, max_length=50)]


class LeaderboardOptions(BaseModel):
    """leaderboard: the gold versions, the interval, the correction across pairs, the systems'
    names and whether to compute the breakdowns (``dst-judge leaderboard``'s options of the
    same names)."""

    model_config = ConfigDict(title="LeaderboardOptions", extra="forbid", strict=True,
                              allow_inf_nan=False)

    gold: Annotated[list[_Version], Field(min_length=1, max_length=MAX_VERSIONS)] | None = Field(
        default=None, description="annotation versions scored against, e.g. [\"2.1\", \"2.4\"] "
        "(default: the dialogues file's first); each corrected by inputs.corrections is "
        "followed by its corrected version")
    confidence: Annotated[float, Field(ge=0.5, lt=1.0)] = Field(
        default=0.95, description="interval coverage; the tests use alpha = 1 - confidence")
    correction: Literal["holm", "by"] = Field(
        default="holm", description="multiplicity correction across all pairs: holm "
        "(family-wise error) or by (Benjamini-Yekutieli, false discovery rate)")
    names: Annotated[list[_Name], Field(min_length=2, max_length=MAX_SYSTEMS)] | None = Field(
        default=None, description="one name per system, in the order of inputs.systems "
        "(default: each file's system name or upload name; a run's job id)")
    breakdowns: bool = Field(default=True, description="JGA by domain, turn position and "
                             "dialogue length, with the same intervals")


_REASONS = {
    "confidence": "must be a number from 0.5 to below 1",
    "gold": f"must be a list of 1 to {MAX_VERSIONS} annotation versions such as '2.1'",
    "names": f"must be a list of 2 to {MAX_SYSTEMS} names of 1 to 100 characters",
    "correction": "must be 'holm' or 'by'",
    "breakdowns": "must be true or false",
}


def check_leaderboard_options(options: dict[str, Any], systems: int) -> dict[str, Any]:
    """The options checked by :class:`LeaderboardOptions` and against the number of systems
    (422 naming the option); returned as plain JSON for the job's row."""
    try:
        checked = LeaderboardOptions.model_validate(options)
    except ValidationError as exc:
        problem = first_problem(exc)
        name = str(problem.location[0]) if problem.location else ""
        if problem.kind == "extra_forbidden":
            reason = f"unknown option; accepted: {', '.join(LeaderboardOptions.model_fields)}"
        else:
            reason = _REASONS.get(name, problem.message)
        raise ServiceError(reason, status=422,
                           field=f"options.{problem.path}" if name else "options") from None
    if checked.names is not None:
        if len(checked.names) != systems:
            raise ServiceError(f"{len(checked.names)} names for {systems} systems",
                               status=422, field="options.names")
        for index, name in enumerate(checked.names):
            if checked.names.index(name) != index:
                raise ServiceError(f"{name!r} is given twice: each system needs a name of its "
                                   "own", status=422, field=f"options.names[{index}]")
    return checked.model_dump(mode="json", exclude_none=True)


def check_systems_input(systems: list[str]) -> list[tuple[str, str, str]]:
    """The references of ``inputs.systems``: a ``job_...`` id is a judge run, any other id a
    predictions file; at least two systems, none twice."""
    if len(systems) < 2:
        raise ServiceError("a leaderboard compares systems: give at least two (predictions "
                           "file ids or judge run job ids)", status=422, field="inputs.systems")
    if len(systems) > MAX_SYSTEMS:
        raise ServiceError(f"at most {MAX_SYSTEMS} systems", status=422, field="inputs.systems")
    references = []
    for index, item in enumerate(systems):
        if systems.index(item) != index:
            raise ServiceError(f"{item!r} is given twice", status=422,
                               field=f"inputs.systems[{index}]")
        references.append((f"inputs.systems[{index}]",
                           "job" if item.startswith("job_") else "predictions", item))
    return references
