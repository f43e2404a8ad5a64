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
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

import httpx

if TYPE_CHECKING:  # imported when first used: `dst-judge metrics` never needs aiohttp
    import aiohttp


@dataclass(frozen=True)
class RawResponse:
    """What came back: ``headers`` is case-insensitive in both transports."""

    status: int
    headers: Mapping[str, str]
    content: bytes


class NoResponse(Exception):
    """No HTTP response arrived: the connection failed or the request timed out."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class Transport(Protocol):
    async def post(self, url: str, content: bytes, headers: Mapping[str, str]) -> RawResponse:
        """Send one POST; raise :class:`NoResponse` when no response arrived."""
        ...

    async def aclose(self) -> None: ...


class HttpxTransport:
    """Requests through an ``httpx.AsyncClient`` (closed by :meth:`aclose`)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def post(self, url: str, content: bytes, headers: Mapping[str, str]) -> RawResponse:
        try:
            response = await self.client.post(url, content=content, headers=dict(headers))
        except httpx.TimeoutException as exc:
            raise NoResponse(f"timed out ({type(exc).__name__})", timeout=True) from exc
        except httpx.TransportError as exc:
            raise NoResponse(f"{type(exc).__name__}: {exc}") from exc
        return RawResponse(response.status_code, response.headers, response.content)

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

    def __init__(self, *, timeout: float, connections: int) -> None:
        self.timeout = timeout
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=self.timeout))
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
        try:
            async with session.post(url, data=content, headers=headers,
                                    proxy=self._proxy(url)) as response:
                body = await response.read()
                return RawResponse(response.status, response.headers, body)
        except asyncio.TimeoutError as exc:
            raise NoResponse("timed out", timeout=True) from exc
        except aiohttp.ClientError as exc:
            raise NoResponse(f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
