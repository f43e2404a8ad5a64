"""The transports of replay endpoints (``replay = "cassettes/"`` in an endpoint's settings):
one per cassette source and process, shared by every job, as a pool of connections would be."""

from __future__ import annotations

import threading
from pathlib import Path

from ...model import ReplayTransport
from ..db import EndpointConfig, ServiceSettings

_transports: dict[Path, ReplayTransport] = {}
_lock = threading.Lock()


def replay_transport_for(settings: ServiceSettings, endpoint: str) -> ReplayTransport | None:
    """The transport a job on ``endpoint`` uses when that endpoint replays cassettes, else
    None (the job talks to the endpoint's server as usual)."""
    config = settings.all_endpoints().get(endpoint)
    return None if config is None else transport_of(config)


def transport_of(config: EndpointConfig) -> ReplayTransport | None:
    """The shared transport of an endpoint that replays cassettes (None for any other)."""
    if config.replay is None:
        return None
    with _lock:
        transport = _transports.get(config.replay)
        if transport is None:
            transport = _transports[config.replay] = ReplayTransport(config.replay)
        return transport


def recorded_models(config: EndpointConfig) -> frozenset[str] | None:
    """The models a replay endpoint holds recordings of (None: not a replay endpoint, any
    model may be asked)."""
    transport = transport_of(config)
    return None if transport is None else transport.models
