"""vLLM's OpenAI-compatible wire format, as the simulated server writes it.

The shapes of one reply, field for field as vLLM writes them: error bodies, `usage` (with
`completion_tokens_details.reasoning_tokens`), a chat reply's message (`message.reasoning`,
`tool_calls` with `chatcmpl-tool-` ids, content under structured output) and its finish reason,
prompt token counts, `stop` strings cut out of completions, and the pieces a streamed reply is
sent in. They sit apart from the routes (`server`) so that the server holds only the app, its
state and its command line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from starlette.responses import JSONResponse

from branchpoint.models.sim.behaviour import Reply, count_tokens, minimal_instance
from branchpoint.models.sim.observe import Observation

MAX_MODEL_LEN = 32768
FINGERPRINT = "branchpoint-sim"


def _error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status
    )


def _limit(body: Mapping[str, Any], default: int) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        if body.get(key) is not None:
            return int(body[key])
    return default


def _chat_prompt_tokens(body: Mapping[str, Any]) -> int:
    total = 0
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        total += 4 + count_tokens(content or "")
        for tc in m.get("tool_calls") or []:
            total += count_tokens(json.dumps(tc.get("function") or {}))
    if body.get("tools"):
        total += count_tokens(json.dumps(body["tools"]))
    return total + 2


def _usage(prompt: int, completion: int, reasoning: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def _structured_content(obs: Observation, reply: Reply, rng: np.random.Generator) -> str | None:
    """Content under a chat request's structured output (a decision where the schema asks one)."""
    so = obs.structured or {}
    if so.get("choice"):
        choices = list(so["choice"])
        want = reply.kind if reply.kind in choices else None
        return want or choices[int(rng.integers(len(choices)))]
    if "json" in so:
        schema = so["json"] if isinstance(so["json"], dict) else json.loads(so["json"])
        props = set(schema.get("properties") or {})
        if {"action", "text"} <= props and reply.kind in ("search", "answer"):
            return json.dumps({"action": reply.kind, "text": reply.text})
        return json.dumps(minimal_instance(schema))
    return None


def chat_message(obs: Observation, reply: Reply, rng: np.random.Generator) -> tuple[dict[str, Any], str, int]:
    """(message, finish_reason, content tokens) of a chat reply, vLLM's message fields."""
    content: str | None
    tool_calls: list[dict[str, Any]] = []
    finish = "stop"
    structured = _structured_content(obs, reply, rng) if obs.structured else None
    if reply.kind == "length":
        content, finish = "", "length"
    elif structured is not None:
        content = structured
    elif reply.kind == "search" and obs.protocol == "native":
        content, finish = None, "tool_calls"
        args = json.dumps({"query": reply.text})
        tool_calls = [
            {
                # vLLM's shape, but drawn from the request's generator: the id is resent in the next
                # request's transcript, so a random one would make seeded runs irreproducible
                "id": f"chatcmpl-tool-{int(rng.integers(2**63)):016x}",
                "type": "function",
                "function": {"name": "search", "arguments": args},
            }
        ]
    elif reply.kind == "search":
        content = f"<search>{reply.text}</search>"
    elif reply.kind == "answer" and obs.protocol == "tagged":
        content = f"<answer>{reply.text}</answer>"
    elif reply.kind == "malformed":
        content = "" if obs.protocol in ("native", "plain") else reply.text
    else:
        content = reply.text
    content_tokens = count_tokens(content or "") + sum(count_tokens(t["function"]["arguments"]) + 2 for t in tool_calls)
    message = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": tool_calls,
        "reasoning": reply.reasoning,
    }
    return message, finish, content_tokens


def _apply_stop(text: str, stop: Any) -> tuple[str, str | None]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cut, which = len(text), None
    for s in stops:
        i = text.find(s)
        if 0 <= i < cut:
            cut, which = i, s
    return text[:cut], which


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
