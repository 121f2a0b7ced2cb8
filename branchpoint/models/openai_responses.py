"""Reading the OpenAI-compatible client's replies into `ModelCall`s: the text, tool calls,
reasoning and logprobs, and usage accounting (tokens as the server reported them; reasoning
tokens counted from the reasoning text where the server reports none). Texts are redacted of
the client's secrets before anyone stores them."""

from __future__ import annotations

import json
from typing import Any

from branchpoint.models.call import ModelCall
from branchpoint.models.logprobs import read_chat_logprobs, read_completion_logprobs
from branchpoint.models.reasoning import ServerTokenCounter
from branchpoint.models.replies import redacted_call
from branchpoint.traces import Usage


def usage_from_openai(token_usage: dict[str, Any] | None) -> Usage:
    """Usage from an OpenAI-style `usage` dict (prompt/completion tokens, reasoning details)."""
    token_usage = token_usage or {}
    details = token_usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(token_usage.get("prompt_tokens") or 0),
        output_tokens=int(token_usage.get("completion_tokens") or 0),
        reasoning_tokens=details.get("reasoning_tokens"),
    )


def chat_usage(token_usage: dict[str, Any] | None, reasoning: str | None, counter: ServerTokenCounter) -> Usage:
    """Usage as reported; reasoning tokens counted (by `counter`) from the reasoning text when not
    reported (absent, or 0 beside non-empty reasoning text, which some servers report)."""
    reported = usage_from_openai(token_usage)
    fields: dict[str, Any] = {
        "input_tokens": reported.input_tokens,
        "output_tokens": reported.output_tokens,
        "reasoning_tokens": reported.reasoning_tokens,
    }
    if not fields["reasoning_tokens"] and isinstance(reasoning, str) and reasoning:
        counted = counter.count(reasoning)
        # Reasoning is part of the output (vLLM counts it in completion_tokens): an estimate,
        # or a re-tokenisation that differs, never exceeds what the server says it generated.
        output = fields["output_tokens"]
        fields["reasoning_tokens"] = min(counted.tokens, output) if output > 0 else counted.tokens
        if counted.estimated:
            fields["reasoning_tokens_estimated"] = True  # an extra field: Usage keeps extras
    return Usage(**fields)


def counts_reasoning(raw: dict[str, Any]) -> bool:
    """Whether `chat_usage` will count reasoning tokens for this reply (reasoning text, none
    or 0 reported): counting asks the server, so an async caller does it off the loop."""
    msg = ((raw.get("choices") or [{}])[0]).get("message") or {}
    details = (raw.get("usage") or {}).get("completion_tokens_details") or {}
    return bool(msg.get("reasoning") or msg.get("reasoning_content")) and not details.get("reasoning_tokens")


def tool_calls(raw: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
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


def completion_call(
    result: Any, latency: float, cache_hit: bool | None, *, logprobs: bool, secrets: list[str]
) -> ModelCall:
    """The call a langchain-openai completion `result` records (`logprobs`: whether they were asked)."""
    gen = result.generations[0][0]
    info = gen.generation_info or {}
    call = ModelCall(
        text=gen.text,
        usage=usage_from_openai((result.llm_output or {}).get("token_usage")),
        latency_s=latency,
        finish_reason=info.get("finish_reason"),
        logprobs=read_completion_logprobs(info.get("logprobs")) if logprobs else None,
        cache_hit=cache_hit,
    )
    return redacted_call(call, secrets)


def chat_call(
    raw: dict[str, Any],
    latency: float,
    cache_hit: bool | None,
    *,
    counter: ServerTokenCounter,
    logprobs: bool,
    secrets: list[str],
) -> ModelCall:
    """The call a checked chat reply `raw` records (vLLM's `reasoning`, or older
    `reasoning_content`, kept as the reasoning text)."""
    choice = (raw.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    call = ModelCall(
        text=msg.get("content") or "",
        usage=chat_usage(raw.get("usage"), reasoning, counter),
        latency_s=latency,
        finish_reason=choice.get("finish_reason"),
        tool_calls=tool_calls(msg.get("tool_calls")),
        reasoning=reasoning or None,
        cache_hit=cache_hit,
        logprobs=read_chat_logprobs(choice.get("logprobs")) if logprobs else None,
    )
    return redacted_call(call, secrets)
