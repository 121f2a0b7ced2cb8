"""OpenAI-compatible client (vLLM, llama.cpp's server, any such endpoint) built on langchain-openai.

One client serves both endpoint styles: `chat` through `ChatOpenAI` (tool calls, reasoning text)
and `complete` through langchain-openai's completion model (few-shot prompts for base models).
Every call records usage (input, output and, where reported, reasoning tokens) and latency.
Transport faults are retried with tenacity and then raised as `TransportError`; other HTTP errors
(4xx) are not retried and are raised as `ModelServerError` with the server's message.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
import openai
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI, OpenAI
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from branchpoint.errors import InputError, ModelServerError
from branchpoint.models.call import ModelCall, TransportError
from branchpoint.models.spec import ModelSpec
from branchpoint.traces import Usage

#: Placeholder key for local servers that need none (llama.cpp, vLLM without --api-key).
NO_KEY = "not-needed"


def is_transport_fault(exc: BaseException) -> bool:
    """True for faults worth retrying: connection errors, timeouts, HTTP 429 and 5xx."""
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, httpx.TransportError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def resolve_api_key(spec: ModelSpec) -> str:
    """The API key from the environment variable the spec names; keys never live in specs."""
    if not spec.api_key_env:
        return NO_KEY
    key = os.environ.get(spec.api_key_env)
    if not key:
        raise InputError(
            f"model.api_key_env: environment variable {spec.api_key_env} is not set "
            "(export it, or remove api_key_env for a server that needs no key)"
        )
    return key


class ReasoningChatOpenAI(ChatOpenAI):
    """ChatOpenAI that keeps the reasoning text vLLM returns (`reasoning`, or `reasoning_content`)."""

    def _create_chat_result(
        self, response: Any, generation_info: dict | None = None
    ) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        raw = response if isinstance(response, dict) else response.model_dump()
        for gen, choice in zip(result.generations, raw.get("choices") or []):
            msg = choice.get("message") or {}
            reasoning = msg.get("reasoning") or msg.get("reasoning_content")
            if reasoning and isinstance(gen.message, AIMessage):
                gen.message.additional_kwargs["reasoning"] = reasoning
        return result


def _usage_from_openai(token_usage: dict[str, Any] | None) -> Usage:
    """Usage from an OpenAI-style `usage` dict (prompt/completion tokens, reasoning details)."""
    token_usage = token_usage or {}
    details = token_usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(token_usage.get("prompt_tokens") or 0),
        output_tokens=int(token_usage.get("completion_tokens") or 0),
        reasoning_tokens=details.get("reasoning_tokens"),
    )


class OpenAICompatibleClient:
    """A `ModelClient` for any OpenAI-compatible server, configured from a `ModelSpec`."""

    def __init__(self, spec: ModelSpec, base_url: str | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.base_url = base_url or spec.base_url
        if not self.base_url:
            raise InputError("model.base_url: required for provider 'openai' (e.g. http://127.0.0.1:8000/v1)")
        key = resolve_api_key(spec)
        common: dict[str, Any] = dict(
            model=spec.name,
            base_url=self.base_url,
            api_key=key,
            temperature=spec.temperature,
            timeout=spec.timeout_s,
            max_retries=0,  # tenacity retries, so the policy is ours and bounded
        )
        self._chat = ReasoningChatOpenAI(seed=spec.seed, **common)
        self._completion = OpenAI(max_tokens=spec.max_tokens, **common)

    def with_seed(self, seed: int | None) -> OpenAICompatibleClient:
        """A client for the same server and model that sends another sampling seed."""
        if seed == self.spec.seed:
            return self
        return OpenAICompatibleClient(self.spec.model_copy(update={"seed": seed}), base_url=self.base_url)

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception(is_transport_fault),
            stop=stop_after_attempt(self.spec.retries + 1),
            wait=wait_exponential(multiplier=0.5, max=8),
            reraise=False,
        )

    def _with_retries(self, fn: Any) -> Any:
        try:
            for attempt in self._retrying():
                with attempt:
                    return fn()
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise TransportError(f"model server {self.base_url}: {last}") from last
        except openai.APIStatusError as exc:
            # Not a transport fault (e.g. HTTP 400: vLLM without --enable-auto-tool-choice, a bad
            # grammar): retrying cannot help, so say what the server said, as an error for people.
            raise ModelServerError(
                f"model server {self.base_url} refused the request (HTTP {exc.status_code}): {exc.message}"
            ) from exc
        raise AssertionError("unreachable")

    def _body(self, max_tokens: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        # langchain-openai sends `max_completion_tokens`, which llama.cpp's server ignores:
        # also send `max_tokens` so every server honours the limit.
        body = {"max_tokens": max_tokens, **self.spec.extra_body}
        if extra:
            body.update(extra)
        return body

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str] | None = None,
        grammar: str | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Text completion on `/v1/completions`; `grammar` is sent as llama.cpp's GBNF field."""
        limit = max_tokens or self.spec.max_tokens
        extra: dict[str, Any] = {}
        if grammar is not None:
            extra["grammar"] = grammar
        if self.spec.seed is not None:
            extra["seed"] = self.spec.seed
        kwargs: dict[str, Any] = {"max_tokens": limit, "extra_body": {**self.spec.extra_body, **extra}}

        def call() -> Any:
            return self._completion.generate([prompt], stop=stop, **kwargs)

        start = time.perf_counter()
        result = self._with_retries(call)
        latency = time.perf_counter() - start
        gen = result.generations[0][0]
        info = gen.generation_info or {}
        usage = _usage_from_openai((result.llm_output or {}).get("token_usage"))
        return ModelCall(
            text=gen.text,
            usage=usage,
            latency_s=latency,
            finish_reason=info.get("finish_reason"),
        )

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> ModelCall:
        """Chat completion on `/v1/chat/completions`, optionally offering function tools."""
        limit = max_tokens or self.spec.max_tokens
        model = self._chat.bind(max_tokens=limit, extra_body=self._body(limit))
        if tools:
            model = self._chat.bind_tools(tools).bind(max_tokens=limit, extra_body=self._body(limit))
        start = time.perf_counter()
        msg: AIMessage = self._with_retries(lambda: model.invoke(messages))
        latency = time.perf_counter() - start
        meta = msg.usage_metadata or {}
        details = meta.get("output_token_details") or {}
        usage = Usage(
            input_tokens=int(meta.get("input_tokens") or 0),
            output_tokens=int(meta.get("output_tokens") or 0),
            reasoning_tokens=details.get("reasoning"),
        )
        text = msg.content if isinstance(msg.content, str) else msg.text
        return ModelCall(
            text=text or "",
            usage=usage,
            latency_s=latency,
            finish_reason=(msg.response_metadata or {}).get("finish_reason"),
            tool_calls=[{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in msg.tool_calls],
            reasoning=msg.additional_kwargs.get("reasoning"),
        )
