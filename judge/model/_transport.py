"""HTTP transports for the judge's one call site: POST a JSON body, get status, headers, bytes.

Why not the openai SDK for chat completions: at 32 requests in flight, the SDK over httpx
spends about 2 ms of client CPU per call (request options, httpcore's connection-pool
bookkeeping, anyio), more than the rest of the judge together; a plain aiohttp POST costs
about 0.35 ms (bench/judge_throughput.py). The SDK still serves the Batch API, where there
are a handful of calls.

Two transports share one small interface:

* :class:`AiohttpTransport`, the default for live calls;
* :class:`HttpxTransport`, over any ``httpx.AsyncClient``: it carries cassette replay and
  recording, respx in the tests, and ``http_backend = "httpx"``.

Both read a reply as a stream and stop at a size cap (``max_bytes``), counted once on the
bytes received and once on the bytes decompressed: they ask for gzip or deflate only and
inflate it themselves with a bounded output per step, so a gzip bomb never grows in memory
beyond the cap. A reply cut at the cap comes back with its start and ``defect`` saying why;
the caller records it (it was paid for) and turns it into an error row. So is a reply cut
off by the timeout or a broken connection after its status line arrived: the server answered,
so it was paid for, and sending the request again would pay twice. Only a request that got no
status line at all is :class:`NoResponse`, which the caller may retry.
"""

from __future__ import annotations

import asyncio
import urllib.request
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

import httpx

from .._tasks import within

if TYPE_CHECKING:  # imported when first used: `dst-judge metrics` never needs aiohttp
    import aiohttp


DEFAULT_MAX_BYTES = 1_000_000
ACCEPT_ENCODING = "gzip, deflate"
"""The only encodings asked for (and decoded here, under the size cap)."""
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class RawResponse:
    """What came back: ``headers`` is case-insensitive in both transports. ``defect`` says why
    ``content`` is not the whole body (a size cap reached, an unknown or corrupt encoding)."""

    status: int
    headers: Mapping[str, str]
    content: bytes
    defect: str | None = None


