"""The route table of ``docs/SERVICE.md``, generated from the app's OpenAPI document so it cannot
drift from the routes: ``python -m tests.service.openapi_docs`` rewrites it, and
``test_service_openapi.py`` fails while the file differs from what this would write."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SERVICE_MD = ROOT / "docs" / "SERVICE.md"
BEGIN = ("<!-- routes: generated from /openapi.json by `python -m tests.service.openapi_docs`; "
         "edit the handlers' docstrings, not this table -->")
END = "<!-- /routes -->"


def openapi_document() -> dict[str, Any]:
    """The document of an app with default settings (nothing is started)."""
    from judge.service import build_settings, create_app

    with tempfile.TemporaryDirectory() as folder:
        return create_app(build_settings({"data_dir": folder}), run_worker=False).openapi()


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


def with_table(text: str, table: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + table + "\n" + text[end:]


def main() -> int:
    text = SERVICE_MD.read_text(encoding="utf-8")
    SERVICE_MD.write_text(with_table(text, route_table(openapi_document())), encoding="utf-8")
    print(f"wrote the route table of {SERVICE_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
