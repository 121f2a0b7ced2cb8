"""vLLM's OpenAI-compatible wire format, as the simulated server writes it.

The shapes of one reply, field for field as vLLM writes them: error bodies, `usage` (with
`completion_tokens_details.reasoning_tokens`), a chat reply's message (`message.reasoning`,
`tool_calls` with `chatcmpl-tool-` ids, content under structured output) and its finish reason,
prompt token counts, and `stop` strings cut out of completions (a streamed reply's pieces are
`streaming`'s). They sit apart from the routes (`server`) so that the server holds only the app, its
state and its command line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from branchpoint.sim import vllm_rules
from branchpoint.sim.behaviour import Reply, wrong_answers
from branchpoint.sim.profile import Profile
from branchpoint.sim.tokens import count_tokens, reasoning_text

if TYPE_CHECKING:
    from branchpoint.sim.observe import Observation

MAX_MODEL_LEN = 32768
FINGERPRINT = "branchpoint-sim"


def max_new_tokens(body: Mapping[str, Any], default: int) -> int:
    """The most tokens a request lets the reply generate: `max_completion_tokens`, else
    `max_tokens`, else `default` (what is left of the context, or vLLM's 16 for a completion)."""
    for key in ("max_completion_tokens", "max_tokens"):
        if body.get(key) is not None:
            return int(body[key])
    return default


def chat_prompt_tokens(body: Mapping[str, Any]) -> int:
    """The prompt tokens of a chat request (`usage.prompt_tokens`): each message's content and tool
    calls, 4 tokens of chat template per message, the tools offered, and 2 to open the reply."""
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


def usage_field(prompt: int, completion: int, reasoning: int | None) -> dict[str, Any]:
    """A reply's `usage`, as vLLM writes it; `completion_tokens_details.reasoning_tokens` only where
    `reasoning` is counted (a server with a reasoning parser)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def minimal_instance(schema: Mapping[str, Any]) -> Any:
    """The smallest value that a (simple) JSON schema accepts: what structured output returns
    for a schema the simulator has no behaviour for."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: minimal_instance(v) for k, v in props.items()}
    defaults: dict[str, Any] = {"string": "", "number": 0.5, "integer": 0, "boolean": False, "array": [], "null": None}
    return defaults.get(kind) if isinstance(kind, str) else None


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
        content = f"{reply.text}</answer>" if obs.continues_answer else f"<answer>{reply.text}</answer>"
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


def run_on_text(profile: Profile, obs: Observation, reply: Reply) -> str:
    """What a profile that does not stop at `</search>` writes after a tagged search: an invented
    result block and an answer (empty for the profiles that stop there)."""
    if profile.tagged.stops_after_search or reply.kind != "search" or obs.protocol != "tagged" or obs.structured:
        return ""
    invented = reasoning_text(profile.tagged.invented_tokens)
    answer = (wrong_answers(obs.question) or ["I don't know."])[0]
    return f"\n\n<information>Doc 1(Title: {reply.text}) {invented}</information>\n\n<answer>{answer}</answer>"


def clip_tokens(text: str, n: int) -> str:
    """The longest prefix of `text` of at most `n` tokens (the simulator's tokenizer)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= n:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


@dataclass
class ChatReply:
    """A chat reply once vLLM's output rules are applied: message, finish and stop reason, tokens."""

    message: dict[str, Any]
    finish: str
    stop_reason: str | None
    reasoning_tokens: int
    content_tokens: int


def finish_chat(
    message: dict[str, Any],
    finish: str,
    content_tokens: int,
    reply: Reply,
    body: Mapping[str, Any],
    *,
    run_on: str,
    reasoning_parser: bool,
    limit: int,
) -> ChatReply:
    """Apply what vLLM does to a generated chat reply (`vllm_rules`): the request's stop strings
    (on the content; a tool-call reply is left as parsed), a run-on turn cut at `max_tokens`
    (`finish_reason: length`), and, on a server without a reasoning parser, the reasoning kept in
    the content (`<think>...</think>`) with no `reasoning` field."""
    stop_reason = None
    if not message["tool_calls"] and finish != "length":
        text = (message["content"] or "") + run_on
        text, stop_reason = vllm_rules.apply_stop(
            text, vllm_rules.stop_strings(body), bool(body.get("include_stop_str_in_output"))
        )
        room = limit - reply.reasoning_tokens
        if run_on and stop_reason is None and count_tokens(text) > room:
            text, finish = clip_tokens(text, max(room, 0)), "length"
        if text != (message["content"] or ""):
            message = {**message, "content": text}
            content_tokens = count_tokens(text)
    if not reasoning_parser and message["reasoning"]:
        think = f"<think>\n{message['reasoning']}\n</think>\n\n"
        message = {**message, "content": think + (message["content"] or ""), "reasoning": None}
    return ChatReply(message, finish, stop_reason, reply.reasoning_tokens, content_tokens)
