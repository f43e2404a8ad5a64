"""Durable stores of paid work: the ledger of requests (claims and raw replies), which in the
cache directory is also the reply cache."""

from ._cache import (
    cache_key,
    cache_ledger_path,
    clear_cache,
    migrate_diskcache,
    open_cache,
)
from ._ledger import (
    BATCH_OWNER,
    DEFAULT_LEASE,
    LEDGER_FILE,
    Claim,
    Ledger,
    Reply,
    SQLiteLedger,
    existing_claim,
    new_owner,
    owner_gone,
)

__all__ = [
    "BATCH_OWNER",
    "DEFAULT_LEASE",
    "LEDGER_FILE",
    "Claim",
    "Ledger",
    "Reply",
    "SQLiteLedger",
    "cache_key",
    "cache_ledger_path",
    "clear_cache",
    "existing_claim",
    "migrate_diskcache",
    "new_owner",
    "open_cache",
    "owner_gone",
]
