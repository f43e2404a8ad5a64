"""How the suite's tests are spread over xdist workers (``--dist loadgroup``, pyproject.toml).

xdist's LoadGroupScheduling (3.8) loses its way when a worker crashes, which is how a test
timeout ends under pytest-timeout's thread method (os._exit in the worker):

* it puts the crashed test back into the queue with the rest of the worker's tests, so the
  test that hung runs again and crashes another worker, until the restarts run out;
* it gives a replacement worker one unit of work at a time, and a worker holds its last test
  until it gets another or is told to finish (it needs the next test to plan teardowns): a
  replacement given one single test waits for ever, and so does the run;
* it asks a replacement still collecting for its collection (a KeyError: an INTERNALERROR).

Here the crashed test is reported once (xdist does that) and not run again, a worker always has
two tests queued or is told to finish, and a worker still collecting gets its work once its
collection arrives (``schedule`` goes over every worker then)."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadGroupScheduling


class GroupScheduling(LoadGroupScheduling):
    """LoadGroupScheduling that survives crashed workers (see the module's docstring)."""

    def remove_node(self, node: Any) -> str | None:
        workload = self.assigned_work.pop(node)
        pending = [nodeid for unit in workload.values() for nodeid, done in unit.items()
                   if not done]
        if not pending:
            return None
        crashitem = pending[0]  # the worker runs its tests in order: the first unfinished
        workload[self._split_scope(crashitem)][crashitem] = True
        self.workqueue.update((scope, unit) for scope, unit in workload.items()
                              if not all(unit.values()))
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _reschedule(self, node: Any) -> None:
        if node not in self.registered_collections or node.shutting_down:
            return
        super()._reschedule(node)
        while (self.workqueue and not node.shutting_down
               and self._pending_of(self.assigned_work[node]) < 2):
            self._assign_work_unit(node)
        if not self.workqueue and not node.shutting_down:
            node.shutdown()  # it runs what it holds, its last test included, and ends
