"""The route table of ``docs/SERVICE.md`` and the published ``docs/openapi.json``, generated from
the app's OpenAPI document so they cannot drift from the routes: ``python -m
tests.service.openapi_docs`` rewrites both, and ``test_service_openapi.py`` fails while either
differs from what this would write. The docs site reads ``docs/openapi.json`` (its hooks cannot
import the service: the ``docs`` extra does not bring the ``serve`` extra's packages)."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SERVICE_MD = ROOT / "docs" / "SERVICE.md"
OPENAPI_JSON = ROOT / "docs" / "openapi.json"
BEGIN = ("<!-- routes: generated from /openapi.json by `python -m tests.service.openapi_docs`; "
         "edit the handlers' docstrings, not this table -->")
END = "<!-- /routes -->"


def openapi_document() -> dict[str, Any]:
    """The document of an app with default settings (nothing is started): the server's
    variables of this environment (``DST_JUDGE_SERVE_*``, which would change the limits it
    states) are left out, so every machine writes the same document."""
    from judge.service import build_settings, create_app
    from judge.service.db._settings import ENV_PREFIX

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(ENV_PREFIX)}
    try:
        with tempfile.TemporaryDirectory() as folder:
            return create_app(build_settings({"data_dir": folder}), run_worker=False).openapi()
    finally:
        os.environ.update(saved)


def _what(operation: dict[str, Any]) -> str:
    text = operation.get("description", "").split("\n\nScope:")[0]
    return re.sub(r"\s+", " ", text).strip().replace("|", "\\|")


def route_table(document: dict[str, Any]) -> str:
    """One row per operation: method and path, operation id, scope, what it does, the error
    statuses it documents."""
    rows = ["| method and path | operation | scope | what | errors |",
            "| --- | --- | --- | --- | --- |"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            scopes = ", ".join(operation.get("x-required-scopes", [])) or "none"
            codes = ", ".join(c for c in sorted(operation["responses"]) if c >= "400")
            rows.append(f"| `{method.upper()} {path}` | `{operation['operationId']}` | {scopes} "
                        f"| {_what(operation)} | {codes} |")
    return "\n".join(rows)


def document_text(document: dict[str, Any]) -> str:
    """``docs/openapi.json`` as this module writes it."""
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def with_table(text: str, table: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + table + "\n" + text[end:]


def main() -> int:
    document = openapi_document()
    text = SERVICE_MD.read_text(encoding="utf-8")
    SERVICE_MD.write_text(with_table(text, route_table(document)), encoding="utf-8")
    OPENAPI_JSON.write_text(document_text(document), encoding="utf-8")
    print(f"wrote the route table of {SERVICE_MD} and {OPENAPI_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
