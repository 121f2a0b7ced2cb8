"""Any LangChain chat model as the policy's model: `model.provider: langchain`.

A spec names a factory, `factory: package.module:function`, called with `model.options` as
keyword arguments; it must return a `langchain_core` `BaseChatModel` (ChatOpenAI, ChatAnthropic,
ChatOllama, a fake model in tests, ...). Calls go through LangChain's public interface only:

- tools: `bind_tools(tools)` with the OpenAI function schemas the policies offer; calls come
  back from `AIMessage.tool_calls`;
- usage: `AIMessage.usage_metadata` (input, output, and `output_token_details.reasoning`);
- reasoning text: where the integration gives it, as `reasoning` content blocks
  (`AIMessage.content_blocks`, LangChain's standard form) or `additional_kwargs`
  `reasoning_content` / `reasoning` (ChatDeepSeek, ChatOpenRouter, ...). ChatOpenAI itself drops
  vLLM's reasoning field; use `provider: openai` for vLLM when reasoning text matters;
- reasoning tokens: as reported; when not (or 0 beside reasoning text), estimated from the text
  (`reasoning.estimate_tokens`) and marked `reasoning_tokens_estimated`;
- every model setting of the spec, on every call, as the OpenAI-compatible provider sends it:
  `temperature`, `top_p`, `seed` and the call's token limit (`max_tokens`) as keyword arguments of
  the call where the model has that setting (a setting it lacks is not sent, and the record's
  sampling as sent leaves it out); `reasoning_effort` translated per family
  (`reasoning.reasoning_fields`): a field the model has by name (ChatOpenAI's `reasoning_effort`)
  as a keyword argument, the others (Qwen3's `chat_template_kwargs`, `thinking_token_budget`)
  in `extra_body` with `max_tokens` (llama.cpp reads it, not `max_completion_tokens`) and the
  spec's `extra_body` over them. A model with no `extra_body` setting cannot carry the spec's
  extra fields or its reasoning effort: refused when it is opened, never dropped in silence;
  `model.options` may not set what the spec sends itself (`OWNED_OPTIONS`);
- the request log (`--log-requests`, the record's sampling as sent, request fingerprints): for a
  model that sends through an httpx client it accepts as `http_client` / `http_async_client`
  (ChatOpenAI and the other `openai`-based integrations), the JSON body of each HTTP request as
  sent, from a request hook (`langchain_http`); for any other model (no HTTP client to hook, a
  fake model) the call's keyword arguments over the model's own sampling settings.

Chat models have no text-completion endpoint, so `style` must be `chat`. Transport faults the
integration raises (openai / httpx connection errors, timeouts, 429, 5xx), and a reply that is no
`AIMessage` with text content and well-formed tool calls (`replies.check_chat_message`), are
retried like the OpenAI-compatible client's and then raised as `TransportError`; the texts kept
are redacted (`replies.redacted_call`). `achat` / `acomplete` are the
same calls through the model's `ainvoke` (LangChain runs a model without a native async path in
its executor), retried with tenacity's `AsyncRetrying`.
"""

from __future__ import annotations

import importlib
import inspect
import time
from typing import Any

from tenacity import AsyncRetrying, RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from branchpoint.errors import InputError
from branchpoint.models.call import ModelCall, TransportError
from branchpoint.models.langchain_http import (
    LoggingClients,
    active_sink,
    add_logging_hooks,
    sends_through,
)
from branchpoint.models.openai_transport import cache_binding, is_transport_fault
from branchpoint.models.reasoning import estimate_tokens, merge_body, reasoning_fields
from branchpoint.models.replies import check_chat_message, redacted_call
from branchpoint.models.response_cache import observe_cache
from branchpoint.models.sent_sampling import SAMPLING_FIELDS
from branchpoint.models.spec import ModelSpec
from branchpoint.traces import Usage

#: Model options the spec sends itself with every call (`model.temperature` ...): an option
#: setting one would be overridden by the call, so it is refused, naming the spec field to set.
OWNED_OPTIONS: dict[str, str] = {
    "temperature": "model.temperature",
    "top_p": "model.top_p",
    "seed": "model.seed",
    "max_tokens": "model.max_tokens",
    "max_completion_tokens": "model.max_tokens",
    "reasoning_effort": "model.reasoning_effort",
    "extra_body": "model.extra_body",
}


