"""Judge replies for the loopback OpenAI-compatible server of the model tests (tests/models/http_fakes.py).

Replies are queued per path (the last one repeats), every request body is recorded, unknown paths
answer 404.
"""

from __future__ import annotations

from typing import Any

from tests.models.http_fakes import fake_server

CHAT = "/v1/chat/completions"


def chat_body(content: str, prompt_tokens: int = 180, completion_tokens: int = 24) -> dict[str, Any]:
    """A chat-completion body shaped like vLLM's (a judge reply)."""
    return {
        "id": "chatcmpl-judge-1",
        "object": "chat.completion",
        "created": 1764480100,
        "model": "judge-m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
        },
        "prompt_logprobs": None,
    }


#: The loopback server of the model tests (queued replies per path, recorded requests).
fake_openai = fake_server
