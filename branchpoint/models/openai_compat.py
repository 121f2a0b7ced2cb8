"""OpenAI-compatible client (vLLM, llama.cpp's server, any such endpoint).

One client serves both endpoint styles: `chat` through the `openai` client itself (tool calls,
reasoning text) and `complete` through langchain-openai's completion model (few-shot prompts for
base models).

Why chat calls the openai client directly rather than langchain-openai's `ChatOpenAI`: ChatOpenAI
targets the official OpenAI API only and drops the fields vLLM adds (`message.reasoning`, older
`reasoning_content`); keeping them meant overriding its private `_create_chat_result`, which may
change in any release. The openai client keeps unknown response fields (`model_extra`), takes
vLLM's own request fields through its public `extra_body`, and is what ChatOpenAI calls anyway.

Structured output (the `grammar` of `complete`): llama.cpp's servers read `grammar`; vLLM ignores
that field with HTTP 200 and reads `structured_outputs: {"grammar": ...}`. Each server gets the
field it reads: the kind is the spec's `server_kind`, or detected once (`server_kind.detect`:
vLLM answers `GET /version`, llama.cpp `GET /props`; neither: `grammar`, as llama-cpp-python).
Every call records usage (input, output and reasoning tokens) and latency. Chat calls carry the
spec's reasoning effort in the fields its model family reads, and count reasoning tokens from the
reasoning text when the server does not report them (see `branchpoint.models.reasoning`).
Transport faults, and 200 replies that break the OpenAI schema (`replies`: checked before any
use; the texts kept are redacted), are retried with tenacity and then raised as `TransportError`;
other HTTP errors (4xx) are raised at once as `ModelServerError` with the server's message.

`acomplete` / `achat` are the same calls as coroutines (the runner's event loop): the same
request bodies (langchain-openai's `agenerate` for completions, `openai.AsyncOpenAI` for chat),
retried with tenacity's `AsyncRetrying`. The async HTTP client is opened per event loop (its
pooled connections belong to the loop they were made on) and shared by every `with_sampling`
copy of a client, as the blocking one is.

This module is the client and its retries; the request bodies are built in `openai_requests`,
the replies read (usage accounting included) in `openai_responses`, and the HTTP clients, TLS
context, cache transports and retried faults are `openai_transport`'s.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import httpx
import httpx2
import openai
from langchain_openai import OpenAI
from tenacity import (
    AsyncRetrying,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from branchpoint.errors import InputError, ModelServerError
from branchpoint.models.call import ModelCall, TransportError
from branchpoint.models.openai_requests import chat_request, completion_kwargs, needs_server_kind
from branchpoint.models.openai_responses import chat_call, completion_call, counts_reasoning
from branchpoint.models.openai_transport import (
    LoopClients,
    async_transport,
    cache_binding,
    is_transport_fault,
    resolve_api_key,
    sync_transport,
    tls_context,
)
from branchpoint.models.reasoning import ServerTokenCounter
from branchpoint.models.replies import AsyncCheckedCompletions, CheckedCompletions, check_chat
from branchpoint.models.request_log import RequestLog
from branchpoint.models.response_cache import CacheBinding, observe_cache
from branchpoint.models.server_kind import detect_server_kind, explain_refusal, structured_output_fields
from branchpoint.models.spec import ModelSpec
from branchpoint.redact import redact


class OpenAICompatibleClient:
    """A `ModelClient` for any OpenAI-compatible server, configured from a `ModelSpec`.

    `transport` (an httpx2 transport with both `handle_request` and `handle_async_request`)
    answers the HTTP requests instead of the network: rebuilding a run's requests from its
    checkpoints (`experiments.request_rebuild`) replays the recorded replies through it, so the
    bodies are built, and logged, by this client's own code."""

    def __init__(
        self,
        spec: ModelSpec,
        base_url: str | None = None,
        *,
        token_counter: ServerTokenCounter | None = None,
        request_log: RequestLog | None = None,
        transport: Any = None,
        _http_clients: tuple[openai.DefaultHttpxClient, openai.DefaultAsyncHttpxClient] | None = None,
        _loop_clients: LoopClients | None = None,
        _cache: CacheBinding | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.request_log = request_log
        self._transport = transport
        self.base_url = base_url or spec.base_url
        if not self.base_url:
            raise InputError("model.base_url: required for provider 'openai' (e.g. http://127.0.0.1:8000/v1)")
        key = resolve_api_key(spec)
        self._api_key = key
        #: The response cache (`model.response_cache`), shared by every copy of this client.
        self._cache = _cache or cache_binding(spec, self.base_url, [key])
        if _http_clients is None:
            # HTTP clients over one shared TLS context (building one loads the CA bundle); their
            # request hook logs into `request_log`; their transport answers from the cache.
            hooks = {"request": [self._log_request]} if request_log is not None else {}
            _http_clients = (
                openai.DefaultHttpxClient(
                    verify=tls_context(), event_hooks=hooks, **sync_transport(self._cache, transport)
                ),
                openai.DefaultAsyncHttpxClient(verify=tls_context(), **async_transport(self._cache, transport)),
            )
        self._http_clients = _http_clients
        hook = self._alog_request if request_log is not None else None
        self._loop_clients = _loop_clients or LoopClients(
            self.base_url, key, spec.timeout_s, hook, self._cache, transport
        )
        self._acompletion: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OpenAI] = weakref.WeakKeyDictionary()
        common: dict[str, Any] = dict(
            model=spec.name,
            base_url=self.base_url,
            api_key=key,
            temperature=spec.temperature,
            timeout=spec.timeout_s,
            max_retries=0,  # tenacity retries, so the policy is ours and bounded
            http_client=_http_clients[0],
            http_async_client=_http_clients[1],
        )
        if spec.top_p is not None:
            common["top_p"] = spec.top_p
        self._openai = openai.OpenAI(
            base_url=self.base_url,
            api_key=key,
            timeout=spec.timeout_s,
            max_retries=0,
            http_client=common["http_client"],
        )
        self._completion = OpenAI(max_tokens=spec.max_tokens, **common)
        self._completion.client = CheckedCompletions(self._completion.client)  # replies checked first
        self._completion_params = {
            "max_tokens": spec.max_tokens,
            **{k: v for k, v in common.items() if k != "http_async_client"},
        }
        self._server_kind: str | None = None if spec.server_kind == "auto" else spec.server_kind
        self.token_counter = token_counter or ServerTokenCounter(
            self.base_url, spec.name, api_key=key, timeout_s=min(spec.timeout_s, 30.0)
        )

    def with_seed(self, seed: int | None) -> OpenAICompatibleClient:
        """A client for the same server and model that sends another sampling seed."""
        return self.with_sampling(seed=seed)

    def with_sampling(
        self, *, temperature: float | None = None, top_p: float | None = None, seed: int | None = None
    ) -> OpenAICompatibleClient:
        """A client for the same server and model that samples with these settings (None keeps
        the current one); the HTTP clients (their connection pools and request-log hook), the
        token counter and the request log are shared: a fork branch opens no new connection."""
        update = {k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("seed", seed)) if v is not None}
        if all(getattr(self.spec, k) == v for k, v in update.items()):
            return self
        if update.keys() == {"seed"}:
            # The seed is read from the spec into each request's body (`_completion_kwargs`,
            # `_chat_request`), never into the clients: a copy shares them all, where building
            # new ones (langchain-openai's model validates and makes openai clients) cost
            # ~0.3 ms per execution or fork branch, each of which has its own seed.
            shared = copy.copy(self)
            shared.spec = self.spec.model_copy(update=update)
            return shared
        clone = OpenAICompatibleClient(
            self.spec.model_copy(update=update),
            base_url=self.base_url,
            token_counter=self.token_counter,
            request_log=self.request_log,
            transport=self._transport,
            _http_clients=self._http_clients,
            _loop_clients=self._loop_clients,
            _cache=self._cache,
        )
        clone._server_kind = self._server_kind  # detected once per server, not per seed
        return clone

    def with_request_log(self, request_log: RequestLog | None) -> OpenAICompatibleClient:
        """The same client, logging every chat / completion request body to `request_log`."""
        clone = OpenAICompatibleClient(
            self.spec,
            base_url=self.base_url,
            token_counter=self.token_counter,
            request_log=request_log,
            transport=self._transport,
            _cache=self._cache,
        )
        clone._server_kind = self._server_kind
        return clone

    def _log_request(self, request: httpx2.Request) -> None:
        """httpx request hook: log the JSON body of chat and completion requests (never headers)."""
        path = request.url.path
        if self.request_log is None or not path.endswith(("/chat/completions", "/completions")):
            return
        try:
            body = json.loads(request.content or b"null")
        except (json.JSONDecodeError, httpx2.RequestNotRead, httpx.RequestNotRead):
            body = None
        self.request_log.write("chat" if path.endswith("/chat/completions") else "completions", body)

    async def _alog_request(self, request: httpx2.Request) -> None:
        """The async HTTP client's request hook (httpx awaits its hooks): `_log_request`."""
        self._log_request(request)

    def _retry_settings(self) -> dict[str, Any]:
        return dict(
            retry=retry_if_exception(is_transport_fault),
            stop=stop_after_attempt(self.spec.retries + 1),
            wait=wait_exponential(multiplier=0.5, max=8),
            reraise=False,
        )

    def _retrying(self) -> Retrying:
        return Retrying(**self._retry_settings())

    def _failed(self, exc: RetryError | openai.APIStatusError) -> NoReturn:
        """Raise what a call that failed for good means: `TransportError` after the retries,
        `ModelServerError` for a refused request."""
        if isinstance(exc, RetryError):
            last = exc.last_attempt.exception()
            # The server's text may quote our Authorization header: redacted before anyone stores,
            # logs or prints it; the original exception is not chained (it holds the raw text).
            raise TransportError(redact(f"model server {self.base_url}: {last}", [self._api_key])) from None
        # Not a transport fault (e.g. HTTP 400: vLLM without --enable-auto-tool-choice, a bad
        # grammar): retrying cannot help, so say what the server said, as an error for people.
        explained = explain_refusal(exc.status_code, str(exc.message))
        message = explained or f"refused the request (HTTP {exc.status_code}): {exc.message}"
        raise ModelServerError(redact(f"model server {self.base_url}: {message}", [self._api_key])) from None

    def _with_retries(self, fn: Any) -> Any:
        try:
            for attempt in self._retrying():
                with attempt:
                    return fn()
        except (RetryError, openai.APIStatusError) as exc:
            self._failed(exc)
        raise AssertionError("unreachable")

    async def _awith_retries(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        try:
            async for attempt in AsyncRetrying(**self._retry_settings()):
                with attempt:
                    return await fn()
        except (RetryError, openai.APIStatusError) as exc:
            self._failed(exc)
        raise AssertionError("unreachable")

    def _async_completion(self) -> OpenAI:
        """langchain-openai's completion model over this loop's HTTP client (made once per loop)."""
        loop, http, _ = self._loop_clients.current()
        model = self._acompletion.get(loop)
        if model is None:
            model = self._acompletion[loop] = OpenAI(http_async_client=http, **self._completion_params)
            model.async_client = AsyncCheckedCompletions(model.async_client)  # replies checked first
        return model

    async def aclose(self) -> None:
        """Close the async HTTP connections of the running loop (shared by this client's copies)."""
        await self._loop_clients.aclose()
        self._acompletion.pop(asyncio.get_running_loop(), None)

    def server_kind(self) -> str:
        """vllm, llamacpp or other: from the spec, else detected once from the server."""
        if self._server_kind is None:
            self._server_kind = detect_server_kind(self.base_url or "", timeout_s=min(self.spec.timeout_s, 10.0))
        return self._server_kind

    def _completion_kwargs(self, grammar: str | None, max_tokens: int | None) -> dict[str, Any]:
        fields = structured_output_fields(self.server_kind(), grammar) if grammar is not None else {}
        return completion_kwargs(self.spec, max_tokens, fields)

    def _completion_call(self, result: Any, latency: float, cache_hit: bool | None = None) -> ModelCall:
        logprobs = self.spec.logprobs is not None
        return completion_call(result, latency, cache_hit, logprobs=logprobs, secrets=[self._api_key])

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Text completion on `/v1/completions`; `grammar` (GBNF) in the field the server reads."""
        kwargs = self._completion_kwargs(grammar, max_tokens)

        def call() -> Any:
            return self._completion.generate([prompt], stop=stop, **kwargs)

        start = time.perf_counter()
        with observe_cache() as lookup:
            result = self._with_retries(call)
        return self._completion_call(result, time.perf_counter() - start, lookup.hit)

    async def acomplete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """`complete` awaited on the running loop: the same request body (`agenerate`)."""
        if grammar is not None and self._server_kind is None:
            await asyncio.to_thread(self.server_kind)  # detected once, off the loop
        kwargs = self._completion_kwargs(grammar, max_tokens)
        model = self._async_completion()

        async def call() -> Any:
            return await model.agenerate([prompt], stop=stop, **kwargs)

        start = time.perf_counter()
        with observe_cache() as lookup:
            result = await self._awith_retries(call)
        return self._completion_call(result, time.perf_counter() - start, lookup.hit)

    def _chat_request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_tokens: int | None,
        stop: list[str] | None = None,
    ) -> dict[str, Any]:
        kind = self.server_kind() if needs_server_kind(messages, stop) else None
        return chat_request(self.spec, messages, tools, max_tokens, stop, kind)

    def _chat_call(self, raw: dict[str, Any], latency: float, cache_hit: bool | None = None) -> ModelCall:
        logprobs = self.spec.logprobs is not None
        return chat_call(
            raw, latency, cache_hit, counter=self.token_counter, logprobs=logprobs, secrets=[self._api_key]
        )

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> ModelCall:
        """Chat completion on `/v1/chat/completions`, optionally offering function tools."""
        request = self._chat_request(messages, tools, max_tokens, stop)
        start = time.perf_counter()
        with observe_cache() as lookup:
            raw = self._with_retries(lambda: check_chat(self._openai.chat.completions.create(**request)))
        return self._chat_call(raw, time.perf_counter() - start, lookup.hit)

    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> ModelCall:
        """`chat` awaited on the running loop: the same request body (`openai.AsyncOpenAI`)."""
        if self._server_kind is None and needs_server_kind(messages, stop):
            await asyncio.to_thread(self.server_kind)  # detected once, off the loop
        request = self._chat_request(messages, tools, max_tokens, stop)
        _, _, client = self._loop_clients.current()
        start = time.perf_counter()

        async def call() -> dict[str, Any]:
            return check_chat(await client.chat.completions.create(**request))

        with observe_cache() as lookup:
            raw = await self._awith_retries(call)
        latency = time.perf_counter() - start
        if counts_reasoning(raw):  # counting reasoning tokens asks the server: blocking, off the loop
            return await asyncio.to_thread(self._chat_call, raw, latency, lookup.hit)
        return self._chat_call(raw, latency, lookup.hit)