def load_factory(path: str) -> Any:
    """The callable `package.module:function` names; InputError saying what is wrong."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"model.factory {path!r}: expected package.module:function (e.g. langchain_openai:ChatOpenAI)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(
            f"model.factory {path!r}: cannot import {module_name} ({exc}); install the package that provides it"
        ) from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise InputError(f"model.factory {path!r}: {module_name} has no {attr}")
        target = getattr(target, part)
    if not callable(target):
        raise InputError(f"model.factory {path!r}: {attr} is not callable")
    return target


def _accepts_http_clients(factory: Any) -> bool:
    """Whether a factory takes `http_client` and `http_async_client` keyword arguments."""
    fields = getattr(factory, "model_fields", None)
    if isinstance(fields, dict):
        return "http_client" in fields and "http_async_client" in fields
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return True
    return "http_client" in params and "http_async_client" in params


def check_options(options: dict[str, Any]) -> None:
    """Refuse options that set what the spec sends with every call (`OWNED_OPTIONS`)."""
    for name, field in OWNED_OPTIONS.items():
        if name in options:
            raise InputError(
                f"model.options.{name}: every call sends {field}, which wins over the model's own; "
                f"set {field} instead of options.{name}"
            )


def build_chat_model(spec: ModelSpec) -> tuple[Any, LoggingClients | None, bool]:
    """Call the spec's factory with its options; the result must be a BaseChatModel. Returns the
    model, the logging HTTP clients made for it (or None), and whether its HTTP requests reach
    the request-log hook (`langchain_http`): the factory is given logging `http_client` /
    `http_async_client` when it takes them and the options give none, and clients the options
    give get the hook added."""
    from langchain_core.language_models import BaseChatModel

    if not spec.factory:
        raise InputError(
            "model.factory: required for provider 'langchain' (package.module:function "
            "returning a LangChain chat model, e.g. langchain_openai:ChatOpenAI)"
        )
    check_options(spec.options)
    factory = load_factory(spec.factory)
    options = dict(spec.options)
    clients: dict[str, Any] = {}
    made: LoggingClients | None = None
    cache = cache_binding(spec, None, [])
    if "http_client" in options or "http_async_client" in options:
        add_logging_hooks(options)
        clients = {k: options[k] for k in ("http_client", "http_async_client") if k in options}
    elif _accepts_http_clients(factory):
        made = LoggingClients(cache=cache)
        clients = made.kwargs()
    try:
        try:
            model = factory(**options, **{k: v for k, v in clients.items() if k not in options})
        except TypeError:
            if not clients or clients.keys() <= options.keys():
                raise
            clients, made = {}, None  # a factory with **kwargs that does not take the clients after all
            model = factory(**options)
    except TypeError as exc:
        raise InputError(f"model.options: {spec.factory} does not accept them ({exc})") from None
    if not isinstance(model, BaseChatModel):
        raise InputError(
            f"model.factory {spec.factory!r} returned {type(model).__name__}, not a LangChain BaseChatModel"
        )
    logs_http = bool(clients) and sends_through(model, clients)
    if cache is not None and (made is None or not logs_http):
        raise InputError(
            f"model.response_cache: {type(model).__name__} from {spec.factory} does not send through HTTP clients "
            "branchpoint gives it (http_client / http_async_client, not given in model.options), so the response "
            "cache cannot see its requests; remove response_cache (--cache) for this model"
        )
    return model, made, logs_http


def _has_setting(model: Any, name: str) -> bool:
    fields = getattr(type(model), "model_fields", {})
    return name in fields or any(getattr(f, "alias", None) == name for f in fields.values())


def reasoning_text(message: Any) -> str | None:
    """Reasoning text of an AIMessage: standard `reasoning` blocks, else provider kwargs."""
    parts: list[str] = []
    try:
        blocks = message.content_blocks
    except Exception:
        blocks = []
    for block in blocks or []:
        if isinstance(block, dict) and block.get("type") == "reasoning" and block.get("reasoning"):
            parts.append(str(block["reasoning"]))
    if parts:
        return "\n".join(parts)
    extra = getattr(message, "additional_kwargs", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def usage_of(message: Any, reasoning: str | None) -> Usage:
    """Usage from `usage_metadata`; reasoning tokens estimated from the text when not reported."""
    meta = getattr(message, "usage_metadata", None) or {}
    details = meta.get("output_token_details") or {}
    fields: dict[str, Any] = {
        "input_tokens": int(meta.get("input_tokens") or 0),
        "output_tokens": int(meta.get("output_tokens") or 0),
        "reasoning_tokens": details.get("reasoning"),
    }
    if not fields["reasoning_tokens"] and reasoning:
        counted = estimate_tokens(reasoning)
        output = fields["output_tokens"]
        fields["reasoning_tokens"] = min(counted, output) if output > 0 else counted
        fields["reasoning_tokens_estimated"] = True
    return Usage(**fields)


class LangChainChatClient:
    """A `ModelClient` over any LangChain chat model (see the module docstring)."""

    def __init__(
        self,
        spec: ModelSpec,
        model: Any | None = None,
        request_log: Any = None,
        *,
        logs_http: bool = False,
        http: LoggingClients | None = None,
    ) -> None:
        if spec.style != "chat":
            raise InputError(
                "model.style: provider 'langchain' needs style chat (chat models have no text-completion endpoint)"
            )
        self.spec = spec
        self.name = spec.name
        if model is None:
            model, http, logs_http = build_chat_model(spec)
        self.model = model
        self._http = http
        #: Whether the model's HTTP requests reach the request-log hook (else calls are logged).
        self.logs_http = logs_http
        self.request_log = request_log
        self._check_carried()

    def _check_carried(self) -> None:
        """Refuse spec settings this model has no way to send (`extra_body`, reasoning effort)."""
        if _has_setting(self.model, "extra_body"):
            return
        if self.spec.extra_body:
            raise InputError(
                f"model.extra_body: {type(self.model).__name__} has no extra_body setting to send "
                f"{sorted(self.spec.extra_body)} with; remove them, or set them in model.options as that model names them"
            )
        unsent = [k for k in reasoning_fields(self.spec) if not _has_setting(self.model, k)]
        if unsent:
            raise InputError(
                f"model.reasoning_effort: {type(self.model).__name__} has neither "
                f"{' nor '.join(unsent)} nor an extra_body setting to send it with; remove reasoning_effort, "
                "or set the model's own reasoning option in model.options"
            )

    def _view(self, spec: ModelSpec, request_log: Any) -> LangChainChatClient:
        return LangChainChatClient(
            spec, model=self.model, request_log=request_log, logs_http=self.logs_http, http=self._http
        )

    async def aclose(self) -> None:
        """Close the async HTTP connections of the running loop made for this model (shared by
        its views); a model that sends through its own clients keeps them."""
        if self._http is not None:
            await self._http.transport.aclose()

    def with_seed(self, seed: int | None) -> LangChainChatClient:
        """The same model with another seed (sent where the model has a seed setting)."""
        return self.with_sampling(seed=seed)

    def with_sampling(
        self, *, temperature: float | None = None, top_p: float | None = None, seed: int | None = None
    ) -> LangChainChatClient:
        """The same model sampling with these settings (each sent where the model has that setting)."""
        update = {k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("seed", seed)) if v is not None}
        if all(getattr(self.spec, k) == v for k, v in update.items()):
            return self
        return self._view(self.spec.model_copy(update=update), self.request_log)

    def with_request_log(self, request_log: Any) -> LangChainChatClient:
        """The same client, logging each request it makes (the HTTP body sent, else the call)."""
        return self._view(self.spec, request_log)

    def _call_kwargs(self, max_tokens: int) -> dict[str, Any]:
        """The spec's settings as the call's keyword arguments (see the module docstring)."""
        kwargs: dict[str, Any] = {}
        settings = {
            "temperature": self.spec.temperature,
            "top_p": self.spec.top_p,
            "seed": self.spec.seed,
            "max_tokens": max_tokens,
        }
        for name, value in settings.items():
            if value is not None and _has_setting(self.model, name):
                kwargs[name] = value
        extra: dict[str, Any] = {}
        for name, value in reasoning_fields(self.spec).items():
            if _has_setting(self.model, name):
                kwargs[name] = value
            else:
                extra[name] = value
        if _has_setting(self.model, "extra_body"):
            extra = merge_body(merge_body({"max_tokens": max_tokens}, extra), self.spec.extra_body)
            kwargs["extra_body"] = merge_body(getattr(self.model, "extra_body", None) or {}, extra)
        return kwargs

    def _retry_settings(self) -> dict[str, Any]:
        return dict(
            retry=retry_if_exception(is_transport_fault),
            stop=stop_after_attempt(self.spec.retries + 1),
            wait=wait_exponential(multiplier=0.5, max=8),
            reraise=False,
        )

    def _transport_error(self, exc: RetryError) -> TransportError:
        return TransportError(f"model {self.spec.factory}: {exc.last_attempt.exception()}")

    def _invoke(self, runnable: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        token = active_sink.set(self.request_log if self.logs_http else None)  # the hook's sink
        try:
            for attempt in Retrying(**self._retry_settings()):
                with attempt:
                    return check_chat_message(runnable.invoke(messages, **kwargs))
        except RetryError as exc:
            raise self._transport_error(exc) from exc.last_attempt.exception()
        finally:
            active_sink.reset(token)
        raise AssertionError("unreachable")

    async def _ainvoke(self, runnable: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        token = active_sink.set(self.request_log if self.logs_http else None)  # this task's sink
        try:
            async for attempt in AsyncRetrying(**self._retry_settings()):
                with attempt:
                    return check_chat_message(await runnable.ainvoke(messages, **kwargs))
        except RetryError as exc:
            raise self._transport_error(exc) from exc.last_attempt.exception()
        finally:
            active_sink.reset(token)
        raise AssertionError("unreachable")

    def _runnable(self, tools: list[dict[str, Any]] | None) -> Any:
        if not tools:
            return self.model
        try:
            return self.model.bind_tools(tools)
        except NotImplementedError:
            raise InputError(
                f"model.factory {self.spec.factory!r}: {type(self.model).__name__} has no "
                "tool calling (bind_tools); use a tagged-text policy instead"
            ) from None

    def _chat_request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_tokens: int | None,
        stop: list[str] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        runnable = self._runnable(tools)
        kwargs = self._call_kwargs(max_tokens or self.spec.max_tokens)
        if stop:  # the model's own `stop` argument (a ChatOpenAI request leaves the stop string out)
            kwargs["stop"] = stop
        if self.request_log is not None and not self.logs_http:
            self.request_log.write("chat", {"messages": messages, "tools": tools, **self._own_sampling(), **kwargs})
        return runnable, kwargs

    def _own_sampling(self) -> dict[str, Any]:
        """The model's own sampling settings (from `options`), which a call sends where its
        keyword arguments set nothing: logged with the call of a model whose HTTP body cannot be
        logged, so the record's sampling is the sampling as sent (`sent_sampling`)."""
        own = {}
        for name in SAMPLING_FIELDS:
            value = getattr(self.model, name, None) if _has_setting(self.model, name) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                own[name] = value
        return own

    @staticmethod
    def _call(message: Any, latency: float, *, tool_calls: bool, cache_hit: bool | None = None) -> ModelCall:
        reasoning = reasoning_text(message)
        meta = getattr(message, "response_metadata", None) or {}
        finish = meta.get("finish_reason") or (meta.get("stop_reason") if tool_calls else None)
        calls = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls]
        call = ModelCall(
            text=message.text or "",
            usage=usage_of(message, reasoning),
            latency_s=latency,
            finish_reason=finish,
            tool_calls=calls if tool_calls else [],
            reasoning=reasoning,
            cache_hit=cache_hit,
        )
        return redacted_call(call)

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> ModelCall:
        """One chat call; `tools` bound with `bind_tools`."""
        runnable, kwargs = self._chat_request(messages, tools, max_tokens, stop)
        start = time.perf_counter()
        with observe_cache() as lookup:
            message = self._invoke(runnable, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=True, cache_hit=lookup.hit)

    async def achat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> ModelCall:
        """`chat` awaited on the running loop (`ainvoke`)."""
        runnable, kwargs = self._chat_request(messages, tools, max_tokens, stop)
        start = time.perf_counter()
        with observe_cache() as lookup:
            message = await self._ainvoke(runnable, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=True, cache_hit=lookup.hit)

    def _complete_request(
        self, prompt: str, stop: list[str] | None, grammar: str | None, max_tokens: int | None
    ) -> Any:
        if grammar is not None:
            raise InputError("provider 'langchain': chat models take no GBNF grammar; use a chat policy")
        kwargs = {"stop": stop, **self._call_kwargs(max_tokens or self.spec.max_tokens)}
        messages = [{"role": "user", "content": prompt}]
        if self.request_log is not None and not self.logs_http:
            self.request_log.write("chat", {"messages": messages, **self._own_sampling(), **kwargs})
        return messages, kwargs

    def complete(
        self, prompt: str, *, stop: list[str] | None = None, grammar: str | None = None, max_tokens: int | None = None
    ) -> ModelCall:
        """A completion-style prompt sent as one user message (no grammar: chat models take none)."""
        messages, kwargs = self._complete_request(prompt, stop, grammar, max_tokens)
        start = time.perf_counter()
        with observe_cache() as lookup:
            message = self._invoke(self.model, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=False, cache_hit=lookup.hit)

    async def acomplete(
        self, prompt: str, *, stop: list[str] | None = None, grammar: str | None = None, max_tokens: int | None = None
    ) -> ModelCall:
        """`complete` awaited on the running loop (`ainvoke`)."""
        messages, kwargs = self._complete_request(prompt, stop, grammar, max_tokens)
        start = time.perf_counter()
        with observe_cache() as lookup:
            message = await self._ainvoke(self.model, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=False, cache_hit=lookup.hit)
