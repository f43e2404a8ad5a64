"""MkDocs hooks: parts of pages generated at build time, so they cannot drift from the code.

* ``<!-- generated:openapi -->`` becomes the table of the HTTP API's operations, read from
  ``docs/openapi.json`` (published with the site as it is). That file is the app's own OpenAPI
  document, written by ``python -m tests.service.openapi_docs`` and kept equal to the live app
  by ``tests/service/http/test_service_openapi.py``; the hooks read the file instead of building the
  app because the ``docs`` extra does not install the ``serve`` extra's packages (fastapi).
* ``<!-- generated:bench NAME -->`` becomes the tables a benchmark script last wrote to
  ``bench/results/NAME.json`` (with the command, date and machine they were measured on).
* ``<!-- generated:bench NAME pending -->`` marks the place of a table whose script
  ``bench/NAME.py`` has not been run yet (it needs a model the build machine lacks): it says
  so on the page. Once ``bench/results/NAME.json`` exists the build fails until the word
  ``pending`` is dropped, so a table cannot stay hidden behind the marker.

The pages also read as plain Markdown (on GitHub, in an editor), so the rendered tables are
written into them too, between the marker and ``<!-- end generated:bench NAME -->``:
``python docs/_hooks.py`` rewrites every such block from ``bench/results/`` (run it after a
benchmark), and ``tests/test_docs.py`` fails when a committed block differs from what the
results render. The build replaces the whole block, so the site always shows the results.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_BENCH = re.compile(r"<!-- generated:bench ([\w.-]+)( pending)? -->"
                    r"(?:\n.*?\n<!-- end generated:bench \1 -->)?", re.S)
_OPENAPI = "<!-- generated:openapi -->"
_SPEC: dict[str, Any] = {}


def openapi_document() -> dict[str, Any]:
    """The service's OpenAPI document, as committed in ``docs/openapi.json``."""
    if not _SPEC:
        _SPEC.update(json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")))
    return _SPEC


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def operations_table(spec: dict[str, Any]) -> str:
    rows = ["| method | path | operation | scope | what it does |",
            "| --- | --- | --- | --- | --- |"]
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            scope = op.get("x-scope") or ("none" if not op.get("security") else "token")
            rows.append(f"| `{method.upper()}` | `{path}` | `{op.get('operationId', '')}` | "
                        f"{_cell(scope)} | {_cell(op.get('summary', ''))} |")
    return "\n".join(rows)


def pending_table(name: str) -> str:
    """The note in place of a table whose benchmark has not been run yet."""
    script = ROOT / "bench" / f"{name}.py"
    if not script.is_file():
        raise FileNotFoundError(f"docs: a pending table names {script}, which does not exist")
    if (ROOT / "bench" / "results" / f"{name}.json").is_file():
        raise ValueError(f"docs: bench/results/{name}.json exists: drop 'pending' from "
                         f"<!-- generated:bench {name} pending -->")
    return (f"*Not measured yet: `python bench/{name}.py` writes these figures to "
            f"`bench/results/{name}.json`.*")


def bench_tables(name: str) -> str:
    path = ROOT / "bench" / "results" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"docs: {path} is missing: run the benchmark that writes it")
    record = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for table in record["tables"]:
        if table.get("title"):
            parts.append(f"**{table['title']}**\n")
        parts.append("| " + " | ".join(_cell(c) for c in table["columns"]) + " |")
        parts.append("|" + " --- |" * len(table["columns"]))
        parts.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in table["rows"])
        if table.get("note"):
            parts.append(f"\n{table['note']}")
        parts.append("")
    load = record.get("load_average")
    busy = f" (load average {load} at the end)" if load is not None else ""
    parts.append(f"*Measured {record['measured_at']} on {record['machine']}{busy} with "
                 f"`{record['command']}`.*")
    return "\n".join(parts)


def _rendered(match: re.Match[str]) -> str:
    return (pending_table if match.group(2) else bench_tables)(match.group(1))


def with_bench_blocks(markdown: str) -> str:
    """The page with each benchmark marker followed by its rendered tables and the end
    marker (what ``python docs/_hooks.py`` writes into the Markdown files)."""
    def block(match: re.Match[str]) -> str:
        name, pending = match.group(1), match.group(2) or ""
        return (f"<!-- generated:bench {name}{pending} -->\n{_rendered(match)}\n"
                f"<!-- end generated:bench {name} -->")

    return _BENCH.sub(block, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if _OPENAPI in markdown:
        markdown = markdown.replace(_OPENAPI, operations_table(openapi_document()))
    return _BENCH.sub(_rendered, markdown)


def write_bench_blocks(folder: Path = ROOT / "docs") -> list[Path]:
    """Rewrite the benchmark blocks of every page under ``folder``; the pages changed."""
    changed = []
    for page in sorted(folder.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        new = with_bench_blocks(text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    for written in write_bench_blocks():
        print(f"rewrote the benchmark tables of {written.relative_to(ROOT)}")
