"""``GET /metrics`` in the Prometheus text format (prometheus_client, one registry per app).

Request counts and latencies by route template; jobs by status and live workers read from the
database at scrape time (so any replica reports the whole queue); this replica's running jobs,
calls in flight and shared-pool grants.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import sqlalchemy as sa
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client import generate_latest as generate
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..db import Database, now, workers
from ..jobs import STATUSES, JobStore
from ..queue import queue_metrics


class MetricsHost(Protocol):
    """What a scrape reads of the service (``_app.Service`` has it; this module does not
    import the app, which imports it). ``worker`` is read at scrape time: it is set when the
    service starts, after the metrics were made."""

    db: Database
    jobs: JobStore
    worker: Any


class _QueueCollector(Collector):
    def __init__(self, service: MetricsHost) -> None:
        self.service = service

    def collect(self) -> Iterator[Any]:
        yield from queue_metrics(self.service.worker)  # this replica's: no database needed
        jobs = GaugeMetricFamily("dst_judge_jobs", "Jobs in the database by status",
                                 labels=["status"])
        try:
            counts = self.service.jobs.counts()
            with self.service.db.read() as conn:
                alive = conn.execute(sa.select(sa.func.count()).select_from(workers).where(
                    workers.c.heartbeat_at > now() - 30)).scalar() or 0
        except sa.exc.SQLAlchemyError:
            return
        for status in STATUSES:
            jobs.add_metric([status.value], counts.get(status.value, 0))
        yield jobs
        yield GaugeMetricFamily("dst_judge_workers", "Workers with a heartbeat in the last 30 s",
                                value=alive)
        worker = self.service.worker
        if worker is not None and hasattr(worker, "running"):  # a worker thread of this process
            yield GaugeMetricFamily("dst_judge_replica_running_jobs",
                                    "Jobs this replica is running", value=len(worker.running))
            yield GaugeMetricFamily("dst_judge_replica_calls_in_flight",
                                    "Model calls of this replica in flight",
                                    value=worker.in_flight())
            granted = GaugeMetricFamily("dst_judge_replica_pool_grants",
                                        "Requests this replica's jobs took from shared pools",
                                        labels=["endpoint"])
            for name, count in worker.pool_grants().items():
                granted.add_metric([name], count)
            yield granted


class ServiceMetrics:
    def __init__(self, service: MetricsHost) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("dst_judge_http_requests", "HTTP requests served",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("dst_judge_http_request_seconds", "HTTP request latency",
                                 ["route"], registry=self.registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                          0.5, 1.0, 2.5, 5.0))
        self.registry.register(_QueueCollector(service))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate(self.registry), CONTENT_TYPE_LATEST
