"""The HTTP side of the OpenAI-compatible client: the API key, one shared TLS context, the
transports that answer from the response cache, the per-event-loop async clients, and which
faults are worth retrying (`is_transport_fault`). LangChain providers reuse them, so every
provider sends and retries the same way."""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import threading
import weakref
from typing import Any

import httpx
import httpx2
import openai
from openai._constants import DEFAULT_CONNECTION_LIMITS

from branchpoint.models.replies import MalformedReply
from branchpoint.models.response_cache import (
    AsyncCachingTransport,
    CacheBinding,
    CachingTransport,
    ResponseCache,
)
from branchpoint.models.spec import ModelSpec

#: Placeholder key for local servers that need none (llama.cpp, vLLM without --api-key).
NO_KEY = "not-needed"


#: httpx's transport faults, of both HTTP stacks: openai 3.x sends through `httpx2` (its
#: exceptions are not `httpx`'s), LangChain integrations may still send through `httpx`.
HTTP_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx.TransportError, httpx2.TransportError)


def is_transport_fault(exc: BaseException) -> bool:
    """True for faults worth retrying: connection errors, timeouts, HTTP 429 and 5xx, a response
    body cut off in transit (truncated JSON), and a 200 reply that is no completion
    (`replies.MalformedReply`: no `choices`, a gateway's `{"error": ...}`)."""
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, *HTTP_TRANSPORT_ERRORS)):
        return True
    if isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError, MalformedReply)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context (httpx's default) for every client: building one loads the CA bundle (~0.1 s)."""
    return httpx.create_ssl_context()


def sync_transport(cache: CacheBinding | None, inner: Any = None) -> dict[str, Any]:
    """The `transport` keyword of a blocking HTTP client: one that answers from `cache` (over
    `inner`, default a new connection pool); without a cache, `inner` or httpx's default."""
    if cache is None:
        return {} if inner is None else {"transport": inner}
    inner = inner or httpx2.HTTPTransport(verify=tls_context(), limits=DEFAULT_CONNECTION_LIMITS)
    return {"transport": CachingTransport(inner, cache)}


def async_transport(cache: CacheBinding | None, inner: Any = None) -> dict[str, Any]:
    """The `transport` keyword of an async HTTP client answering from `cache` (over `inner`,
    default a new connection pool); none without a cache."""
    if cache is None:
        return {} if inner is None else {"transport": inner}
    inner = inner or httpx2.AsyncHTTPTransport(verify=tls_context(), limits=DEFAULT_CONNECTION_LIMITS)
    return {"transport": AsyncCachingTransport(inner, cache)}


def cache_binding(spec: ModelSpec, base_url: str | None, secrets: list[str]) -> CacheBinding | None:
    """The response cache the spec names (`model.response_cache`) bound to this model, or None."""
    if not spec.response_cache:
        return None
    from branchpoint.models.model_identity import model_fingerprint

    return CacheBinding(ResponseCache(spec.response_cache), lambda: model_fingerprint(spec, base_url), secrets)


def resolve_api_key(spec: ModelSpec) -> str:
    """The API key from the environment variable the spec names; keys never live in specs."""
    return spec.api_key() or NO_KEY


class LoopClients:
    """The async side of one server's clients: per event loop, an `httpx2.AsyncClient` and an
    `openai.AsyncOpenAI` over it, made on first use in that loop (connections belong to the loop
    that opened them: `asyncio.run` per run makes a new loop, and a blocking policy that awaits a
    helper runs it on its worker thread's own loop). Forgotten with their loop."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout_s: float,
        log_hook: Any,
        cache: CacheBinding | None = None,
        transport: Any = None,
    ) -> None:
        self._params = dict(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self._hooks = {"request": [log_hook]} if log_hook is not None else {}
        self._cache = cache
        self._transport = transport
        self._lock = threading.Lock()
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[openai.DefaultAsyncHttpxClient, openai.AsyncOpenAI]
        ] = weakref.WeakKeyDictionary()

    def current(self) -> tuple[asyncio.AbstractEventLoop, openai.DefaultAsyncHttpxClient, openai.AsyncOpenAI]:
        """The running loop and its HTTP and OpenAI clients (made now if this loop has none)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            clients = self._by_loop.get(loop)
            if clients is None:
                http = openai.DefaultAsyncHttpxClient(
                    verify=tls_context(), event_hooks=self._hooks, **async_transport(self._cache, self._transport)
                )
                clients = self._by_loop[loop] = (http, openai.AsyncOpenAI(**self._params, http_client=http))  # type: ignore[arg-type]
        return loop, clients[0], clients[1]

    async def aclose(self) -> None:
        """Close the running loop's connections (the end of a run); a later call opens new ones."""
        with self._lock:
            clients = self._by_loop.pop(asyncio.get_running_loop(), None)
        if clients is not None:
            await clients[0].aclose()
