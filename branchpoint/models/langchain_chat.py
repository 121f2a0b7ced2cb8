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
- the call's limit: `max_tokens` when the model has such a setting, else what `options` set;
- seeds (fork repeats): `seed` when the model has such a setting, else repeats differ only by
  the model's own sampling;
- the request log (and so each record's sampling as sent) holds the call's keyword arguments
  over the model's own sampling settings (`options`): a setting the model lacks is not sent,
  and the record says so by leaving it out.

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
import time
from typing import Any

from tenacity import AsyncRetrying, RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from branchpoint.errors import InputError
from branchpoint.models.call import ModelCall, TransportError
from branchpoint.models.openai_compat import is_transport_fault
from branchpoint.models.reasoning import estimate_tokens
from branchpoint.models.replies import check_chat_message, redacted_call
from branchpoint.models.sent_sampling import SAMPLING_FIELDS
from branchpoint.models.spec import ModelSpec
from branchpoint.traces import Usage


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


def build_chat_model(spec: ModelSpec) -> Any:
    """Call the spec's factory with its options; the result must be a BaseChatModel."""
    from langchain_core.language_models import BaseChatModel

    if not spec.factory:
        raise InputError(
            "model.factory: required for provider 'langchain' (package.module:function "
            "returning a LangChain chat model, e.g. langchain_openai:ChatOpenAI)"
        )
    factory = load_factory(spec.factory)
    try:
        model = factory(**spec.options)
    except TypeError as exc:
        raise InputError(f"model.options: {spec.factory} does not accept them ({exc})") from None
    if not isinstance(model, BaseChatModel):
        raise InputError(
            f"model.factory {spec.factory!r} returned {type(model).__name__}, not a LangChain BaseChatModel"
        )
    return model


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

    def __init__(self, spec: ModelSpec, model: Any | None = None, request_log: Any = None) -> None:
        if spec.style != "chat":
            raise InputError(
                "model.style: provider 'langchain' needs style chat (chat models have no text-completion endpoint)"
            )
        self.spec = spec
        self.name = spec.name
        self.model = model if model is not None else build_chat_model(spec)
        self.request_log = request_log
        self._sampled: dict[str, Any] = {}  # set by with_sampling: sent with every call

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
        clone = LangChainChatClient(self.spec.model_copy(update=update), model=self.model, request_log=self.request_log)
        clone._sampled = {**self._sampled, **{k: v for k, v in update.items() if k != "seed"}}
        return clone

    def with_request_log(self, request_log: Any) -> LangChainChatClient:
        """The same client, logging each request it makes (messages, tools, call settings)."""
        clone = LangChainChatClient(self.spec, model=self.model, request_log=request_log)
        clone._sampled = dict(self._sampled)
        return clone

    def _call_kwargs(self, max_tokens: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if _has_setting(self.model, "max_tokens"):
            kwargs["max_tokens"] = max_tokens
        if self.spec.seed is not None and _has_setting(self.model, "seed"):
            kwargs["seed"] = self.spec.seed
        for name, value in self._sampled.items():
            if _has_setting(self.model, name):
                kwargs[name] = value
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
        try:
            for attempt in Retrying(**self._retry_settings()):
                with attempt:
                    return check_chat_message(runnable.invoke(messages, **kwargs))
        except RetryError as exc:
            raise self._transport_error(exc) from exc.last_attempt.exception()
        raise AssertionError("unreachable")

    async def _ainvoke(self, runnable: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        try:
            async for attempt in AsyncRetrying(**self._retry_settings()):
                with attempt:
                    return check_chat_message(await runnable.ainvoke(messages, **kwargs))
        except RetryError as exc:
            raise self._transport_error(exc) from exc.last_attempt.exception()
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
        if self.request_log is not None:
            self.request_log.write("chat", {"messages": messages, "tools": tools, **self._own_sampling(), **kwargs})
        return runnable, kwargs

    def _own_sampling(self) -> dict[str, Any]:
        """The model's own sampling settings (from `options`), which a call sends where its
        keyword arguments set nothing: logged with the call, so the record's sampling is the
        sampling as sent (`sent_sampling`)."""
        own = {}
        for name in SAMPLING_FIELDS:
            value = getattr(self.model, name, None) if _has_setting(self.model, name) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                own[name] = value
        return own

    @staticmethod
    def _call(message: Any, latency: float, *, tool_calls: bool) -> ModelCall:
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
        message = self._invoke(runnable, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=True)

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
        message = await self._ainvoke(runnable, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=True)

    def _complete_request(
        self, prompt: str, stop: list[str] | None, grammar: str | None, max_tokens: int | None
    ) -> Any:
        if grammar is not None:
            raise InputError("provider 'langchain': chat models take no GBNF grammar; use a chat policy")
        kwargs = {"stop": stop, **self._call_kwargs(max_tokens or self.spec.max_tokens)}
        messages = [{"role": "user", "content": prompt}]
        if self.request_log is not None:
            self.request_log.write("chat", {"messages": messages, **self._own_sampling(), **kwargs})
        return messages, kwargs

    def complete(
        self, prompt: str, *, stop: list[str] | None = None, grammar: str | None = None, max_tokens: int | None = None
    ) -> ModelCall:
        """A completion-style prompt sent as one user message (no grammar: chat models take none)."""
        messages, kwargs = self._complete_request(prompt, stop, grammar, max_tokens)
        start = time.perf_counter()
        message = self._invoke(self.model, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=False)

    async def acomplete(
        self, prompt: str, *, stop: list[str] | None = None, grammar: str | None = None, max_tokens: int | None = None
    ) -> ModelCall:
        """`complete` awaited on the running loop (`ainvoke`)."""
        messages, kwargs = self._complete_request(prompt, stop, grammar, max_tokens)
        start = time.perf_counter()
        message = await self._ainvoke(self.model, messages, **kwargs)
        return self._call(message, time.perf_counter() - start, tool_calls=False)
