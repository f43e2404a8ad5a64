"""The front door of every request: a pure ASGI middleware that answers what it can from the
headers alone, before a byte of the body is read.

Every route of the app, the web interface's included, is looked up in one table read from the
app at run time (:func:`route_table`), so a route added tomorrow gets the same rules: the
caller first (a ``/v1`` route, or any route whose dependency names a scope: the bearer token
and that scope; a route whose dependency carries a :class:`Gate`: the gate's check, a browser
session say), then the per-token request rate (429 with ``Retry-After``, per replica), then
``Content-Length`` against the route's body cap (413): uploads up to the upload limit on the
routes that take files, everything else up to the JSON limit. Failed authentications are
counted per client address; once an address has none left its failed attempts (and its
requests without credentials) get 429, while a valid token from the same address still
passes: one careless client behind a proxy locks out nobody but itself.

While the body arrives it is counted (413 the moment it passes the limit, chunked or not)
and timed (408 for a client that stalls or takes too long; event streams and downloads are
not bodies and have no such limit). A JSON body (any ``/v1`` body that is not multipart, and
a body of any other route that says it is JSON: the web interface's) is read whole (it is
small) and refused with 413 when it holds more values than any request needs, with 422 naming
the field when it is nested too deep or holds NaN, Infinity or an integer no database column
holds; integer query and path parameters get the same check.

Every response carries ``X-Request-ID`` (the client's when it is sane, else a new one) and
``X-Content-Type-Options: nosniff``; ``/v1`` responses ``Cache-Control: no-store``; HSTS when
the request came over HTTPS. An exception that reaches here is logged as one line with the
request id and answered 500 with ``Connection: close``, so no client reuses a connection in an
unknown state.
"""

from ._body import INT64_MAX, INT64_MIN, MAX_JSON_VALUES, BodyReader, json_problem, param_problem
from ._buckets import RateLimit
from ._middleware import FAILURE_KEY, GuardHost, RequestGuard, note_auth_failure
from ._received import ReceivedBytes
from ._refusal import Refusal
from ._routetable import (
    API_PREFIX,
    Gate,
    Page,
    RouteInfo,
    api_routes,
    gated,
    route_gate,
    route_scope,
    route_table,
    takes_uploads,
    uploading,
)

__all__ = [
    "API_PREFIX", "FAILURE_KEY", "INT64_MAX", "INT64_MIN", "MAX_JSON_VALUES", "BodyReader",
    "Gate", "GuardHost", "Page", "RateLimit", "ReceivedBytes", "Refusal", "RequestGuard",
    "RouteInfo", "api_routes", "gated", "json_problem", "note_auth_failure", "param_problem",
    "route_gate", "route_scope", "route_table", "takes_uploads", "uploading",
]
