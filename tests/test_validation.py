"""One helper turns every validation error into a JSON path and a message
(``judge/_validation.py``): pydantic's union tags and ``Value error,`` prefixes never reach a
person, FastAPI's ``body``/``query`` step is dropped, jsonschema errors read the same way, and
the service, the settings, the CLI and the client all say the path."""

from __future__ import annotations

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError, field_validator

from judge._validation import REQUEST_PARTS, first_problem, json_path, schema_problem


class _Turn(BaseModel):
    user: str
    scores: list[int] = []


class _Dialogue(BaseModel):
    dialogue_id: str
    turns: list[_Turn]
    limit: int | list[int] = 1

    @field_validator("dialogue_id")
    @classmethod
    def _no_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


def _error(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Dialogue.model_validate(data)
    return caught.value


def test_a_json_path_names_keys_and_indexes():
    assert json_path(("turns", 3, "pred_state", "hotel-stars")) == "turns[3].pred_state.hotel-stars"
    assert json_path((0, "user")) == "[0].user"
    assert json_path(()) == ""


def test_the_first_problem_is_a_path_into_the_value_with_pydantic_s_message():
    problem = first_problem(_error({"dialogue_id": "d1", "turns": [{"user": "hi"},
                                                                    {"user": 5}]}))
    assert problem.path == "turns[1].user"
    assert problem.message == "Input should be a valid string"
    assert problem.kind == "string_type" and problem.value == 5
    assert problem.more == 0 and not problem.union
    assert str(problem) == "turns[1].user: Input should be a valid string"


def test_further_problems_are_counted():
    problem = first_problem(_error({"dialogue_id": "d1", "turns": [{"user": 1}, {"user": 2}]}))
    assert problem.path == "turns[0].user" and problem.more == 1


def test_a_union_member_s_tag_is_not_part_of_the_path():
    problem = first_problem(_error({"dialogue_id": "d1", "turns": [], "limit": "many"}))
    # pydantic's own location is ('limit', 'int') for the first member tried
    assert problem.location == ("limit",) and problem.path == "limit"
    assert problem.union


def test_a_validator_s_message_loses_pydantic_s_prefix():
    problem = first_problem(_error({"dialogue_id": " ", "turns": []}))
    assert problem.path == "dialogue_id"
    assert problem.message == "must not be blank"


def test_a_request_error_drops_where_fastapi_found_it_but_never_the_whole_path():
    errors = [{"loc": ("body", "options", "top_p"), "msg": "Input should be a valid number",
               "type": "float_parsing", "input": "x"}]
    assert first_problem(errors, skip=REQUEST_PARTS).path == "options.top_p"
    missing = [{"loc": ("body",), "msg": "Field required", "type": "missing"}]
    assert first_problem(missing, skip=REQUEST_PARTS).path == "body"
    assert first_problem([]).message == "invalid value"
    assert str(first_problem([])) == "invalid value"


def test_a_jsonschema_error_reads_the_same_way():
    schema = {"type": "object", "properties": {"turns": {"type": "array", "items": {
        "type": "object", "properties": {"user": {"type": "string"}}}}}}
    error = next(jsonschema.Draft202012Validator(schema).iter_errors({"turns": [{"user": 1}]}))
    problem = schema_problem(error)
    assert problem.path == "turns[0].user"
    assert problem.message == "1 is not of type 'string'" and problem.kind == "type"


def test_job_options_are_named_by_their_json_path():
    """The service's option check (one of the callers): an item of a list option is named by
    its index, in the API's own path style."""
    pytest.importorskip("fastapi", reason="the service needs the serve extra")
    from judge._errors import ServiceError
    from judge.service.jobs._jobspec import _metric_options

    with pytest.raises(ServiceError) as caught:
        _metric_options({"fga_lambdas": [0.5, "x"]})
    assert caught.value.field == "options.fga_lambdas[1]"
    assert caught.value.reason == "Input should be a valid number"


def test_a_config_error_names_the_option_without_pydantic_s_prefix():
    from judge._config import load_config
    from judge._errors import OptionError

    with pytest.raises(OptionError) as caught:
        load_config({"base_url": "ftp://example.test"})
    assert str(caught.value).startswith("base_url: must be an http:// or https:// URL")
