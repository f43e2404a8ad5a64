"""The one place dst-judge calls a model: a chat-completions POST to any OpenAI-compatible
endpoint, with tenacity retries, bounded concurrency, the response cache and usage counts.

One retry policy (exponential backoff with jitter, honouring ``retry-after``) applies to
timeouts, connection errors, 429 and 5xx alike. The bytes travel through a small transport
(:mod:`judge.model._transport`): aiohttp for live calls, httpx for cassettes and respx; what a
reply's status and headers mean (retry or not, how long to wait) is read in ``_http_status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol, TypeVar

import httpx
from aiolimiter import AsyncLimiter
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from .._config import JudgeConfig
from .._errors import ModelError, ReplyError, StoreError
from .._tasks import run_to_end, within
from .._version import __version__
from ..store import Claim, Ledger, cache_key
from ._http_status import (
    _MAX_RETRY_AFTER,
    HTTPStatusError,
    _as_model_error,
    _is_transient,
    _retry_after,
    estimate_tokens,
    parse_reset,
)
from ._reply import REDACTED, Completion, ReplyLimits, parse_chat_reply, redact
from ._transport import AiohttpTransport, HttpxTransport, NoResponse, RawResponse, Transport

_T = TypeVar("_T")
BACKOFF_INITIAL = 1.0
"""First backoff in seconds (doubling, with jitter, up to a minute) when no retry-after."""


def _transport(config: JudgeConfig, http_client: httpx.AsyncClient | None,
               max_bytes: int) -> Transport:
    """A given httpx client (cassettes, respx, custom proxies) wins; otherwise the configured
    backend: aiohttp by default, httpx on request. Both stop reading a reply at ``max_bytes``."""
    if http_client is not None:
        return HttpxTransport(http_client, max_bytes=max_bytes, timeout=config.timeout)
    if config.http_backend == "httpx":
        limits = httpx.Limits(max_connections=config.concurrency,
                              max_keepalive_connections=config.concurrency)
        return HttpxTransport(httpx.AsyncClient(timeout=config.timeout, limits=limits),
                              max_bytes=max_bytes, timeout=config.timeout)
    return AiohttpTransport(timeout=config.timeout, connections=config.concurrency,
                            max_bytes=max_bytes)


class SlotLease:
    """One concurrency slot, taken when a call first needs to send and held until the whole
    judge call ends: a re-ask keeps the slot of its first attempt instead of queueing behind
    every call that has not started."""

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self.held = False

    async def acquire(self) -> None:
        if not self.held:
            await self._slots.acquire()
            self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._slots.release()


def redact_bytes(content: bytes, secret: str | None) -> bytes:
    """Remove the API key from a raw reply before it is stored."""
    if not secret:
        return content
    return content.replace(secret.encode("utf-8"), REDACTED.encode("utf-8"))


class SharedLimiter(Protocol):
    """A rate-limit pool outside this client (e.g. one per endpoint shared by every job of a
    service): asked before every request goes out and told how each one ended."""

    async def acquire(self, tokens: int) -> Any:
        """Wait until one more request of about ``tokens`` tokens may be sent; returns a ticket
        for :meth:`release`."""

    def release(self, ticket: Any, status: int | None, headers: Mapping[str, str]) -> None:
        """The request of ``ticket`` ended: HTTP status and headers, or ``None`` when no
        response came."""


_SETTLED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Event]] = (
    weakref.WeakKeyDictionary())


def _settled(key: str) -> asyncio.Event:
    """Set when a client of the running event loop is done with its claim of ``key``."""
    events = _SETTLED.setdefault(asyncio.get_running_loop(), {})
    return events.setdefault(key, asyncio.Event())


def _settle(key: str) -> None:
    """Wake the clients of this loop that wait for another owner's claim of ``key`` (a hint:
    they claim again and see what the ledger holds)."""
    event = _SETTLED.get(asyncio.get_running_loop(), {}).pop(key, None)
    if event is not None:
        event.set()


class ModelClient:
    """Async chat completions with retries, a concurrency bound and the ledger of paid work.

    With a ``ledger``, a request is claimed (a committed pending row) before it is sent and its
    raw reply committed the moment it arrives, before it is parsed; a request the ledger has a
    reply for is never sent again, and one that another process is sending is awaited.
    Identical requests in flight in this client are sent once. A ``transport`` passed in is
    shared (a service worker's connections to one endpoint, kept alive across its jobs) and
    stays open when the client closes; without one the client opens and closes its own.
    """

    def __init__(self, config: JudgeConfig, *, http_client: httpx.AsyncClient | None = None,
                 ledger: Ledger | None = None, refresh: bool = False,
                 run_id: str | None = None,
                 before_send: Callable[[], None] | None = None,
                 limiter: SharedLimiter | None = None,
                 transport: Transport | None = None) -> None:
        self.config = config
        self.before_send = before_send
        """Called before every request goes out, retries included (budget, stop)."""
        self.ledger = ledger
        self.refresh = refresh
        """Send every request once even when the ledger has a reply (and record the new one)."""
        self.run_id = run_id
        """Recorded as the origin of the replies this client pays for."""
        self.limiter = limiter
        """Optional shared pool asked after this client's own limits (see SharedLimiter)."""
        self._secret = config.secret
        self._url = config.endpoint + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": f"dst-judge/{__version__}"}
        if self._secret:
            self._headers["Authorization"] = f"Bearer {self._secret}"
        if config.organization:
            self._headers["OpenAI-Organization"] = config.organization
        if config.project:
            self._headers["OpenAI-Project"] = config.project
        self._limits = ReplyLimits.from_config(config)
        self._owns_transport = transport is None
        self._transport = transport or _transport(config, http_client, self._limits.max_bytes)
        self._slots = asyncio.Semaphore(config.concurrency)
        self._rpm = AsyncLimiter(config.rpm, 60) if config.rpm else None
        self._tpm = AsyncLimiter(config.tpm, 60) if config.tpm else None
        self._paused_until = 0.0
        self._inflight: dict[str, asyncio.Future[bytes]] = {}
        self._refreshed: set[str] = set()
        self._paid: set[str] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._ahead: dict[str, asyncio.Future[Claim]] = {}
        self._keys: dict[int, tuple[dict[str, Any], str]] = {}
        """Keys worked out by :meth:`claim_ahead`, by body (held, so its id stays its own)."""
        self.calls = 0
        """HTTP requests sent (retries included)."""
        self.cache_hits = 0
        """Answers from the ledger that another run paid for."""
        self.recovered = 0
        """Answers from the ledger that this run paid for before it was interrupted."""
        self.shared = 0
        """Answers awaited from an identical request in flight (this process or another)."""
        self.retries = 0

    def _count_retry(self, state: RetryCallState) -> None:
        self.retries += 1

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = _retry_after(exc) if exc else None
        if after is not None:
            return after
        backoff = wait_exponential(multiplier=BACKOFF_INITIAL, max=60) + wait_random(
            0, BACKOFF_INITIAL)
        return backoff(state)

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[SlotLease]:
        """A concurrency slot for one judge call: pass it to every :meth:`complete` of the
        call; it is taken on the first send and given back when the block ends."""
        lease = SlotLease(self._slots)
        try:
            yield lease
        finally:
            lease.release()

    def claim_ahead(self, body: dict[str, Any], *, template_hash: str) -> None:
        """Start claiming a request that will be sent soon (the next call of a chain, while
        the current one is on the wire), so that its database round-trip is done by then.

        Only for a ledger that waits on a server (``off_loop``): the embedded one claims in
        microseconds. The claim is the one :meth:`complete` would take; one that is never
        used (the run stopped first) is released by :meth:`aclose`."""
        ledger = self.ledger
        if ledger is None or not self._off_loop:
            return
        key = cache_key(self.config.endpoint, body, template_hash)
        self._keys[id(body)] = (body, key)
        if key in self._ahead or key in self._inflight or key in self._paid:
            return
        fresh = self.refresh and key not in self._refreshed
        self._ahead[key] = asyncio.ensure_future(self._claim_early(key, fresh))

    async def _claim_early(self, key: str, fresh: bool) -> Claim:
        assert self.ledger is not None
        claim = await self._on_ledger(self.ledger.claim, key, refresh=fresh)
        if claim.outcome == "mine":
            self._keep_claims_alive()
        return claim

    async def _first_claim(self, key: str, fresh: bool) -> Claim:
        """The claim taken ahead for ``key`` if there is one, else a claim now."""
        assert self.ledger is not None
        ahead = self._ahead.pop(key, None)
        if ahead is not None:
            try:
                return await asyncio.shield(ahead)
            except asyncio.CancelledError:
                self._ahead.setdefault(key, ahead)  # released by aclose when it was taken
                raise
            except StoreError:
                pass  # claim again now
        return await self._on_ledger(self.ledger.claim, key, refresh=fresh)

    async def complete(self, body: dict[str, Any], *, template_hash: str,
                       slot: SlotLease | None = None) -> Completion:
        """Answer one request body: from the ledger, from an identical request in flight, or
        from the model (with retries)."""
        known = self._keys.pop(id(body), None)
        key = (known[1] if known is not None and known[0] is body
               else cache_key(self.config.endpoint, body, template_hash))
        fresh = self.refresh and key not in self._refreshed
        # an off-loop ledger answers a stored reply with the claim itself (one database
        # round-trip instead of two); the embedded one is asked first, as cheap as a dict
        if self.ledger is not None and not fresh and not self._off_loop:
            reply = await self._on_ledger(self.ledger.get, key)
            if reply is not None:
                return self._answer(reply.content, key, self._source(key, reply.origin))
        waiting = self._inflight.get(key)
        if waiting is not None:
            content = await asyncio.shield(waiting)
            return self._answer(content, key, "shared")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        lease = slot if slot is not None else SlotLease(self._slots)
        try:
            content, source = await self._fetch(key, body, lease, fresh)
            future.set_result(content)
        except BaseException as exc:
            if isinstance(exc, Exception):  # those waiting get the same error
                future.set_exception(exc)
                future.exception()  # retrieved: no warning when nobody else waited
            else:
                future.cancel()
            raise
        finally:
            del self._inflight[key]
            if slot is None:
                lease.release()
        if fresh:
            self._refreshed.add(key)
        return self._answer(content, key, source)

    def _source(self, key: str, origin: str | None) -> str:
        """Who paid for a reply found in the ledger, as this run accounts it: ``recovered``
        (this run paid before it was interrupted: billed now, once), ``shared`` (this process
        already used it: not billed again) or ``cache`` (another run paid)."""
        if key in self._paid:
            return "shared"
        if origin is not None and origin == self.run_id:
            self._paid.add(key)
            return "recovered"
        return "cache"

    def _answer(self, content: bytes, key: str, source: str) -> Completion:
        """Parse a raw reply and account for it: ``source`` is ``paid`` (sent now),
        ``recovered``, ``shared`` or ``cache`` (see :meth:`_source`)."""
        if source == "cache":
            self.cache_hits += 1
        elif source == "shared":
            self.shared += 1
        elif source == "recovered":
            self.recovered += 1
        return parse_chat_reply(content, limits=self._limits, secret=self._secret,
                                request_key=key, cached=source not in ("paid", "recovered"))

    async def _fetch(self, key: str, body: dict[str, Any], lease: SlotLease,
                     fresh: bool) -> tuple[bytes, str]:
        """Claim ``key`` (or wait for whoever has it), send it, and record what comes back.

        With an off-loop ledger the claim comes before the concurrency slot: it is also the
        look-up of a stored reply, which must not wait for a slot; a claim taken meanwhile is
        renewed like any other and released if the call ends before it is sent."""
        ledger = self.ledger
        claim_first = ledger is not None and self._off_loop
        if not claim_first:
            await lease.acquire()
        if ledger is not None:
            delay = 0.02
            claim = await self._first_claim(key, fresh)
            while True:
                if claim.outcome != "busy" and delay > 0.02:
                    _settle(key)  # no event left behind for an owner of another process
                if claim.outcome == "mine":
                    break
                if claim.outcome == "replied" and claim.reply is not None:
                    return claim.reply.content, self._source(key, claim.reply.origin)
                # another owner is sending it: ask again after a while, or as soon as a
                # client of this event loop (another job of a service worker) settles it
                with contextlib.suppress(TimeoutError):
                    await within(_settled(key).wait(), delay)
                delay = min(delay * 2, 1.0)
                claim = await self._on_ledger(ledger.claim, key, refresh=fresh)
            self._keep_claims_alive()
        settled = False
        try:
            if claim_first:
                await lease.acquire()
            raw = await self._send(body)
            content = redact_bytes(raw.content, self._secret)
            if ledger is not None:
                await self._on_ledger(ledger.record_reply, key, content, status=raw.status,
                                      origin=self.run_id)
            settled = True
        except ModelError as exc:
            if ledger is not None:
                await self._on_ledger(ledger.record_failure, key, str(exc))
            settled = True
            raise
        finally:
            if ledger is not None and not settled:
                await self._on_ledger(ledger.release, key)
            if ledger is not None:
                _settle(key)
        self._paid.add(key)
        return content, "paid"

    async def _send(self, body: dict[str, Any]) -> RawResponse:
        """POST one request, retrying transient failures; a :class:`ModelError` when none
        succeeded."""
        retrying = AsyncRetrying(stop=stop_after_attempt(self.config.max_retries + 1),
                                 wait=self._wait, retry=retry_if_exception(_is_transient),
                                 before_sleep=self._count_retry, reraise=True)
        content = json.dumps(body, ensure_ascii=False).encode()
        try:
            async for attempt in retrying:
                with attempt:
                    if self.before_send is not None:
                        self.before_send()
                    await self._respect_limits(body)
                    self.calls += 1
                    raw = await self._post(content, body)
                    self._read_limit_headers(raw.headers)
                    if not 200 <= raw.status < 300:
                        raise HTTPStatusError(raw)
                    if raw.defect:  # a reply arrived (paid for) but was cut: no retry
                        raise ReplyError(redact(raw.defect, self._secret) or "")
        except (HTTPStatusError, NoResponse, httpx.HTTPError) as exc:
            error = _as_model_error(exc)
            message = redact(str(error), self._secret) or ""
            if message != str(error):
                error = ModelError(message, fatal=error.fatal, status=error.status)
            raise error from None
        return raw

    @property
    def _off_loop(self) -> bool:
        return bool(getattr(self.ledger, "off_loop", False))

    async def _on_ledger(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Call a ledger method: in place (the embedded SQLite ledger answers in microseconds),
        or in a thread when the ledger says it waits on a server (``off_loop``), so that one
        job's database round-trip never stalls the other jobs of the event loop: the ledger's
        own ``executor`` if it names one, else asyncio's default pool. A started call
        is finished even when the caller is cancelled: a reply is committed before its slot is
        given back."""
        if not self._off_loop:
            return method(*args, **kwargs)
        executor = getattr(self.ledger, "executor", None)
        call = functools.partial(method, *args, **kwargs)
        return await run_to_end(asyncio.get_running_loop().run_in_executor(executor, call))

    def _keep_claims_alive(self) -> None:
        """Renew this client's claims every third of the lease while it runs."""
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.ensure_future(self._renew_claims())

    async def _renew_claims(self) -> None:
        assert self.ledger is not None
        while True:
            await asyncio.sleep(self.ledger.lease / 3)
            with contextlib.suppress(StoreError):
                await self._on_ledger(self.ledger.renew)

    async def _post(self, content: bytes, body: dict[str, Any]) -> RawResponse:
        """One POST, through the shared limiter when there is one."""
        if self.limiter is None:
            return await self._transport.post(self._url, content, self._headers)
        ticket = await self.limiter.acquire(min(estimate_tokens(body), self.config.tpm or 2**31))
        status: int | None = None
        headers: Mapping[str, str] = {}
        try:
            raw = await self._transport.post(self._url, content, self._headers)
            status, headers = raw.status, raw.headers
            return raw
        finally:
            self.limiter.release(ticket, status, headers)

    async def _respect_limits(self, body: dict[str, Any]) -> None:
        """Wait for the RPM/TPM limiters and for any pause the server's headers asked for."""
        delay = self._paused_until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if self._rpm is not None:
            await self._rpm.acquire()
        if self._tpm is not None and self.config.tpm:  # (the limiter exists only with a tpm)
            await self._tpm.acquire(min(estimate_tokens(body), self.config.tpm))

    def _read_limit_headers(self, headers: Mapping[str, str]) -> None:
        """When the server reports no requests or tokens left, pause every call until reset."""
        for kind in ("requests", "tokens"):
            remaining = headers.get(f"x-ratelimit-remaining-{kind}")
            reset = parse_reset(headers.get(f"x-ratelimit-reset-{kind}"))
            if remaining is not None and reset is not None and remaining.strip() == "0":
                self._paused_until = max(self._paused_until,
                                         time.monotonic() + min(reset, _MAX_RETRY_AFTER))

    async def _release_unused(self) -> None:
        """Give back the claims taken ahead for requests that were never sent."""
        ahead, self._ahead = self._ahead, {}
        unused = []
        for key, task in ahead.items():
            try:
                claim = await task
            except asyncio.CancelledError:
                if task.cancelled():
                    continue  # outcome unknown: a claim it took lapses with its lease
                raise
            except Exception:
                continue  # it failed: nothing was taken
            if claim.outcome == "mine" and key not in self._paid:
                unused.append(key)
        if unused and self.ledger is not None:
            ledger = self.ledger

            def release() -> None:
                for key in unused:
                    ledger.release(key)

            with contextlib.suppress(StoreError):
                await self._on_ledger(release)

    async def aclose(self) -> None:
        await self._release_unused()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat
        if self._owns_transport:
            await self._transport.aclose()
