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
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import httpx
import httpx2
import openai
from langchain_openai import OpenAI
from openai._constants import DEFAULT_CONNECTION_LIMITS
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
from branchpoint.models.logprobs import read_chat_logprobs, read_completion_logprobs, request_fields
from branchpoint.models.reasoning import ServerTokenCounter, merge_body, reasoning_fields
from branchpoint.models.replies import (
    AsyncCheckedCompletions,
    CheckedCompletions,
    MalformedReply,
    check_chat,
    redacted_call,
)
from branchpoint.models.request_log import RequestLog
from branchpoint.models.response_cache import (
    AsyncCachingTransport,
    CacheBinding,
    CachingTransport,
    ResponseCache,
    observe_cache,
)
from branchpoint.models.server_kind import detect_server_kind, explain_refusal, structured_output_fields
from branchpoint.models.spec import ModelSpec
from branchpoint.redact import redact
from branchpoint.traces import Usage

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


def _usage_from_openai(token_usage: dict[str, Any] | None) -> Usage:
    """Usage from an OpenAI-style `usage` dict (prompt/completion tokens, reasoning details)."""
    token_usage = token_usage or {}
    details = token_usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(token_usage.get("prompt_tokens") or 0),
        output_tokens=int(token_usage.get("completion_tokens") or 0),
        reasoning_tokens=details.get("reasoning_tokens"),
    )


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

    def _chat_body(self, max_tokens: int) -> dict[str, Any]:
        # langchain-openai sends `max_completion_tokens`, which llama.cpp's server ignores:
        # also send `max_tokens` so every server honours the limit. The spec's extra_body wins
        # over the reasoning-effort fields (merged one level deep, e.g. chat_template_kwargs).
        body = merge_body({"max_tokens": max_tokens}, reasoning_fields(self.spec))
        return merge_body(body, self.spec.extra_body)

    def server_kind(self) -> str:
        """vllm, llamacpp or other: from the spec, else detected once from the server."""
        if self._server_kind is None:
            self._server_kind = detect_server_kind(self.base_url or "", timeout_s=min(self.spec.timeout_s, 10.0))
        return self._server_kind

    def _chat_usage(self, token_usage: dict[str, Any] | None, reasoning: str | None) -> Usage:
        """Usage as reported; reasoning tokens counted from the reasoning text when not reported
        (absent, or 0 beside non-empty reasoning text, which some servers report)."""
        reported = _usage_from_openai(token_usage)
        fields: dict[str, Any] = {
            "input_tokens": reported.input_tokens,
            "output_tokens": reported.output_tokens,
            "reasoning_tokens": reported.reasoning_tokens,
        }
        if not fields["reasoning_tokens"] and isinstance(reasoning, str) and reasoning:
            counted = self.token_counter.count(reasoning)
            # Reasoning is part of the output (vLLM counts it in completion_tokens): an estimate,
            # or a re-tokenisation that differs, never exceeds what the server says it generated.
            output = fields["output_tokens"]
            fields["reasoning_tokens"] = min(counted.tokens, output) if output > 0 else counted.tokens
            if counted.estimated:
                fields["reasoning_tokens_estimated"] = True  # an extra field: Usage keeps extras
        return Usage(**fields)

    def _completion_kwargs(self, grammar: str | None, max_tokens: int | None) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if grammar is not None:
            extra.update(structured_output_fields(self.server_kind(), grammar))
        if self.spec.seed is not None:
            extra["seed"] = self.spec.seed
        kwargs = {"max_tokens": max_tokens or self.spec.max_tokens, "extra_body": {**self.spec.extra_body, **extra}}
        # `logprobs` is a field of langchain-openai's completion model: a keyword, not extra_body
        return {**kwargs, **request_fields(self.spec.logprobs, chat=False)}

    def _completion_call(self, result: Any, latency: float, cache_hit: bool | None = None) -> ModelCall:
        gen = result.generations[0][0]
        info = gen.generation_info or {}
        usage = _usage_from_openai((result.llm_output or {}).get("token_usage"))
        call = ModelCall(
            text=gen.text,
            usage=usage,
            latency_s=latency,
            finish_reason=info.get("finish_reason"),
            logprobs=read_completion_logprobs(info.get("logprobs")) if self.spec.logprobs is not None else None,
            cache_hit=cache_hit,
        )
        return redacted_call(call, [self._api_key])

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
        limit = max_tokens or self.spec.max_tokens
        request: dict[str, Any] = {
            "model": self.spec.name,
            "messages": messages,
            "temperature": self.spec.temperature,
            "max_completion_tokens": limit,
        }
        if self.spec.seed is not None:
            request["seed"] = self.spec.seed
        if self.spec.top_p is not None:
            request["top_p"] = self.spec.top_p
        if tools:
            request["tools"] = tools
        if stop:
            request["stop"] = stop
        request.update(request_fields(self.spec.logprobs, chat=True))
        request["extra_body"] = merge_body(self._sequence_fields(messages, stop), self._chat_body(limit))
        return request

    def _needs_server_kind(self, messages: list[dict[str, Any]], stop: list[str] | None) -> bool:
        """Whether a chat request has fields only some servers read (see `_sequence_fields`)."""
        return bool(stop) or _continues_assistant(messages)

    def _sequence_fields(self, messages: list[dict[str, Any]], stop: list[str] | None) -> dict[str, Any]:
        """vLLM's fields for a reply that continues one sequence (the tagged policy's): the stop
        string kept in the output (`include_stop_str_in_output`), and a final assistant message
        continued rather than closed (`continue_final_message`, with `add_generation_prompt`
        off, which vLLM requires with it). llama.cpp continues a final assistant message by
        itself (its assistant prefill) and, like OpenAI, leaves the stop string out: the policy
        puts it back. Empty for every other request, so their bodies do not change."""
        if not self._needs_server_kind(messages, stop) or self.server_kind() != "vllm":
            return {}
        fields: dict[str, Any] = {"include_stop_str_in_output": True} if stop else {}
        if _continues_assistant(messages):
            fields.update(continue_final_message=True, add_generation_prompt=False)
        return fields

    def _chat_call(self, raw: dict[str, Any], latency: float, cache_hit: bool | None = None) -> ModelCall:
        choice = (raw.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        reasoning = msg.get("reasoning") or msg.get("reasoning_content")
        call = ModelCall(
            text=msg.get("content") or "",
            usage=self._chat_usage(raw.get("usage"), reasoning),
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
            tool_calls=_tool_calls(msg.get("tool_calls")),
            reasoning=reasoning or None,
            cache_hit=cache_hit,
            logprobs=read_chat_logprobs(choice.get("logprobs")) if self.spec.logprobs is not None else None,
        )
        return redacted_call(call, [self._api_key])

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
        if self._server_kind is None and self._needs_server_kind(messages, stop):
            await asyncio.to_thread(self.server_kind)  # detected once, off the loop
        request = self._chat_request(messages, tools, max_tokens, stop)
        _, _, client = self._loop_clients.current()
        start = time.perf_counter()

        async def call() -> dict[str, Any]:
            return check_chat(await client.chat.completions.create(**request))

        with observe_cache() as lookup:
            raw = await self._awith_retries(call)
        latency = time.perf_counter() - start
        if _counts_reasoning(raw):  # counting reasoning tokens asks the server: blocking, off the loop
            return await asyncio.to_thread(self._chat_call, raw, latency, lookup.hit)
        return self._chat_call(raw, latency, lookup.hit)


def _continues_assistant(messages: list[dict[str, Any]]) -> bool:
    """Whether the last message is the assistant's, to be continued (the `searchr1` sequence)."""
    return bool(messages) and messages[-1].get("role") == "assistant"


def _counts_reasoning(raw: dict[str, Any]) -> bool:
    """Whether `_chat_usage` will count reasoning tokens for this reply (reasoning text, none
    or 0 reported)."""
    msg = ((raw.get("choices") or [{}])[0]).get("message") or {}
    details = (raw.get("usage") or {}).get("completion_tokens_details") or {}
    return bool(msg.get("reasoning") or msg.get("reasoning_content")) and not details.get("reasoning_tokens")


def _tool_calls(raw: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Function calls as {name, args, id}; calls whose arguments are not a JSON object are left out
    (the policy then sees no call and retries or records the action as malformed)."""
    calls = []
    for call in raw or []:
        function = call.get("function") or {}
        try:
            args = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            continue
        if isinstance(args, dict) and function.get("name"):
            calls.append({"name": function["name"], "args": args, "id": call.get("id")})
    return calls
