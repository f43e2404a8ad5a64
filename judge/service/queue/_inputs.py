"""A job's inputs on the worker: its files on local disk (by upload name in every message and
result), parsed once per worker process, the ``limit``/``dialogue_ids`` subset, the corrections
it names; and the one cleaning of results and messages, so that no server path, URL or key
leaves the server."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..._errors import InputError
from ...data import (
    CorrectedGold,
    DialogueSet,
    Located,
    load_dialogues,
    load_schema,
    read_corrections,
)
from ...method import default_rules, load_rules, packaged_rules_path
from ..db import Database, files
from ..storage import FileStore

_SCRUBBED_OPTIONS = ("base_url", "cache_dir", "prices", "api_key_set", "organization",
                     "project", "http_backend")


class Inputs:
    """The job's files on local disk, and their upload names for messages and results."""

    def __init__(self, db: Database, store: FileStore, project_id: str) -> None:
        self.db = db
        self.store = store
        self.project_id = project_id
        self.names: dict[str, str] = {}
        self._rows: dict[str, dict[str, Any]] = {}

    def prefetch(self, file_ids: list[str | None]) -> None:
        """Look up several input files in one query (a job's schema, dialogues, predictions
        and rules) instead of one each."""
        wanted = [i for i in file_ids if i]
        with self.db.query() as conn:
            self._rows.update((row.id, dict(row._mapping)) for row in conn.execute(
                sa.select(files).where(files.c.id.in_(wanted),
                                       files.c.project_id == self.project_id)))

    def path(self, file_id: str) -> tuple[Path, dict[str, Any]]:
        row = self._rows.get(file_id)
        if row is None:
            with self.db.query() as conn:
                found = conn.execute(sa.select(files).where(
                    files.c.id == file_id, files.c.project_id == self.project_id)).first()
            if found is None:
                raise InputError(f"input file {file_id} was deleted")
            row = self._rows[file_id] = dict(found._mapping)
        path = self.store.local_path(row["sha256"])
        self.names[str(path)] = row["name"]
        return path, row

    def clean(self, text: str) -> str:
        """Upload names instead of server paths; then what is left of this machine's paths
        (the built-in rules, the data directory, the installation) named, not shown."""
        for path, name in self.names.items():
            text = text.replace(path, name)
        for path, name in server_paths(self.store.root.parent):
            text = text.replace(path, name)
        return text


@functools.lru_cache(maxsize=8)
def server_paths(data_dir: Path) -> tuple[tuple[str, str], ...]:
    """The paths of the server's machine a job's results and messages could name (a default
    rule set's source, a run directory, a file of the installation), longest first, each
    with what a client is shown instead: none of them is the client's business."""
    rules = packaged_rules_path()
    install = Path(__file__).resolve().parents[3]  # the folder holding the judge package
    found = {str(rules): f"built-in {rules.name}", str(rules.resolve()): f"built-in {rules.name}"}
    for path, name in ((data_dir, "<data dir>"), (install, "<dst-judge>")):
        found.setdefault(str(path), name)
        found.setdefault(str(path.resolve()), name)
    found.pop(str(Path(install.anchor)), None)  # never the root itself: it is in every path
    return tuple(sorted(found.items(), key=lambda item: -len(item[0])))


class ParsedFiles:
    """Schemas, dialogue sets and rule sets parsed once per worker process, by file path.

    Safe to share: stored files are content-addressed (a path names one content for good),
    and the library never changes a loaded schema, dialogue set or rule set (several systems
    of one run share them too). Every job of a benchmark or a team shares its schema and
    dialogues; parsing and validating them again cost each job tens of milliseconds."""

    def __init__(self, size: int = 8) -> None:
        self.schema = functools.lru_cache(size)(load_schema)
        self.dialogues = functools.lru_cache(max(1, size // 2))(load_dialogues)
        self.rules = functools.lru_cache(size)(load_rules)
        self.default_rules = functools.lru_cache(size)(
            lambda schema_path: default_rules(self.schema(schema_path)))


def stem(name: str) -> str:
    """An upload's name without its file extensions (a system's name by default)."""
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def subset(dialogues: DialogueSet, options: dict[str, Any]) -> DialogueSet:
    """The dialogues a job judges: ``options.dialogue_ids``, then the first ``limit``."""
    if options.get("dialogue_ids"):
        dialogues = dialogues.subset(options["dialogue_ids"], source="options.dialogue_ids")
    if options.get("limit") is not None:
        dialogues = dialogues.subset([d.dialogue_id for d in
                                      dialogues.dialogues[: options["limit"]]])
    return dialogues


def scrub_summary(summary: dict[str, Any], endpoint: str | None, inputs: Inputs
                  ) -> dict[str, Any]:
    """No server path, URL or key in a result: options keep the endpoint's name only."""
    text = inputs.clean(json.dumps(summary, ensure_ascii=False))
    clean: dict[str, Any] = json.loads(text)  # the summary's own text, scrubbed: an object
    options = clean.get("options")
    if isinstance(options, dict):
        for name in _SCRUBBED_OPTIONS:
            options.pop(name, None)
        if endpoint is not None:
            options["endpoint"] = endpoint
    return clean


def ids_of(value: Any) -> list[str]:
    """A job input's file ids (one id or a list)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def read_correction_files(inputs: Inputs, file_ids: list[str]) -> list[Located]:
    """Every correction of a job's ``inputs.corrections`` files (of the job's project; upload
    names stand for the server's paths in every message)."""
    found: list[Located] = []
    for file_id in file_ids:
        path, _ = inputs.path(file_id)
        found.extend(read_corrections([path]))
    return found


def corrections_summary(corrected: list[CorrectedGold]) -> list[dict[str, Any]]:
    """What a result says of the corrected gold it used (see :meth:`CorrectedGold.summary`)."""
    return [c.summary() for c in corrected]



def finite(value: Any) -> Any:
    """NaN (an interval of one dialogue) as null: results are strict JSON."""
    return None if isinstance(value, float) and value != value else value


def as_json(data: Any, inputs: Inputs) -> Any:
    """A result as the JSON a job stores: server paths named, not shown."""
    return json.loads(inputs.clean(json.dumps(data, ensure_ascii=False, default=str)))
