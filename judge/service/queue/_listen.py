"""Wake-ups without polling on Postgres: whoever queues a job (a submit or resume on any API
replica, a worker handing jobs back on shutdown) sends ``NOTIFY`` on :data:`QUEUE_CHANNEL`
in the same transaction, and every worker's ``LISTEN`` wakes its claim loop at once. Polling
stays as the fallback (and the only way on SQLite, where the API nudges its own workers
through a pipe)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import sqlalchemy as sa

from ..db import QUEUE_CHANNEL

log = logging.getLogger("dst_judge.service")


class Listener:
    """A thread holding one connection of its own that ``LISTEN``s on the queue's channel and
    calls ``wake`` for every notification; it reconnects quietly after an outage (the worker
    reports outages)."""

    def __init__(self, url: str, wake: Callable[[], None]) -> None:
        self.url = sa.engine.make_url(url).set(drivername="postgresql").render_as_string(
            hide_password=False)
        self.wake = wake
        self.stopped = threading.Event()
        self.notified = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dst-judge-listen",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self._thread is not None:
            self._thread.join(3)

    def _run(self) -> None:
        import psycopg

        while not self.stopped.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {QUEUE_CHANNEL}")
                    self.wake()  # what was queued while we were not listening
                    while not self.stopped.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            self.notified += 1
                            self.wake()
            except psycopg.Error as exc:
                log.debug("queue notifications: %s; listening again in a second", exc)
                self.stopped.wait(1.0)
            except Exception:  # never take the worker down: polling still works
                log.exception("queue notifications stopped; polling only")
                return