class CappedBody:
    """A reply body collected chunk by chunk: decompressed here (gzip, deflate) with at most
    ``limit`` bytes ever held, and stopped at the first cap reached."""

    def __init__(self, encoding: str | None, limit: int = DEFAULT_MAX_BYTES) -> None:
        self.limit = limit
        self.received = 0
        self.size = 0
        self.defect: str | None = None
        self._parts: list[bytes] = []
        codings = [c.strip().lower() for c in (encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self._coding = codings[0] if len(codings) == 1 else None
        if len(codings) > 1 or (codings and self._coding not in ("gzip", "x-gzip", "deflate")):
            self.defect = f"the reply uses an unsupported content-encoding {encoding!r}"
        self._decoder: zlib._Decompress | None = None
        self._head = b""
        self._members = 0

    @property
    def content(self) -> bytes:
        return b"".join(self._parts)

    def feed(self, chunk: bytes) -> bool:
        """Take one received chunk; False once reading should stop (a cap or a defect)."""
        if self.defect is not None:
            return False
        self.received += len(chunk)
        if self._coding is None:
            return self._keep(chunk)
        if self.received > self.limit:
            self.defect = (f"the reply is larger than the cap of {self.limit:,} bytes as "
                           "received, compressed (max_reply_bytes); reading stopped there")
            return False
        try:
            return self._inflate(chunk)
        except zlib.error as exc:
            self.defect = f"the reply's {self._coding} data is corrupt ({exc})"
            return False

    def _keep(self, data: bytes) -> bool:
        room = self.limit - self.size
        if len(data) > room:
            # one byte over the cap is kept: whoever reads the recorded start back sees that
            # the reply was too large, not merely cut
            self._parts.append(data[:room + 1])
            self.size = self.limit + 1
            self.defect = (f"the reply is larger than the cap of {self.limit:,} bytes "
                           "(max_reply_bytes); reading stopped there")
            return False
        if data:
            self._parts.append(data)
            self.size += len(data)
        return True

    def _inflate(self, data: bytes) -> bool:
        data = self._head + data
        self._head = b""
        while data:
            if self._decoder is None:
                if len(data) < 2:  # a stream's first two bytes tell its header: wait for them
                    self._head = data
                    return True
                if self._coding == "deflate":
                    zlib_header = data[0] & 0x0F == 8 and ((data[0] << 8) | data[1]) % 31 == 0
                    wbits = zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS
                elif data[:2] == b"\x1f\x8b" or not self._members:
                    wbits = 16 + zlib.MAX_WBITS  # not gzip at all: zlib says it is corrupt
                else:  # bytes after the last gzip member (padding): ignored
                    return True
                self._members += 1
                self._decoder = zlib.decompressobj(wbits)
            # at most one byte more than the room left: the cap shows, memory stays bounded
            out = self._decoder.decompress(data, self.limit - self.size + 1)
            if not self._keep(out):
                return False
            data = self._decoder.unconsumed_tail
            if self._decoder.eof:
                data = self._decoder.unused_data + data
                self._decoder = None
                if self._coding == "deflate":
                    return True
        return True


def _request_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out = dict(headers)
    if not any(name.lower() == "accept-encoding" for name in out):
        out["Accept-Encoding"] = ACCEPT_ENCODING
    return out


class NoResponse(Exception):
    """No HTTP response arrived: the connection failed or the request timed out."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


def cut_reply(status: int, headers: Mapping[str, str], body: CappedBody | None,
              reason: str) -> RawResponse:
    """A reply whose status line arrived but whose body did not (a timeout, a dropped
    connection): what came, with ``defect`` saying where and why it stopped."""
    received = body.received if body is not None else 0
    return RawResponse(status, headers, body.content if body is not None else b"",
                       f"the reply was cut off after {received:,} bytes: {reason}")


class _Exchange:
    """What one request got so far: the response once its status line arrived, the body."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: Mapping[str, str] = {}
        self.body: CappedBody | None = None

    def failed(self, reason: str, exc: BaseException, *, timeout: bool = False) -> RawResponse:
        """A cut reply once the status line arrived; otherwise :class:`NoResponse`."""
        if self.status is None:
            raise NoResponse(reason, timeout=timeout) from exc
        return cut_reply(self.status, self.headers, self.body, reason)


class Transport(Protocol):
    async def post(self, url: str, content: bytes, headers: Mapping[str, str]) -> RawResponse:
        """Send one POST; raise :class:`NoResponse` when no response arrived."""
        ...

    async def aclose(self) -> None: ...


class HttpxTransport:
    """Requests through an ``httpx.AsyncClient`` (closed by :meth:`aclose`).

    httpx's timeouts apply per read, so a server that trickles a byte at a time would never
    time out: ``timeout`` bounds the whole exchange, as aiohttp's total timeout does.
    """

    def __init__(self, client: httpx.AsyncClient, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 timeout: float | None = None) -> None:
        self.client = client
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def post(self, url: str, content: bytes, headers: Mapping[str, str]) -> RawResponse:
        exchange = _Exchange()
        try:
            return await within(self._post(url, content, headers, exchange), self.timeout)
        except TimeoutError as exc:
            return exchange.failed("timed out (the whole exchange)", exc, timeout=True)
        except httpx.TimeoutException as exc:
            return exchange.failed(f"timed out ({type(exc).__name__})", exc, timeout=True)
        except httpx.TransportError as exc:
            return exchange.failed(f"{type(exc).__name__}: {exc}", exc)

    async def _post(self, url: str, content: bytes, headers: Mapping[str, str],
                    exchange: _Exchange) -> RawResponse:
        request = self.client.build_request("POST", url, content=content,
                                            headers=_request_headers(headers))
        response = await self.client.send(request, stream=True)
        exchange.status, exchange.headers = response.status_code, response.headers
        try:
            try:  # a response already in memory (a fixture, a replayed cassette), decoded
                in_memory = response.content
            except httpx.ResponseNotRead:
                body = exchange.body = CappedBody(response.headers.get("content-encoding"),
                                                  self.max_bytes)
                async for chunk in response.aiter_raw(_CHUNK):
                    if not body.feed(chunk):
                        break
            else:
                body = CappedBody(None, self.max_bytes)
                body.feed(in_memory)
        finally:
            await response.aclose()
        return RawResponse(response.status_code, response.headers, body.content, body.defect)

    async def aclose(self) -> None:
        await self.client.aclose()


def env_proxy(scheme: str, host: str) -> str | None:
    """The proxy the environment names for ``scheme://host``, or None (``NO_PROXY`` applies)."""
    if not host or urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(scheme)


class AiohttpTransport:
    """Requests through one ``aiohttp.ClientSession``, created in the running event loop.

    Proxy variables (``HTTPS_PROXY``, ``NO_PROXY``, ...) are honoured as httpx does, but read
    once per host rather than through aiohttp's ``trust_env``, which looks them (and
    ``.netrc``) up in a worker thread on every request; TLS uses the system's certificate
    store (``SSL_CERT_FILE`` applies); the pool holds up to ``connections`` keep-alive
    connections; cookies are not kept.
    """

    def __init__(self, *, timeout: float, connections: int,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.timeout = timeout
        self.connections = connections
        self.max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=self.timeout), auto_decompress=False)
        return self._session

    def _proxy(self, url: str) -> str | None:
        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "")
        if key not in self._proxies:
            self._proxies[key] = env_proxy(*key)
        return self._proxies[key]

    async def post(self, url: str, content: bytes, headers: Mapping[str, str]) -> RawResponse:
        import aiohttp

        session = self._open()
        exchange = _Exchange()
        try:
            async with session.post(url, data=content, headers=_request_headers(headers),
                                    proxy=self._proxy(url)) as response:
                exchange.status, exchange.headers = response.status, response.headers
                body = exchange.body = CappedBody(response.headers.get("content-encoding"),
                                                  self.max_bytes)
                async for chunk in response.content.iter_chunked(_CHUNK):
                    if not body.feed(chunk):
                        response.close()  # drop the connection: the rest is never read
                        break
                return RawResponse(response.status, response.headers, body.content,
                                   body.defect)
        except asyncio.TimeoutError as exc:
            return exchange.failed("timed out", exc, timeout=True)
        except aiohttp.ClientError as exc:
            return exchange.failed(f"{type(exc).__name__}: {exc}", exc)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
