"""Model access: the one client, its transports, cassettes, the Batch API and prices."""

from ._batch import (
    CHAT_URL,
    call_key,
    cancel,
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
    ASSUMED_COMPLETION_TOKENS,
    ModelPrice,
    PrefixCacheRule,
    PriceTable,
    RequestEstimate,
    Spend,
    cost_figures,
    estimate_requests,
    load_prices,
    price_and_counter,
    usage_check,
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
from ._tokens import (
    TokenCounter,
    counter_for,
)
from ._transport import (
    AiohttpTransport,
    HttpxTransport,
    RawResponse,
    Transport,
)

__all__ = [
    "ASSUMED_COMPLETION_TOKENS",
    "CHAT_URL",
    "AiohttpTransport",
    "Cassette",
    "Completion",
    "HttpxTransport",
    "ModelClient",
    "ModelPrice",
    "PrefixCacheRule",
    "PriceTable",
    "RawResponse",
    "RecordingTransport",
    "ReplyLimits",
    "RequestEstimate",
    "SharedLimiter",
    "Spend",
    "TokenCounter",
    "Transport",
    "cached_completion",
    "call_key",
    "cancel",
    "cassette_client",
    "completion_from_body",
    "cost_figures",
    "counter_for",
    "custom_id",
    "download",
    "estimate_requests",
    "load_prices",
    "parse_chat_reply",
    "parse_custom_id",
    "price_and_counter",
    "read_output",
    "redact",
    "replay_transport",
    "scrub",
    "status",
    "submit",
    "usage_check",
    "usage_cost",
]
