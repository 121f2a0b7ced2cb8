"""The request bodies the OpenAI-compatible client sends: chat (`/v1/chat/completions`, through
the openai client) and completion keywords (`/v1/completions`, through langchain-openai), read
from the spec at each call (a seed copy of a client shares everything else), with the fields
only some servers read (vLLM's sequence continuation)."""

from __future__ import annotations

from typing import Any

from branchpoint.models.logprobs import request_fields
from branchpoint.models.reasoning import merge_body, reasoning_fields
from branchpoint.models.spec import ModelSpec


def chat_body(spec: ModelSpec, max_tokens: int) -> dict[str, Any]:
    """A chat request's `extra_body`: the token limit, the reasoning-effort fields, the spec's own."""
    # langchain-openai sends `max_completion_tokens`, which llama.cpp's server ignores:
    # also send `max_tokens` so every server honours the limit. The spec's extra_body wins
    # over the reasoning-effort fields (merged one level deep, e.g. chat_template_kwargs).
    body = merge_body({"max_tokens": max_tokens}, reasoning_fields(spec))
    return merge_body(body, spec.extra_body)


def completion_kwargs(spec: ModelSpec, max_tokens: int | None, grammar_fields: dict[str, Any]) -> dict[str, Any]:
    """langchain-openai's `generate` keywords for one completion: the token limit, the grammar in
    the field the server reads (`grammar_fields`: `server_kind.structured_output_fields`, empty
    without a grammar), the seed, the spec's extra body and the logprobs request."""
    extra: dict[str, Any] = dict(grammar_fields)
    if spec.seed is not None:
        extra["seed"] = spec.seed
    kwargs = {"max_tokens": max_tokens or spec.max_tokens, "extra_body": {**spec.extra_body, **extra}}
    # `logprobs` is a field of langchain-openai's completion model: a keyword, not extra_body
    return {**kwargs, **request_fields(spec.logprobs, chat=False)}


def continues_assistant(messages: list[dict[str, Any]]) -> bool:
    """Whether the last message is the assistant's, to be continued (the `searchr1` sequence)."""
    return bool(messages) and messages[-1].get("role") == "assistant"


def needs_server_kind(messages: list[dict[str, Any]], stop: list[str] | None) -> bool:
    """Whether a chat request has fields only some servers read (see `sequence_fields`)."""
    return bool(stop) or continues_assistant(messages)


def sequence_fields(server_kind: str | None, messages: list[dict[str, Any]], stop: list[str] | None) -> dict[str, Any]:
    """vLLM's fields for a reply that continues one sequence (the tagged policy's): the stop
    string kept in the output (`include_stop_str_in_output`), and a final assistant message
    continued rather than closed (`continue_final_message`, with `add_generation_prompt`
    off, which vLLM requires with it). llama.cpp continues a final assistant message by
    itself (its assistant prefill) and, like OpenAI, leaves the stop string out: the policy
    puts it back. Empty for every other request, so their bodies do not change. `server_kind`
    is needed only where `needs_server_kind`."""
    if not needs_server_kind(messages, stop) or server_kind != "vllm":
        return {}
    fields: dict[str, Any] = {"include_stop_str_in_output": True} if stop else {}
    if continues_assistant(messages):
        fields.update(continue_final_message=True, add_generation_prompt=False)
    return fields


def chat_request(
    spec: ModelSpec,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    max_tokens: int | None,
    stop: list[str] | None,
    server_kind: str | None,
) -> dict[str, Any]:
    """The keywords of `chat.completions.create` for one chat call (`server_kind`: needed only
    where `needs_server_kind`)."""
    limit = max_tokens or spec.max_tokens
    request: dict[str, Any] = {
        "model": spec.name,
        "messages": messages,
        "temperature": spec.temperature,
        "max_completion_tokens": limit,
    }
    if spec.seed is not None:
        request["seed"] = spec.seed
    if spec.top_p is not None:
        request["top_p"] = spec.top_p
    if tools:
        request["tools"] = tools
    if stop:
        request["stop"] = stop
    request.update(request_fields(spec.logprobs, chat=True))
    request["extra_body"] = merge_body(sequence_fields(server_kind, messages, stop), chat_body(spec, limit))
    return request
