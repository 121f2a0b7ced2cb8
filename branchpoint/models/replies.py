"""Replies checked against the OpenAI schema before anything reads or scores them, and the texts
that came from a model made safe to store.

A server (or a gateway in front of it) may answer HTTP 200 with a body that is no completion at
all: `{"error": ...}`, no `choices`, a `message` of null, tool-call arguments that are not a
string. Read as they are, such replies crashed the completion style (a TypeError in LangChain)
and were recorded by the chat style as `malformed` actions, scored INCORRECT. Every reply is
validated here, against pydantic models of the fields we read (as the `openai` package's types
`Completion` and `ChatCompletion` declare them); an invalid one raises `MalformedReply`, a
transport fault: retried (tenacity, bounded by `model.retries`), then the execution is
`incomplete` (never scored), exactly like an HTTP 500.

`redacted_call` passes a reply's texts through `branchpoint.redact` (a server may echo the
request's key in a 200 body): what is stored in traces, checkpoints, caches and judged files,
and printed, never holds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from branchpoint.models.call import ModelCall
from branchpoint.redact import redact
from branchpoint.traces import describe_validation_error


class MalformedReply(ValueError):
    """A 200 reply that does not follow the OpenAI schema (a transport fault: retried, then incomplete)."""


class _Fields(BaseModel):
    model_config = ConfigDict(extra="allow")


class _TokenDetails(_Fields):
    reasoning_tokens: int | None = None


class ReplyUsage(_Fields):
    """`usage`: token counts as the server reports them (null counts read as 0)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    completion_tokens_details: _TokenDetails | None = None


class CompletionChoice(_Fields):
    """One choice of `/v1/completions` (openai's `CompletionChoice`: `text`, `finish_reason`)."""

    text: str
    finish_reason: str | None = None


class CompletionReply(_Fields):
    """A `/v1/completions` reply: at least one choice (openai's `Completion`)."""

    choices: list[CompletionChoice] = Field(min_length=1)
    usage: ReplyUsage | None = None


class ToolFunction(_Fields):
    name: str
    arguments: str


class ToolCall(_Fields):
    """A tool call of a chat message: its function's name and JSON-text arguments."""

    id: str | None = None
    function: ToolFunction


class ChatMessage(_Fields):
    """The assistant message of a chat choice; vLLM's `reasoning` / `reasoning_content` are extras."""

    content: str | None = None
    tool_calls: list[ToolCall] | None = None


class ChatChoice(_Fields):
    message: ChatMessage
    finish_reason: str | None = None


class ChatReply(_Fields):
    """A `/v1/chat/completions` reply: at least one choice with a message (openai's `ChatCompletion`)."""

    choices: list[ChatChoice] = Field(min_length=1)
    usage: ReplyUsage | None = None


def _as_dict(reply: Any) -> Any:
    return reply.model_dump() if hasattr(reply, "model_dump") else reply


def _checked(schema: type[BaseModel], reply: Any, what: str) -> dict[str, Any]:
    raw = _as_dict(reply)
    if not isinstance(raw, dict):
        raise MalformedReply(f"a {what} reply that is not a JSON object ({type(raw).__name__})")
    try:
        schema.model_validate(raw)
    except ValidationError as exc:
        said = raw.get("error")
        quoted = f"; the reply says: {str(said)[:300]}" if said else ""
        raise MalformedReply(
            f"a {what} reply that does not follow the OpenAI schema ({describe_validation_error(exc)}){quoted}"
        ) from None
    return raw


def check_completion(reply: Any) -> dict[str, Any]:
    """The reply of `/v1/completions` as a dict, once it is valid (MalformedReply if not)."""
    return _checked(CompletionReply, reply, "completion")


def check_chat(reply: Any) -> dict[str, Any]:
    """The reply of `/v1/chat/completions` as a dict, once it is valid (MalformedReply if not)."""
    return _checked(ChatReply, reply, "chat")


class CheckedCompletions:
    """openai's `completions` resource with every reply checked (`check_completion`) before
    LangChain's completion model reads it (LangChain reads `choices` unchecked)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create(self, **kwargs: Any) -> dict[str, Any]:
        return check_completion(self._inner.create(**kwargs))


class AsyncCheckedCompletions:
    """`CheckedCompletions` for openai's async `completions` resource."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def create(self, **kwargs: Any) -> dict[str, Any]:
        return check_completion(await self._inner.create(**kwargs))


def check_chat_message(message: Any) -> Any:
    """A LangChain chat model's reply, once it is an `AIMessage` with text content and tool calls
    that name a function with object arguments (MalformedReply if not)."""
    from langchain_core.messages import AIMessage

    if not isinstance(message, AIMessage):
        raise MalformedReply(f"the chat model returned {type(message).__name__}, not an AIMessage")
    if not isinstance(message.content, str | list):
        raise MalformedReply(f"the chat model's message content is {type(message.content).__name__}")
    for call in message.tool_calls:
        if not call.get("name") or not isinstance(call.get("args"), dict):
            raise MalformedReply(f"the chat model's tool call {call!r:.120} has no name or no object arguments")
    return message


def _redact_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: _redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v, secrets) for v in value]
    return value


def redacted_call(call: ModelCall, secrets: Sequence[str | None] = ()) -> ModelCall:
    """`call` with its text, reasoning and tool-call arguments redacted (`branchpoint.redact`):
    the client's own key (`secrets`), secret environment values, bearer tokens, key fields."""
    keys = [s for s in secrets if s]
    return dataclasses.replace(
        call,
        text=redact(call.text, keys),
        reasoning=None if call.reasoning is None else redact(call.reasoning, keys),
        tool_calls=_redact_value(call.tool_calls, keys),
    )
