"""The package's shape is enforced: stages import downward only, root helpers import no stage
(contracts in ``pyproject.toml`` under ``[tool.importlinter]``), no import circle anywhere, no
long function in the service and the web interface."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

importlinter = pytest.importorskip("importlinter", reason="import-linter is in the test extra")

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(capsys):
    from importlinter.cli import lint_imports

    cwd = os.getcwd()
    loggers = {name: logger.disabled for name, logger in logging.root.manager.loggerDict.items()
               if isinstance(logger, logging.Logger)}
    os.chdir(ROOT)
    try:
        result = lint_imports(no_cache=True)
    finally:
        os.chdir(cwd)
        # import-linter configures logging with disable_existing_loggers: undo that, or later
        # tests that read the service's log records (caplog) see none
        for name, disabled in loggers.items():
            logging.getLogger(name).disabled = disabled
    out = capsys.readouterr().out
    assert result == 0, out
    assert "0 broken" in out


def _import_graph():
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter")
    return grimp.build_graph("judge", include_external_packages=False, cache_dir=None)


def _cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iteratively), each as one
    concrete circle of imports through its modules."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(edges):
        if root in order:
            continue
        work = [(root, iter(edges[root]))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    circles = []
    for group in groups:
        start = min(group)
        step = next(m for m in edges[start] if m in group)
        back = graph.find_shortest_chain(importer=step, imported=start) or (step, start)
        circles.append([start, *back])
    return circles


def test_no_module_imports_itself_through_others():
    """No import circle anywhere in the package, counting imports under TYPE_CHECKING and
    inside functions (grimp sees both): a lazy import must not hide a circle."""
    graph = _import_graph()
    circles = _cycles(graph)
    assert not circles, "import circles:\n" + "\n".join(" → ".join(c) for c in circles)
    broken = {package: sorted(graph.nominate_cycle_breakers(package))
              for package in sorted(graph.modules) if graph.find_children(package)}
    broken = {package: imports for package, imports in broken.items() if imports}
    assert not broken, f"circles among the children of a package (imports to drop): {broken}"


def test_the_cycle_finder_finds_a_circle():
    """The check above can fail: a graph with a planted circle is reported."""
    graph = _import_graph()
    graph.add_import(importer="judge.service.db._migrate", imported="judge.service.db._db")
    assert _cycles(graph) == [["judge.service.db._db", "judge.service.db._migrate",
                               "judge.service.db._db"]]
    assert graph.nominate_cycle_breakers("judge.service.db")


LONGEST = 80
"""Lines of the longest function allowed in ``service/`` and ``web/`` (migrations aside: an
alembic revision is one long list of statements)."""


def _long_functions(folder: str) -> list[str]:
    import ast

    found = []
    for path in sorted((ROOT / "judge" / folder).rglob("*.py")):
        if "migrations" in path.relative_to(ROOT / "judge" / folder).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > LONGEST:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                                 f"({size} lines)")
    return found


@pytest.mark.parametrize("folder", ["web", "service"])
def test_no_function_is_longer_than_80_lines(folder):
    assert _long_functions(folder) == []


DATABASE_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "alembic")


def test_the_web_interface_runs_no_sql():
    """Pages read through the service's stores: no database library, no connection, no
    statement text in ``judge/web``."""
    import ast
    import re

    found = []
    for path in sorted((ROOT / "judge" / "web").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names
                      if n.split(".")[0] in DATABASE_MODULES]
            if isinstance(node, ast.Attribute) and node.attr in ("db", "engine"):
                found.append(f"{path.name}:{node.lineno} uses .{node.attr}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(
                    r"\b(SELECT|INSERT|UPDATE|DELETE)\b.+\b(FROM|INTO|SET)\b", node.value):
                found.append(f"{path.name}:{node.lineno} holds SQL text")
    assert found == []


STATE_READERS = {"judge/web/_state.py", "judge/web/_app.py",
                 "judge/service/http/_routes/_common.py", "judge/service/http/_app.py",
                 "judge/service/http/_server.py"}
"""The modules that may touch ``app.state``: the web's and the API's dependency (one
each), and the factories and the server that set it up."""


def test_pages_and_routes_reach_the_service_and_web_state_through_typed_dependencies():
    """No page or route reads ``request.app.state`` itself: they take ``ServiceDep`` and
    ``WebDep`` parameters, so what a handler uses is in its signature and checked by mypy."""
    import ast

    found = []
    for folder in ("web", "service"):
        for path in sorted((ROOT / "judge" / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in STATE_READERS:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "state" and isinstance(
                        node.value, ast.Attribute) and node.value.attr == "app":
                    found.append(f"{name}:{node.lineno}")
    assert found == []
