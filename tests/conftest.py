"""Shared test helpers: tiny in-memory data sets and the location of the optional shared data."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from judge import (
    InputError,
    MetricOptions,
    compute_metrics,
    load_dialogues,
    load_predictions,
    load_schema,
)
from tests.netguard.sitecustomize import FOLDER as NETGUARD
from tests.netguard.sitecustomize import LOG_VARIABLE, guarded_socket

pytest_plugins = ["pytester"]  # tests of the hooks below run an inner pytest session

FIXTURES = Path(__file__).parent / "fixtures"
_NETLOG = pytest.StashKey[Path]()
_HOME = pytest.StashKey[Path]()
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_run(tmp_path: Path, gold: list[list[dict]], pred: list[list[dict]],
             *, version_key: str = "gold_state_21", ids: list[str] | None = None,
             turn_outputs: list[list[dict | None]] | None = None) -> tuple[Path, Path]:
    """Write a dialogues file and a predictions file from per-dialogue lists of states."""
    ids = ids or [f"D{i}" for i in range(len(gold))]
    dialogues, predictions = [], []
    for n, (dialogue_id, g_states, p_states) in enumerate(zip(ids, gold, pred, strict=True)):
        dialogues.append({"dialogue_id": dialogue_id, "turns": [
            {"turn_index": t, "system": "", "user": "", version_key: g}
            for t, g in enumerate(g_states)]})
        turns = []
        for t, p in enumerate(p_states):
            turn = {"turn_index": t, "pred_state": p}
            if turn_outputs is not None and turn_outputs[n][t] is not None:
                turn["pred_turn_state"] = turn_outputs[n][t]
            turns.append(turn)
        predictions.append({"dialogue_id": dialogue_id, "turns": turns})
    return (write_jsonl(tmp_path / "dialogues.jsonl", dialogues),
            write_jsonl(tmp_path / "predictions.jsonl", predictions))


@pytest.fixture
def mini_schema():
    return load_schema(FIXTURES / "schema_small.json")


@pytest.fixture
def score(tmp_path, mini_schema):
    """Score in-memory states: ``score(gold, pred, **options)`` → headline metrics dict."""

    def run(gold, pred, *, gold_version=None, turn_outputs=None, version_key="gold_state_21",
            **options):
        d_path, p_path = make_run(tmp_path, gold, pred, turn_outputs=turn_outputs,
                                  version_key=version_key)
        dialogues = load_dialogues(d_path)
        predictions = load_predictions(p_path, dialogues, mini_schema)
        report = compute_metrics(dialogues, predictions, mini_schema,
                                 MetricOptions(**options), gold=gold_version)
        return report.systems[0].metrics

    return run


def assert_located(error: InputError, path: str | Path | None, line: int | None,
                   field: str | None) -> None:
    """A bad-input error names the file, line and field: as attributes and at the head of its
    message (``file:line: field 'x': reason``), so a user can go straight to the spot."""
    assert (error.path, error.line, error.field) == (
        str(path) if path is not None else None, line, field)
    where = str(path) if path is not None else "<input>"
    where += f":{line}" if line is not None else ""
    where += f": field '{field}'" if field else ""
    assert str(error).startswith(where + ": "), str(error)


SHARED_SKIP = "shared data not available"


def shared_path(*parts: str) -> Path:
    """A file of ../shared/data, or skip the test with a reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{SHARED_SKIP}: {path} (only present in the dst-judge development "
                    "workspace)")
    return path


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a shared-data test that skips although ../shared/data is present fails.

    Otherwise a moved or renamed data file would silently turn the regression checks against
    the data README's values into skips, and a green run would check nothing.
    """
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and _in_ci() and SHARED_DATA.is_dir()):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if SHARED_SKIP in reason:
        report.outcome = "failed"
        report.longrepr = (f"CI is set and {SHARED_DATA} exists, but this shared-data test "
                           f"skipped: {reason}")


# --- recorded model traffic ------------------------------------------------------------------


DEFAULT_HOST = "api.openai.com"
BLOCKED: list[str] = []
"""Hosts the guard refused, in order (tests check that the guard, not chance, stopped them)."""
UNREPLAYED: list[str] = []
"""Tests that tried to reach the default endpoint past the cassettes: the run fails (every
request to api.openai.com must be replayed from cassettes/, none may merely be refused)."""


def _refused(host: str) -> None:
    BLOCKED.append(host)
    if host == DEFAULT_HOST:
        UNREPLAYED.append(os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0])


def _is_worker(config) -> bool:
    """An xdist worker: it runs tests for the controller, which reports them."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Python subprocesses of the tests run under the guard too (tests/netguard): their
    refusals go to a file of this session, read when it ends. Each xdist worker has its own
    user directories (the controller's log is inherited). A serial run times tests out with
    the signal method (the thread method ends the process, and the run would end without a
    summary); under xdist the thread method only ends a worker, which xdist reports."""
    if not _is_worker(config) and config.getvalue("timeout_method") is None and \
            getattr(config.option, "dist", "no") == "no":
        config.option.timeout_method = "signal"
    if _is_worker(config):
        _private_user_dirs(config)
        return
    if os.environ.get(LOG_VARIABLE):  # an inner pytester session: the outer one's file
        return
    handle, log = tempfile.mkstemp(prefix="dst-judge-netlog-", suffix=".tsv")
    os.close(handle)
    os.environ[LOG_VARIABLE] = log
    _private_user_dirs(config)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(NETGUARD), os.environ.get("PYTHONPATH", "")) if p)
    config.stash[_NETLOG] = Path(log)


def _private_user_dirs(config) -> None:
    """The tests' reply cache and service data live in a directory of this session, never in
    the user's: a reply cached by one test run (say, from an older cassette) must not answer
    the next one. Live-model runs keep the user's cache, where ``local setup`` put the model."""
    if os.environ.get("DST_JUDGE_LIVE") or "live" in (config.option.markexpr or ""):
        return
    home = Path(tempfile.mkdtemp(prefix="dst-judge-test-home-"))
    os.environ["XDG_CACHE_HOME"] = str(home / "cache")
    os.environ["XDG_DATA_HOME"] = str(home / "data")
    config.stash[_HOME] = home


def _subprocess_refusals(config) -> list[str]:
    log = config.stash.get(_NETLOG, None)
    if log is None or not log.is_file():
        return []
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return [f"a subprocess ({argv})" for host, _, argv in (line.partition("\t") for line in lines)
            if host == DEFAULT_HOST]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist: a worker's unreplayed requests count in the controller's verdict."""
    UNREPLAYED.extend(getattr(node, "workeroutput", {}).get("unreplayed", []))


def pytest_sessionfinish(session, exitstatus):
    if _is_worker(session.config):
        session.config.workeroutput["unreplayed"] = list(UNREPLAYED)
    UNREPLAYED.extend(_subprocess_refusals(session.config))
    log = session.config.stash.get(_NETLOG, None)
    if log is not None:
        log.unlink(missing_ok=True)
    home = session.config.stash.get(_HOME, None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)
    if UNREPLAYED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if UNREPLAYED:
        terminalreporter.write_line(
            f"FAILED: {len(UNREPLAYED)} request(s) to {DEFAULT_HOST} were not replayed from "
            "cassettes/: " + ", ".join(sorted(set(UNREPLAYED))), red=True)


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    """Every request to api.openai.com (the default endpoint) must come from a cassette; this
    guard makes any other attempt, over httpx or aiohttp alike, fail at connect time."""
    import socket

    stand_ins = guarded_socket(_refused)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", stand_ins["connect"])
        patch.setattr(socket.socket, "connect_ex", stand_ins["connect_ex"])
        patch.setattr(socket, "getaddrinfo", stand_ins["getaddrinfo"])
        yield


@pytest.fixture(autouse=True)
def _httpx_backend_by_default(monkeypatch):
    """respx sees only httpx traffic, so every test talks httpx unless it names another
    backend in its config (tests that do use the real local fault server on 127.0.0.1).
    Together with the catch-all cassette route this keeps any request off the network."""
    monkeypatch.setenv("DST_JUDGE_HTTP_BACKEND", "httpx")


ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "cassettes"
EXAMPLES = ROOT / "examples"

SLOT_NOT_IN_SCHEMA = "train-book time"
"""A slot name the example schema lacks (the train domain books people only); its closest
schema slot is ``restaurant-book time``."""


def predictions_with_slot_errors(path: Path, *, typo: bool = True) -> Path:
    """The example predictions with slot-name mistakes planted (the example itself has none):
    ``train-leaveat`` (one turn) renamed to :data:`SLOT_NOT_IN_SCHEMA`, and unless ``typo`` is
    false, every ``hotel-pricerange`` misspelt ``hotel-pricerang``. Written to ``path``."""
    text = (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8")
    assert text.count('"train-leaveat"') == 2  # its turn state and its state, in one turn
    text = text.replace('"train-leaveat"', f'"{SLOT_NOT_IN_SCHEMA}"')
    if typo:
        text = text.replace("hotel-pricerange", "hotel-pricerang")
    path.write_text(text, encoding="utf-8")
    return path


_OLD_PROMPTS = ("recorded with the prompts before issue 13's prompt budget and not yet "
                "re-recorded on the local model (README: Cassettes)")
STALE_CASSETTES: dict[str, str] = {
}
"""Cassettes recorded with older prompts and not yet re-recorded (README: *Cassettes*): the
tests that replay them skip, saying so, instead of failing on the first unmatched request."""


def require_cassette(name: str) -> None:
    """Skip the calling test when the cassette cannot replay the current prompts."""
    if name in STALE_CASSETTES:
        pytest.skip(f"cassette {name} is stale: {STALE_CASSETTES[name]}")


def replayed_example_run(tmp_path: Path, name: str = "run",
                         cassette: str = "example-two-dim.json", *extra: str,
                         predictions: str = "predictions.jsonl") -> Path:
    """Judge the project's example with ``dst-judge evaluate`` replaying ``cassette`` into
    ``tmp_path/name`` (``extra``: more evaluate options); the run directory."""
    from judge.cli import main

    require_cassette(cassette)
    out = tmp_path / name
    assert main(["evaluate", "--schema", str(EXAMPLES / "schema.json"),
                 "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                 "--predictions", str(EXAMPLES / predictions), "--model", "local",
                 "--replay", str(CASSETTES / cassette), "--cache-dir", str(tmp_path / "cache"),
                 "--out", str(out), *extra]) == 0
    return out


def mount_cassette(router, name: str) -> None:
    """Serve a recorded cassette through respx: one route per recorded request (method, API
    path and exact JSON body). Any other request hits a last catch-all route that raises
    :class:`judge.errors.CassetteMiss`, which stops the run: it never reaches the network."""
    import re

    require_cassette(name)

    from judge.errors import CassetteMiss
    from judge.model._cassette import Cassette, response_from_record

    cassette = Cassette.load(CASSETTES / name)
    for item in cassette:
        request = item["request"]
        router.route(method=request["method"], path__regex=re.escape(request["path"]) + "$",
                     json=request["body"]).mock(return_value=response_from_record(item["response"]))

    def unmatched(request):
        raise CassetteMiss(f"request not in cassette {name}: {request.method} {request.url}")

    router.route(name="unmatched").mock(side_effect=unmatched)


@pytest.fixture
def fake_model():
    """The fake OpenAI-compatible model server (tests/fault_server.py) on 127.0.0.1 and a
    free port, answering at once, for this test alone (tests change its faults and read its
    counts). Cheap: a thread of this process."""
    from tests.fault_server import FaultConfig, FaultServer

    with FaultServer(FaultConfig(latency=0.0)) as server:
        yield server


@pytest.fixture
def example_data():
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    predictions = load_predictions(EXAMPLES / "predictions.jsonl", dialogues, schema)
    return schema, dialogues, predictions


POSTGRES_FIXTURES = frozenset({"postgres_url"})
"""The session's Postgres (pgserver): every test using it runs in the group 'postgres', so
that one worker starts it (a session fixture is per worker)."""


def _one_file(config) -> bool:
    """The command names test ids of one file only (``pytest tests/x.py::test_y``)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False
    files = {arg.split("::", 1)[0] for arg in config.args}
    return len(files) == 1 and Path(next(iter(files))).is_file()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the configured default): one worker more than the cores this process may
    use, as many tests wait on sockets, subprocesses and sleeps (3 on two cores), at most 8.
    One file runs serially: starting workers would cost more than it saves.
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, decides instead (xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    if _one_file(config):
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, min((cores or 1) + 1, 8))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with a worker that is replaced safely (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import GroupScheduling

    return GroupScheduling(config, log)


def server_group(item) -> str | None:
    """The xdist group of a test that starts servers: 'postgres' when it uses the session's
    Postgres, else the group its ``servers`` mark names ('serve' when it names none)."""
    if POSTGRES_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return "postgres"
    mark = item.get_closest_marker("servers")
    if mark is None:
        return None
    return str(mark.args[0]) if mark.args else "serve"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests that start servers (marked ``servers``, or using the session's Postgres) run in
    xdist groups: each group on one worker, one test at a time, so that two fleets or two
    browsers never compete for the two cores, and a module's server starts once.
    Live tests (a real local model server) run only with ``-m live`` or DST_JUDGE_LIVE=1."""
    for item in items:
        group = server_group(item)
        if group is not None:
            item.add_marker(pytest.mark.servers)
            item.add_marker(pytest.mark.xdist_group(group))
    if os.environ.get("DST_JUDGE_LIVE") == "1" or "live" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="live test: run with 'pytest -m live' or DST_JUDGE_LIVE=1")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)
