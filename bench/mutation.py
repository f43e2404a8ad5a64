"""Mutation testing of the service's guarantees with mutmut 3: how many planted bugs the tests
catch, per module, and which survive.

Each module group (``GROUPS``: the code to mutate and the tests that cover it) runs in a copy
of the project in a temporary directory, so the worktree never holds a mutant. mutmut first
runs the group's tests once to learn which test reaches which function, then runs for each
mutant only the tests that reach its function, under a time bound (mutmut's: a multiple of the
tests' own time, then SIGXCPU; and pytest-timeout's per test, ``--test-timeout``). Prints and
writes as JSON (``--out``, default ``out/mutation.json``) per group: killed,
survived, timeout, no tests and total, the kill rate, and every survivor (file, line, the
changed line before and after).

    python bench/mutation.py                      # every group (hours on two cores)
    python bench/mutation.py store service-auth   # some groups
    python bench/mutation.py --list
    python bench/mutation.py all --sample 250 --seed 29 --widen   # a draw over everything
    python bench/mutation.py metrics --keep        # then, after adding tests:
    python bench/mutation.py metrics --recheck /tmp/dst-judge-mutation-metrics-XXXX

Not part of .ci/run: a full run takes far longer than CI's budget. The base settings are
``[tool.mutmut]`` in pyproject.toml; this script adds ``only_mutate`` and the test selection.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("judge", "tests", "examples", "cassettes", "prompts", "rules", "pyproject.toml",
          "README.md")

GROUPS: dict[str, tuple[list[str], list[str]]] = {
    # name: (files to mutate, tests that cover them)
    "store": (["judge/store/*"],
              ["tests/store", "tests/pipeline/test_ledger_calls.py"]),
    "service-auth": (["judge/service/auth/_auth.py"],
                     ["tests/service/auth/test_auth_edges.py",
                      "tests/service/auth/test_token_names.py",
                      "tests/service/http/test_service_security.py",
                      "tests/service/http/test_route_isolation.py",
                      "tests/service/http/test_service_api.py"]),
    "service-limits": (["judge/service/ledger/_limits.py"],
                       ["tests/service/ledger/test_service_limits.py"]),
    "service-jobs": (["judge/service/jobs/_jobs.py", "judge/service/queue/_lease.py"],
                     ["tests/service/queue/test_job_leases.py",
                      "tests/service/http/test_route_isolation.py",
                      "tests/service/http/test_service_api.py"]),
    "service-ledger": (["judge/service/ledger/_ledger.py"],
                       ["tests/service/ledger/test_service_ledger.py",
                        "tests/service/ledger/test_service_shared_ledger.py"]),
    "service-labels": (["judge/service/storage/_labels.py"],
                       ["tests/service/storage/test_label_subjects.py",
                        "tests/service/http/test_route_isolation.py"]),
    "service-files": (["judge/service/storage/_files.py", "judge/service/storage/_unpack.py"],
                      ["tests/service/storage/test_service_files.py",
                       "tests/service/http/test_route_isolation.py"]),
    "service-jobspec": (["judge/service/jobs/_jobspec.py"],
                        ["tests/service/http/test_service_api.py"]),
    "service-worker": (["judge/service/queue/_worker.py", "judge/service/queue/_runners.py",
                        "judge/service/queue/_evaluate.py", "judge/service/queue/_inputs.py",
                        "judge/service/queue/_analysis.py", "judge/service/jobs/_runlog.py",
                        "judge/service/queue/_journal.py", "judge/service/queue/_process.py"],
                       ["tests/service/queue/test_job_leases.py",
                        "tests/service/http/test_service_api.py",
                        "tests/service/jobs/test_job_run_log.py",
                        "tests/service/http/test_service_e2e.py"]),
    "service-app": (["judge/service/http/_app.py", "judge/service/http/_bundles.py"],
                    ["tests/service/http/test_service_api.py",
                     "tests/service/http/test_service_security.py",
                     "tests/service/http/test_route_isolation.py"]),
    "web-session": (["judge/web/_session.py", "judge/web/_common.py"],
                    ["tests/web/test_web_csrf_property.py", "tests/web/test_web_pages.py"]),
    "web-pages": (["judge/web/_runs.py", "judge/web/_review.py", "judge/web/_detail.py",
                   "judge/web/_index.py", "judge/web/_compare.py", "judge/web/_agreement.py"],
                  ["tests/web/test_web_pages.py", "tests/web/test_web_csrf_property.py",
                   "tests/web/test_web_escaping_property.py",
                   "tests/service/http/test_route_isolation.py"]),
    "model-ledger": (["judge/model/_client.py"],
                     ["tests/pipeline/test_ledger_calls.py", "tests/model/test_client.py"]),
}
"""The ledger-facing part of ``judge/model`` is the client (it claims, awaits and records
paid requests through the ledger); the transports, prices and tokenizers are not."""
GROUPS["model-client"] = (["judge/model/_client.py", "judge/model/_http_status.py"],
                          ["tests/pipeline/test_ledger_calls.py", "tests/model",
                           "tests/hostile", "tests/test_security.py",
                           "--ignore=tests/model/local/test_live.py"])
"""The same client against every test that reaches it in process: its HTTP side (headers,
retries, redaction, reply limits) is held by the model, hostile-reply and security suites."""

SUBPROCESS_ONLY = ["tests/web/test_web_browser.py",
                   "tests/service/http/test_service_docs_browser.py",
                   "tests/service/http/test_service_schemathesis.py",
                   "tests/service/http/test_service_generated_client.py",
                   "tests/service/http/test_hostile_requests.py",
                   "tests/service/queue/test_service_fleet.py",
                   "tests/service/queue/test_service_outage.py",
                   "tests/service/queue/test_service_faults.py",
                   "tests/service/http/test_service_e2e.py",
                   "tests/service/http/test_service_replay.py",
                   "tests/web/test_web_serve.py"]
"""Suites that reach the service only through a server process of their own: mutmut can't
see which function such a test reaches, so they would only cost time in a mutation run."""

SOURCE_CHECKS = [f"tests/service/http/test_service_openapi.py::{name}" for name in (
    "test_the_route_table_of_the_docs_is_generated", "test_create_app_only_composes")]
"""Tests of the docs' and the source's text, not of behaviour: mutmut's copy has neither the
docs nor the original function bodies."""

NOT_MUTATED = ["judge/service/migrations/*"]
"""Alembic's revision scripts: data (DDL run once per database), held by the tests that compare
a migrated schema with the tables the code declares. alembic compiles them afresh at every
migration, so mutmut's copies of them (2,412 mutants, a ~30-line function per mutant) made
each test's database fixture take seconds."""

