"""Shared pieces of the tests that call the web interface's view helpers directly: a bare
request, and a small run's rows and their turn index."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from judge.web import _index
from judge.web._index import build_index


def request_for(path: str = "/ui/runs/x", query: str = "", accept: str = "text/html",
                method: str = "GET") -> Request:
    """A request as a page handler receives it, without an app."""
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "headers": [(b"accept", accept.encode()),
                                                         (b"host", b"testserver")],
             "scheme": "http", "server": ("testserver", 80), "root_path": "", "state": {}}
    return Request(scope)


INDEX_ROWS: list[dict[str, Any]] = [
    {"dialogue_id": "D1", "turn_index": 0, "verdict": True, "system": "",
     "user": "  Hello \n  World  ", "rule": {"2.1": True, "2.4": "x"},
     "pred_turn_state": {"hotel-area": "north"},
     "gold_turn_state": {"2.1": {"hotel-area": "north"}, "2.4": {"hotel-area": "north|centre"}}},
    {"dialogue_id": "D1", "turn_index": 1, "verdict": False, "system": "Sys", "user": "Book",
     "rule": {"2.1": True, "2.4": False},
     "pred_turn_state": {"hotel-area": "east", "taxi-leave": "5"},
     "gold_turn_state": {"2.1": {"hotel-area": "east", "taxi-leave": "6"}, "2.4": None},
     "incorrect": ["taxi-leave"], "missed": ["attraction-type", "taxi-leave"]},
    {"dialogue_id": "D2", "turn_index": 0, "verdict": "yes", "error": "boom", "user": "x",
     "rule": {"2.1": False}, "pred_turn_state": {},
     "gold_turn_state": {"2.1": {"bus-day": "mon"}}},
    {"dialogue_id": "D2", "turn_index": 1, "verdict": True, "system": "S", "user": "Find HOTEL",
     "rule": {"2.1": False, "2.4": True},
     "pred_turn_state": {"hotel-name": "none", "hotel-area": "west"},
     "gold_turn_state": {"2.1": {"hotel-area": "west"}, "2.4": {"hotel-area": "west"}}},
]


def index_of(rows: list[dict[str, Any]] | None = None) -> _index.RunIndex:
    """The turn index of ``rows`` (by default ``INDEX_ROWS``) as a finished run's."""
    return build_index("j", ("t", "succeeded"), iter(rows or INDEX_ROWS), None)



class RunRow:
    """A stored run's row as the index cache and the agreement board read it."""

    def __init__(self, job_id: str, turns: int = 4, updated_at: float = 1.0) -> None:
        self.id, self.project_id, self.updated_at, self.status = job_id, "lab", updated_at, "ok"
        self.summary = {"turns": turns}
