"""HTTP clients for LangChain chat models, whose request hook logs each body as it is sent.

`--log-requests` promises the JSON body that went to the server. A LangChain integration builds
that body itself (ChatOpenAI: `_default_params` under the call's keyword arguments, messages
converted, `max_tokens` renamed `max_completion_tokens`), so the call's arguments are not it.
Integrations that send through an httpx client they accept as `http_client` /
`http_async_client` (ChatOpenAI, AzureChatOpenAI, ChatDeepSeek, ChatXAI, ... all through the
`openai` package) get clients made here whose request event hook hands the body to the request
sink of the call in progress.

Several `LangChainChatClient` views (a run's and a fork branch's, each with its own sink) share
one LangChain model and so one HTTP client: the sink is not bound to the client but set, per
call, in `active_sink` (a context variable: the sync call sends on its own thread, the async one
in its own task, so the hook sees the sink of exactly the call it is sending for).

Pooled async connections belong to the event loop that opened them (`asyncio.run` per call or
per run makes a new loop each time): the async client sends through `PerLoopTransport`, one
connection pool per running loop, forgotten with its loop, as the OpenAI-compatible client's
`LoopClients` do.
"""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from branchpoint.models.openai_transport import async_transport, sync_transport, tls_context
from branchpoint.models.response_cache import CacheBinding

#: The request sink (`write(endpoint, body)`) of the LangChain call sending in this thread / task.
active_sink: ContextVar[Any] = ContextVar("branchpoint_langchain_request_sink", default=None)


def endpoint_of(path: str) -> str:
    """The request log's endpoint name for a URL path: `chat` for `/chat/completions`,
    `completions`, else the path's last part (`responses` for OpenAI's Responses API)."""
    if path.endswith("/chat/completions"):
        return "chat"
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def log_sent_body(request: Any) -> None:
    """httpx request hook: hand the JSON body of a POST to the active sink (never headers)."""
    sink = active_sink.get()
    if sink is None or request.method != "POST":
        return
    try:
        body = json.loads(request.content or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return  # not a JSON request (an upload): nothing the request log describes
    sink.write(endpoint_of(request.url.path), body)


async def alog_sent_body(request: Any) -> None:
    """The async client's request hook (httpx awaits its hooks): `log_sent_body`."""
    log_sent_body(request)


#: Connection limits of the `openai` package's default clients (it sends hundreds at once).
LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


class PerLoopTransport(httpx2.AsyncBaseTransport):
    """An async transport with one connection pool per running event loop (httpx's public
    custom-transport interface): a client made once serves every loop that awaits it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx2.AsyncHTTPTransport] = (
            weakref.WeakKeyDictionary()
        )

    def _current(self) -> httpx2.AsyncHTTPTransport:
        loop = asyncio.get_running_loop()
        with self._lock:
            transport = self._by_loop.get(loop)
            if transport is None:
                transport = self._by_loop[loop] = httpx2.AsyncHTTPTransport(verify=tls_context(), limits=LIMITS)
        return transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send on the running loop's pool."""
        return await self._current().handle_async_request(request)

    async def aclose(self) -> None:
        """Close the running loop's connections (a later request opens new ones)."""
        with self._lock:
            transport = self._by_loop.pop(asyncio.get_running_loop(), None)
        if transport is not None:
            await transport.aclose()


@dataclass
class LoggingClients:
    """`http_client` and `http_async_client` (the `openai` package's httpx clients, over the
    shared TLS context) whose request hooks log the body sent, and whose transports answer from
    the response cache `cache` when one is given (`response_cache`)."""

    transport: PerLoopTransport = field(default_factory=PerLoopTransport)
    sync: Any = None
    async_: Any = None
    cache: CacheBinding | None = None

    def __post_init__(self) -> None:
        self.sync = openai.DefaultHttpxClient(
            verify=tls_context(), event_hooks={"request": [log_sent_body]}, **sync_transport(self.cache)
        )
        self.async_ = openai.DefaultAsyncHttpxClient(
            event_hooks={"request": [alog_sent_body]}, **async_transport(self.cache, self.transport)
        )

    def kwargs(self) -> dict[str, Any]:
        """The factory keyword arguments that hand the model these clients."""
        return {"http_client": self.sync, "http_async_client": self.async_}


def add_logging_hooks(options: dict[str, Any]) -> None:
    """Add the logging hooks to the httpx clients a spec's `options` hand the model itself."""
    for name, hook in (("http_client", log_sent_body), ("http_async_client", alog_sent_body)):
        client: Any = options.get(name)
        hooks = getattr(client, "event_hooks", None)
        if isinstance(hooks, dict) and hook not in hooks.get("request", []):
            client.event_hooks = {**hooks, "request": [*hooks.get("request", []), hook]}


def sends_through(model: Any, clients: dict[str, Any]) -> bool:
    """Whether `model` holds these HTTP clients (so its calls' bodies reach the hook)."""
    return any(getattr(model, name, None) is client for name, client in clients.items())