GROUPS["all"] = (["judge/store/*", "judge/service/*", "judge/web/*"],
                 ["tests/store", "tests/service", "tests/web",
                  "tests/pipeline/test_ledger_calls.py", "tests/model/test_client.py",
                  *(f"--ignore={path}" for path in SUBPROCESS_ONLY),
                  *(f"--deselect={test}" for test in SOURCE_CHECKS)])
"""Everything the mutation goal names, against every test of it; meant for ``--sample``."""

SHARED_DATA_TESTS = [f"tests/metrics/test_streamed.py::{name}" for name in (
    "test_streamed_metrics_equal_whole_shared", "test_streamed_paper_tables_equal_whole_shared")]
"""The scoring core's tests over the whole shared corpus (seconds each, and skipped where the
data is absent): the small fixtures of the same files check the same code."""
GROUPS["metrics"] = (["judge/metrics/*"],
                     ["tests/metrics", *(f"--deselect={test}" for test in SHARED_DATA_TESTS)])
GROUPS["data"] = (["judge/data/*"], ["tests/data"])
"""The scoring core against its own direct tests only (not through the pipeline or the CLI's
suites): what these groups count is how well the core is held by tests written for it."""


IN_PROCESS = ["-n", "0"]
"""The project's pytest options run tests in xdist workers (``-n auto``); mutmut learns which
test reaches which function from calls counted in its own process, so the tests run there: in
workers every mutant would count as having no tests."""

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
          34: "skipped", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout",
          255: "timeout", 37: "killed"}


