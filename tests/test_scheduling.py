"""The suite's xdist scheduling (tests/scheduling.py): a worker replaced after a crash (a
timeout) while another replacement is still collecting never ends the run."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("xdist", reason="pytest-xdist (test extra) is not installed")

from xdist.scheduler import LoadGroupScheduling

from tests.scheduling import GroupScheduling


class Node:
    """A stand-in for xdist's WorkerController: records the tests it is sent."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


COLLECTION = [f"tests/test_x.py::test_{n}" for n in range(6)] + [
    "tests/test_s.py::test_a@serve", "tests/test_s.py::test_b@serve"]


def _config() -> Any:
    return SimpleNamespace(getvalue=lambda name: ["popen", "popen"],
                           option=SimpleNamespace(loadscopereorder=True))


def _two_replacements_one_still_collecting(kind: type[LoadGroupScheduling]) -> Node:
    """Two workers run; one crashes and is replaced; the replacement collects; then the
    other crashes while its own replacement is still collecting. Returns that one."""
    sched = kind(_config())
    first, second = Node("gw0"), Node("gw1")
    for node in (first, second):
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    third, fourth = Node("gw2"), Node("gw3")
    sched.remove_node(first)
    sched.add_node(third)
    sched.add_node(fourth)  # the second crash's replacement: not collected yet
    sched.remove_node(second)
    sched.add_node_collection(third, COLLECTION)
    sched.schedule()
    assert third.sent, "the collected replacement got the crashed workers' tests"
    return fourth


def test_xdist_alone_fails_on_a_replacement_still_collecting():
    with pytest.raises(KeyError):
        _two_replacements_one_still_collecting(LoadGroupScheduling)


def test_a_replacement_still_collecting_gets_its_work_once_collected():
    fourth = _two_replacements_one_still_collecting(GroupScheduling)
    assert fourth.sent == []


def _after_a_crash(kind: type[LoadGroupScheduling]) -> tuple[Any, Node, Node]:
    """Two workers; the first crashes on its first test; a replacement collects."""
    sched = kind(_config())
    first, second = Node("gw0"), Node("gw1")
    for node in (first, second):
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    crashed = sched.remove_node(first)
    assert crashed == COLLECTION[first.sent[0]]
    replacement = Node("gw2")
    sched.add_node(replacement)
    sched.add_node_collection(replacement, COLLECTION)
    sched.schedule()
    return sched, second, replacement


def test_a_crashed_test_is_not_run_again():
    """xdist reports the crashed test as failed; running it again would crash another worker
    (a test that hangs hangs again) until the restarts run out."""
    crashed_index = None
    for kind in (LoadGroupScheduling, GroupScheduling):
        sched = kind(_config())
        first, second = Node("gw0"), Node("gw1")
        for node in (first, second):
            sched.add_node(node)
            sched.add_node_collection(node, COLLECTION)
        sched.schedule()
        crashed_index = first.sent[0]
        sched.remove_node(first)
        queued = [nodeid for unit in sched.workqueue.values()
                  for nodeid, done in unit.items() if not done]
        again = COLLECTION[crashed_index] in queued or crashed_index in second.sent[2:]
        assert again == (kind is LoadGroupScheduling), kind


def test_a_worker_never_holds_a_single_test_without_being_told_to_finish():
    """A worker holds its last test until it gets another or is told to finish: each worker
    has two tests queued, or is shutting down once the queue is empty."""
    sched, second, replacement = _after_a_crash(GroupScheduling)
    for node in (second, replacement):
        pending = sched._pending_of(sched.assigned_work[node])
        assert pending >= 2 or node.shutting_down, (node.name, pending)


SERVER_STARTS = re.compile(r"\b(ServeProcess|WorkerCommand|LiveServer)\(|\blaunched\(\)")
"""What starts a server process, a live app server or Chromium in a test module."""


def test_every_module_that_starts_servers_is_marked():
    """A test module that starts ``dst-judge serve`` or ``worker``, a live app server or
    Chromium carries the ``servers`` mark, so that its tests run in a group, one at a time
    (docs/development.md); the helpers that start them are exempt."""
    root = Path(__file__).resolve().parent
    starting = [path for path in root.rglob("test_*.py")
                if SERVER_STARTS.search(path.read_text(encoding="utf-8"))]
    assert len(starting) >= 15, "the scan found too few modules: it is broken"
    unmarked = [str(path.relative_to(root)) for path in starting
                if "mark.servers" not in path.read_text(encoding="utf-8")]
    assert unmarked == []
