"""The byte counter of the HTTP connections, fed by the server's protocol and read in
``/metrics``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector


class ReceivedBytes(Collector):
    """Bytes this process received on its HTTP connections, counted by the server's protocol
    as they come off the sockets (``dst_judge_http_received_bytes_total`` in ``/metrics``):
    what a refused upload really cost, whatever the app read of it."""

    total = 0

    @classmethod
    def add(cls, count: int) -> None:
        cls.total += count

    def collect(self) -> Iterator[Any]:
        yield CounterMetricFamily("dst_judge_http_received_bytes",
                                  "Bytes received on HTTP connections by this process",
                                  value=ReceivedBytes.total)