def _copy_project(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "mutants", ".pytest_cache")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, target / name)


def _configure(work: Path, mutate: list[str], tests: list[str], test_timeout: float) -> None:
    """The copy's pyproject: the project's ``[tool.mutmut]`` plus this group's selection."""
    text = (work / "pyproject.toml").read_text(encoding="utf-8")
    base = tomllib.loads(text).get("tool", {}).get("mutmut", {})
    settings = {**base, "only_mutate": mutate, "pytest_add_cli_args_test_selection": tests,
                "do_not_mutate": [*base.get("do_not_mutate", []), *NOT_MUTATED],
                "pytest_add_cli_args": [*base.get("pytest_add_cli_args", []), *IN_PROCESS,
                                        f"--timeout={test_timeout:g}"]}
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", "", text)
    lines = ["[tool.mutmut]"]
    for key, value in settings.items():
        lines.append(f"{key} = {json.dumps(value)}")
    (work / "pyproject.toml").write_text(text.rstrip() + "\n\n" + "\n".join(lines) + "\n",
                                         encoding="utf-8")


def _results(work: Path) -> dict[str, int | None]:
    """Every mutant's exit code, from mutmut's ``.meta`` files."""
    codes: dict[str, int | None] = {}
    for meta in (work / "mutants").rglob("*.meta"):
        data = json.loads(meta.read_text(encoding="utf-8"))
        codes.update(data.get("exit_code_by_key", {}))
    return codes


def _functions(work: Path, path: str, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    """The source of every function in mutmut's copy of ``path`` (the original of each
    mutated function as ``<name>__mutmut_orig``, each mutant as ``<name>__mutmut_<n>``)."""
    if path not in cache:
        file = work / "mutants" / path
        text = file.read_text(encoding="utf-8") if file.is_file() else ""
        tree = ast.parse(text) if text else ast.Module(body=[], type_ignores=[])
        lines = text.splitlines()  # not ast.get_source_segment: it splits the file each time
        cache[path] = {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno])
                       for node in ast.walk(tree)
                       if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return cache[path]


SQL_KEYWORD = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|PRAGMA|VACUUM|CREATE|WHERE|AND|"
                         r"FROM|VALUES|NULL|IS|SET|OR|INTO|IGNORE|ON|CONFLICT)\b")
"""An SQL keyword as our SQL writes it (upper case): what tells a query from a message."""
STRING = re.compile(r"\"[^\"]*\"|'[^']*'")
CODEC = re.compile(r"[\"'](utf-8|ascii|latin-1)[\"']", re.IGNORECASE)
LOGGING = re.compile(r"\b(log|logger|logging)\.(debug|info|warning|error|exception)\(")


def _sql_case_only(before: str, after: str) -> bool:
    """Whether a line changed only the letter case inside SQL strings, their quoted values
    kept: SQLite and Postgres read keywords and unquoted names in any case."""
    if before == after or before.lower() != after.lower():
        return False
    if STRING.sub("", before) != STRING.sub("", after):
        return False  # code outside the strings changed
    for old, new in zip(STRING.findall(before), STRING.findall(after), strict=False):
        if old != new and (not SQL_KEYWORD.search(old) or re.findall(
                r"'[^']*'", old[1:-1]) != re.findall(r"'[^']*'", new[1:-1])):
            return False
    return True


def _in_log_call(context: list[str]) -> bool:
    """Whether the last line of ``context`` lies inside a logging call's parentheses."""
    for first in range(len(context) - 1, -1, -1):
        found = LOGGING.search(context[first])
        if found:
            if first == len(context) - 1:
                return True
            opened = "".join([context[first][found.end():], *context[first + 1:-1]])
            return 1 + opened.count("(") - opened.count(")") > 0
    return False


