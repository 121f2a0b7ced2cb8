"""Streamed replies of the simulated server (`stream: true`), as vLLM sends them: server-sent
events of `chat.completion.chunk` / `text_completion` pieces, the usage chunk when
`stream_options.include_usage` asks for it, then `data: [DONE]`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from branchpoint.sim.wire_format import FINGERPRINT

#: Characters per streamed piece of reasoning, content or completion text.
PIECE_CHARS = 16


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)]


def _event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def chat_stream(
    rid: str,
    created: int,
    model: str,
    message: dict[str, Any],
    finish: str,
    stop_reason: str | None,
    usage: dict[str, Any] | None,
) -> AsyncIterator[bytes]:
    """A chat reply as chunks: role, reasoning pieces, content pieces, tool calls, the finish."""

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        return _event(
            {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": FINGERPRINT,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": reason,
                        **({"stop_reason": stop_reason} if reason else {}),
                    }
                ],
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(message.get("reasoning") or ""):
        yield chunk({"reasoning": piece})
    for piece in _pieces(message.get("content") or ""):
        yield chunk({"content": piece})
    for i, tc in enumerate(message.get("tool_calls") or []):
        call = {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}
        yield chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function", "function": call}]})
    yield chunk({}, finish)
    if usage is not None:
        yield _event(
            {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    yield b"data: [DONE]\n\n"


async def completion_stream(
    rid: str, created: int, model: str, choice: dict[str, Any], usage: dict[str, Any] | None
) -> AsyncIterator[bytes]:
    """A completion as `text_completion` pieces, the finish on the last one."""
    text = choice["text"]
    pieces = _pieces(text) or [""]
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        c = {
            **choice,
            "text": piece,
            "finish_reason": choice["finish_reason"] if last else None,
            "stop_reason": choice["stop_reason"] if last else None,
        }
        yield _event({"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [c]})
    if usage is not None:
        yield _event(
            {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [], "usage": usage}
        )
    yield b"data: [DONE]\n\n"
