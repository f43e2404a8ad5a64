"""Model access: the one client, its transports, cassettes, the Batch API and prices."""

from ._batch import (
    CHAT_URL,
    call_key,
    custom_id,
    download,
    parse_custom_id,
    read_output,
    status,
    submit,
)
from ._cassette import (
    Cassette,
    RecordingTransport,
    cassette_client,
    replay_transport,
    scrub,
)
from ._client import (
    ModelClient,
    SharedLimiter,
)
from ._cost import (
    ModelPrice,
    PriceTable,
    Spend,
    load_prices,
    usage_cost,
)
from ._reply import (
    Completion,
    ReplyLimits,
    cached_completion,
    completion_from_body,
    parse_chat_reply,
    redact,
)
from ._transport import (
    AiohttpTransport,
    HttpxTransport,
    RawResponse,
    Transport,
)

__all__ = [
    "CHAT_URL",
    "AiohttpTransport",
    "Cassette",
    "Completion",
    "HttpxTransport",
    "ModelClient",
    "ModelPrice",
    "PriceTable",
    "RawResponse",
    "RecordingTransport",
    "ReplyLimits",
    "SharedLimiter",
    "Spend",
    "Transport",
    "cached_completion",
    "call_key",
    "cassette_client",
    "completion_from_body",
    "custom_id",
    "download",
    "load_prices",
    "parse_chat_reply",
    "parse_custom_id",
    "read_output",
    "redact",
    "replay_transport",
    "scrub",
    "status",
    "submit",
    "usage_cost",
]