def classify(before: list[str], after: list[str], context: list[str]) -> str | None:
    """Why a surviving mutant may not change behaviour: ``equivalent`` (the program does the
    same: only the letter case inside SQL strings, or of a codec name), ``log text`` (only
    what a log line says), else None. Each rule looks at the changed lines alone, so prose
    that happens to say "and" or "on" is not taken for SQL."""
    pairs = list(zip(before, after, strict=False))
    if before and len(before) == len(after):
        if all(_sql_case_only(b, a) or b == a for b, a in pairs):
            return "equivalent"
        if all(b.lower() == a.lower() and CODEC.search(b) for b, a in pairs):
            return "equivalent"  # Python's codec names ignore case
    if before and _in_log_call(context):
        return "log text"
    return None


def _where(work: Path, name: str, cache: dict[str, dict[str, str]]) -> dict[str, Any]:
    """File, line and change of a mutant: its function against the original, line by line."""
    stem = name.rsplit("__mutmut_", 1)[0]
    module, _, mangled = stem.rpartition(".")
    path = module.replace(".", "/") + ".py"
    if not (work / path).is_file():  # a package's own functions live in its __init__.py
        path = module.replace(".", "/") + "/__init__.py"
    functions = _functions(work, path, cache)
    original = functions.get(f"{mangled}__mutmut_orig", "").splitlines()
    mutant = functions.get(name.rpartition(".")[2], "").splitlines()
    diff = list(difflib.unified_diff(original[1:], mutant[1:], lineterm="", n=0))
    before = [d[1:] for d in diff if d.startswith("-") and not d.startswith("---")]
    after = [d[1:] for d in diff if d.startswith("+") and not d.startswith("+++")]
    function = mangled.split("ǁ")[-1] if "ǁ" in mangled else mangled.removeprefix("x_")
    owner = mangled.split("ǁ")[1] if mangled.count("ǁ") >= 2 else None
    original_file = work / path  # the copy's unmutated source: lines as the run saw them
    source = original_file.read_text(encoding="utf-8").splitlines() \
        if original_file.is_file() else []
    start = 0
    if owner:
        start = next((i for i, text in enumerate(source)
                      if re.match(rf"class {re.escape(owner)}\b", text)), 0)
    start = next((i for i, text in enumerate(source[start:], start)
                  if re.match(rf"\s*(async\s+)?def {re.escape(function)}\b", text)), start)
    line = None
    changed = [op for op in difflib.SequenceMatcher(a=original[1:], b=mutant[1:],
                                                    autojunk=False).get_opcodes()
               if op[0] != "equal"]
    at = start + 1 + changed[0][1] if changed else -1  # the function's own line of the change
    if before and 0 <= at < len(source) and source[at].strip() == before[0].strip():
        line = at + 1
    else:  # the copy laid the function out otherwise: the first line that reads the same
        line = next((i + 1 for i, text in enumerate(source[start:], start)
                     if before and text.strip() == before[0].strip()), None)
    context = source[max(0, (line or 1) - 4):(line or 1)]
    return {"mutant": name, "file": path, "line": line, "function": function,
            "before": [b.strip() for b in before], "after": [a.strip() for a in after],
            "kind": classify(before, after, context)}


