"""The service's model traffic: the ledger of paid model requests in the database, the
rate-limit pool each endpoint shares across jobs and replicas, and the replay transports."""

from ._ledger import (
    BATCH_CLAIM_SECONDS,
    SHARED_SCOPE,
    DatabaseLedger,
    batch_owner,
    purge_ledger,
    worker_owner,
)
from ._limits import EndpointPool, JobLimiter
from ._replaying import recorded_models, replay_transport_for

__all__ = [
    "BATCH_CLAIM_SECONDS",
    "SHARED_SCOPE",
    "DatabaseLedger",
    "EndpointPool",
    "JobLimiter",
    "batch_owner",
    "purge_ledger",
    "recorded_models",
    "replay_transport_for",
    "worker_owner",
]