def _mutmut(work: Path, names: list[str], children: int, budget: float) -> tuple[bool, str]:
    """Run ``mutmut run`` in the copy (only ``names`` when given); stopped after ``budget``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children",
                                str(children), *names], cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=budget)
        return process.returncode == 0, output or ""
    except subprocess.TimeoutExpired:  # out of time: stop mutmut and its workers
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return False, output or ""


def _sampled(work: Path, sample: int, seed: int, children: int,
             budget: float) -> tuple[list[str], int]:
    """Draw ``sample`` mutants uniformly from all mutmut makes. A first run with a name that
    matches nothing makes the mutants and the test map, then stops before testing any."""
    _, output = _mutmut(work, ["no-such-mutant-xyzzy"], children, budget)
    if not (work / "mutants" / "mutmut-stats.json").is_file():  # a test failed or hung
        raise SystemExit(f"mutmut could not map the tests in {work}:\n{output[-3000:]}")
    population = sorted(_results(work))
    if not population:
        raise SystemExit(f"mutmut made no mutants in {work}")
    chosen = random.Random(seed).sample(population, min(sample, len(population)))
    return sorted(chosen), len(population)


def widen(work: Path, survivors: list[str], tests: list[str], test_timeout: float,
          budget: float) -> dict[str, bool]:
    """Test each survivor again against every test of each test *file* mutmut mapped to its
    function. mutmut maps a test to the functions it calls while it runs, so it misses tests
    that only read what a module-scoped fixture built, or what an earlier test left in a
    cache; a file-wide run finds those. Returns mutant -> killed (stops at ``budget``)."""
    stats = json.loads((work / "mutants" / "mutmut-stats.json").read_text(encoding="utf-8"))
    mapped = stats.get("tests_by_mangled_function_name", {})
    options = [t for t in tests if t.startswith("--")]
    killed: dict[str, bool] = {}
    deadline = time.monotonic() + budget
    for name in survivors:
        files = sorted({test.split("::")[0] for test in
                        mapped.get(re.sub(r"__mutmut_\d+$", "", name), [])})
        if not files or time.monotonic() > deadline:
            continue
        env = {**os.environ, "MUTANT_UNDER_TEST": name, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *IN_PROCESS,
                 "-p", "no:randomly", f"--timeout={test_timeout:g}", "--tb=no", *files,
                 *options], cwd=work / "mutants", env=env, capture_output=True, text=True,
                timeout=max(60.0, deadline - time.monotonic()))
            killed[name] = done.returncode != 0
        except subprocess.TimeoutExpired:
            break
    return killed


def _interval(killed: int, checked: int) -> list[float] | None:
    """95 % Wilson interval of a kill rate measured on a sample."""
    if not checked:
        return None
    from scipy.stats import binomtest  # test extra (through ppi-python); only for --sample
    low, high = binomtest(killed, checked).proportion_ci(0.95, method="wilson")
    return [round(float(low), 3), round(float(high), 3)]


def _alive(work: Path) -> list[str]:
    """A kept run's mutants that its tests did not kill (survived, or reached by no test),
    with the run's copy of the tests replaced by the worktree's current ones: what
    ``--recheck`` tests again. The code is the same, so a killed mutant stays killed; one the
    run never got to (out of time) stays unchecked, so both reports count the same mutants."""
    for tests in (work / "tests", work / "mutants" / "tests"):
        shutil.rmtree(tests, ignore_errors=True)
        shutil.copytree(ROOT / "tests", tests,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)  # map the new tests
    return sorted(name for name, code in _results(work).items()
                  if STATUS.get(code) in ("survived", "no tests"))


def run_group(name: str, *, children: int, test_timeout: float, budget: float,
              keep: bool, sample: int = 0, seed: int = 0,
              widen_survivors: bool = False, recheck: Path | None = None) -> dict[str, Any]:
    mutate, tests = GROUPS[name]
    work = recheck or Path(tempfile.mkdtemp(prefix=f"dst-judge-mutation-{name}-"))
    keep = keep or recheck is not None
    started = time.monotonic()
    try:
        names, population = ([], 0)
        if recheck is not None:
            names = _alive(work)
        else:
            _copy_project(work)
            _configure(work, mutate, tests, test_timeout)
        if sample:
            names, population = _sampled(work, sample, seed, children, budget)
        finished, output = _mutmut(work, names, children,
                                   budget - (time.monotonic() - started))
        tail = output[-2000:]
        codes = _results(work)
        if names and recheck is None:  # the rest were never meant to run
            codes = {key: codes.get(key) for key in names}
        counts: dict[str, int] = {}
        for code in codes.values():
            status = STATUS.get(code, "not checked" if code is None else "suspicious")
            counts[status] = counts.get(status, 0) + 1
        cache: dict[str, dict[str, str]] = {}
        survivors = [_where(work, m, cache) for m, code in sorted(codes.items())
                     if STATUS.get(code) == "survived"]
        killed = counts.get("killed", 0) + counts.get("timeout", 0)
        checked = killed + counts.get("survived", 0)
        aside = sum(1 for s in survivors if s["kind"])
        widened = widen(work, [s["mutant"] for s in survivors if not s["kind"]], tests,
                        test_timeout, max(0.0, budget - (time.monotonic() - started))
                        ) if widen_survivors else {}
        for survivor in survivors:
            if survivor["mutant"] in widened:
                survivor["killed_file_wide"] = widened[survivor["mutant"]]
        wide = killed + sum(widened.values())
        return {"group": name, "mutated": mutate, "tests": tests, "finished": finished,
                "seconds": round(time.monotonic() - started, 1), "total": len(codes),
                "population": population or len(codes), "seed": seed if sample else None,
                **{k.replace(" ", "_"): v for k, v in sorted(counts.items())},
                "kill_rate": round(killed / checked, 3) if checked else None,
                "equivalent": sum(1 for s in survivors if s["kind"] == "equivalent"),
                "log_text": sum(1 for s in survivors if s["kind"] == "log text"),
                "behaviour_kill_rate": round(killed / (checked - aside), 3)
                if checked > aside else None,
                "behaviour_interval": _interval(killed, checked - aside) if sample else None,
                "file_wide_kill_rate": round(wide / (checked - aside), 3)
                if widen_survivors and checked > aside else None,
                "file_wide_interval": _interval(wide, checked - aside)
                if widen_survivors and sample else None,
                "survivors": survivors, "log_tail": None if finished else tail,
                "workdir": str(work) if keep else None}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", help="groups to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the groups and exit")
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once")
    parser.add_argument("--test-timeout", type=float, default=120.0,
                        help="seconds one test may take under a mutant (pytest-timeout)")
    parser.add_argument("--budget", type=float, default=3 * 3600.0,
                        help="seconds one group's whole run may take")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "mutation.json")
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    parser.add_argument("--sample", type=int, default=0,
                        help="test only this many mutants, drawn at random (0: all)")
    parser.add_argument("--seed", type=int, default=28, help="seed of the --sample draw")
    parser.add_argument("--recheck", type=Path, default=None, metavar="WORKDIR",
                        help="test again the mutants a kept run (--keep) left alive, against "
                             "the worktree's current tests, and report the whole group "
                             "(one group)")
    parser.add_argument("--widen", action="store_true",
                        help="test each survivor again against every test of the files "
                             "mutmut mapped to it (see widen()); reported apart")
    args = parser.parse_args(argv)
    if args.list:
        for name, (mutate, tests) in GROUPS.items():
            print(f"{name:16} {' '.join(mutate)}  <-  {' '.join(tests)}")
        return 0
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {unknown}; see --list")
    if args.recheck is not None and (len(args.groups) != 1 or args.sample):
        parser.error("--recheck takes one group (the kept run's) and no --sample")
    report: list[dict[str, Any]] = []
    for name in args.groups or list(GROUPS):
        result = run_group(name, children=args.children, test_timeout=args.test_timeout,
                           budget=args.budget, keep=args.keep, sample=args.sample,
                           seed=args.seed, widen_survivors=args.widen,
                           recheck=args.recheck)
        report.append(result)
        interval = (f" 95 % interval {result['behaviour_interval']} of a sample of "
                    f"{result['total']} from {result['population']}") if args.sample else ""
        print(f"{name:16} killed {result.get('killed', 0):4}  survived "
              f"{result.get('survived', 0):4}  timeout {result.get('timeout', 0):3}  "
              f"no tests {result.get('no_tests', 0):3}  total {result['total']:4}  "
              f"kill rate {result['kill_rate']}  of behaviour changes "
              f"{result['behaviour_kill_rate']} ({result['equivalent']} equivalent, "
              f"{result['log_text']} log text)"
              f"{interval}"
              f"{'' if result['file_wide_kill_rate'] is None else ' file-wide re-check: '}"
              f"{result['file_wide_kill_rate'] or ''} {result['file_wide_interval'] or ''}"
              f"  ({result['seconds']:.0f} s"
              f"{'' if result['finished'] else ', NOT FINISHED'})", flush=True)
        for survivor in result["survivors"]:
            if not survivor["kind"]:
                print(f"    {survivor['file']}:{survivor['line']}  {survivor['before']} -> "
                      f"{survivor['after']}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
