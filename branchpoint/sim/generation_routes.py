"""The simulated server's routes that read a model request: `POST /v1/chat/completions`,
`POST /v1/completions` (both with `stream` and `stream_options.include_usage`) and vLLM's
`POST /tokenize`.

A chat or completion request goes: the body read and checked (`read_body`: a JSON object, this
server's model, n = 1), the field the route needs, vLLM's refusals (`vllm_rules.refusal`, the
log-probability checks), what the simulator reads from it (`observe`), counted on the state, a
question outside the question set refused, the reply drawn (`behaviour.generate`) and shaped
(`wire_format`), the latency waited (`SimState.wait`), then the reply whole or streamed
(`streaming`). Each handler reads the server's `SimState` from the app (`state.sim_state`)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from branchpoint.sim import logprobs as sim_logprobs
from branchpoint.sim import vllm_rules
from branchpoint.sim.behaviour import completion_text, generate, request_rng
from branchpoint.sim.observe import Observation, observe_chat, observe_completion
from branchpoint.sim.state import SimState, sim_state
from branchpoint.sim.streaming import chat_stream, completion_stream
from branchpoint.sim.tokens import count_tokens, token_ids
from branchpoint.sim.vllm_rules import error
from branchpoint.sim.wire_format import (
    FINGERPRINT,
    MAX_MODEL_LEN,
    ChatReply,
    chat_message,
    chat_prompt_tokens,
    finish_chat,
    max_new_tokens,
    run_on_text,
    usage_field,
)


async def read_body(request: Request, state: SimState) -> dict[str, Any] | JSONResponse:
    """The request's JSON object, or the error reply: 400 when it is not JSON or not an object,
    404 when it names a model other than the one served, 400 when n is not a whole number or > 1."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return error(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != state.served_name:
        return error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    n = body.get("n") or 1
    if isinstance(n, bool) or not isinstance(n, int):
        return error(400, f"n: expected a whole number, got {n!r}", param="n")
    if n != 1:
        return error(400, "the simulated server supports n = 1 only", param="n")
    return body


async def _admitted(request: Request, state: SimState, *, chat: bool) -> tuple[dict[str, Any], Observation] | Response:
    """The body of a generation request and what the simulator observes in it, counted in the
    stats; or the error reply, in vLLM's order: the body, its messages / prompt, vLLM's refusals,
    then a question the simulator does not know."""
    body = await read_body(request, state)
    if isinstance(body, Response):
        return body
    if chat and (not isinstance(body.get("messages"), list) or not body["messages"]):
        return error(400, "messages: expected a non-empty list", param="messages")
    if not chat and not isinstance(body.get("prompt"), (str, list)):
        return error(400, "prompt: expected a string", param="prompt")
    refused = vllm_rules.refusal(body, state.flags, chat=chat) or _logprobs_refusal(body, chat=chat)
    if refused is not None:
        return refused
    obs = (observe_chat if chat else observe_completion)(state.profile, state.bank, body)
    state.note(obs, body)
    if (unknown := state.unknown(obs)) is not None:
        return unknown
    return body, obs


def _logprobs_refusal(body: Mapping[str, Any], *, chat: bool) -> Response | None:
    """vLLM's 400 for log probabilities asked for wrongly (`sim.logprobs.refusal_message`)."""
    found = sim_logprobs.refusal_message(body, chat=chat)
    return None if found is None else error(400, found[0], param=found[1])


def _usage_streamed(body: Mapping[str, Any]) -> bool:
    """Whether a streamed reply ends with a usage chunk (`stream_options.include_usage`)."""
    return bool((body.get("stream_options") or {}).get("include_usage"))


async def chat_completions(request: Request) -> Response:
    """`POST /v1/chat/completions`: one chat reply (reasoning, content or tool calls), whole or streamed."""
    state = sim_state(request)
    admitted = await _admitted(request, state, chat=True)
    if isinstance(admitted, Response):
        return admitted
    body, obs = admitted
    rng = request_rng(body, state.rng)
    prompt_tokens = chat_prompt_tokens(body)
    limit = max_new_tokens(body, MAX_MODEL_LEN - prompt_tokens)
    reply = generate(state.profile, obs, body, rng, limit)
    message, finish, content_tokens = chat_message(obs, reply, rng)
    out = finish_chat(
        message,
        finish,
        content_tokens,
        reply,
        body,
        run_on=run_on_text(state.profile, obs, reply),
        reasoning_parser=bool(state.flags.reasoning_parser),
        limit=limit,
    )
    completion = out.reasoning_tokens + out.content_tokens
    await state.wait(prompt_tokens, completion)
    usage = usage_field(prompt_tokens, completion, out.reasoning_tokens if state.flags.reasoning_parser else None)
    rid, created = f"chatcmpl-{secrets.token_hex(8)}", int(time.time())
    if body.get("stream"):
        return StreamingResponse(
            chat_stream(
                rid,
                created,
                state.served_name,
                out.message,
                out.finish,
                out.stop_reason,
                usage if _usage_streamed(body) else None,
            ),
            media_type="text/event-stream",
        )
    return _chat_completion(state, body, obs, out, usage, rid, created)


def _chat_completion(
    state: SimState,
    body: Mapping[str, Any],
    obs: Observation,
    out: ChatReply,
    usage: dict[str, Any],
    rid: str,
    created: int,
) -> JSONResponse:
    """A whole chat reply in vLLM's `chat.completion` shape (log probabilities when asked for)."""
    n = sim_logprobs.requested(body, chat=True)
    return JSONResponse(
        {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": state.served_name,
            "choices": [
                {
                    "index": 0,
                    "message": out.message,
                    "logprobs": None if n is None else sim_logprobs.chat_logprobs(state.profile, obs, out.message, n),
                    "finish_reason": out.finish,
                    "stop_reason": out.stop_reason,
                    "token_ids": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": FINGERPRINT,
            "usage": usage,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "kv_transfer_params": None,
        }
    )


async def completions(request: Request) -> Response:
    """`POST /v1/completions`: the continuation of a few-shot prompt (cut at stop strings), whole
    or streamed, with vLLM's legacy log probabilities when asked for."""
    state = sim_state(request)
    admitted = await _admitted(request, state, chat=False)
    if isinstance(admitted, Response):
        return admitted
    body, obs = admitted
    rng = request_rng(body, state.rng)
    prompt = body["prompt"] if isinstance(body["prompt"], str) else str(body["prompt"][0])
    prompt_tokens = count_tokens(prompt)
    limit = max_new_tokens(body, 16)
    reply = generate(state.profile, obs, body, rng, limit)
    finish = "length" if reply.kind == "length" else "stop"
    text, stop_reason = vllm_rules.apply_stop(
        completion_text(reply), vllm_rules.stop_strings(body), bool(body.get("include_stop_str_in_output"))
    )
    completion = count_tokens(text)
    await state.wait(prompt_tokens, completion)
    usage = usage_field(prompt_tokens, completion, None)
    rid, created = f"cmpl-{secrets.token_hex(8)}", int(time.time())
    n = sim_logprobs.requested(body, chat=False)
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None if n is None else sim_logprobs.completion_logprobs(state.profile, obs, text, n, len(prompt)),
        "finish_reason": finish,
        "stop_reason": stop_reason,
        "token_ids": None,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
    }
    if body.get("stream"):
        return StreamingResponse(
            completion_stream(rid, created, state.served_name, choice, usage if _usage_streamed(body) else None),
            media_type="text/event-stream",
        )
    return JSONResponse(
        {
            "id": rid,
            "object": "text_completion",
            "created": created,
            "model": state.served_name,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": FINGERPRINT,
            "usage": usage,
            "kv_transfer_params": None,
        }
    )


async def tokenize(request: Request) -> Response:
    """`POST /tokenize` (vLLM's): the token ids of `prompt`, or of the messages' contents joined by
    newlines, with their count and the model's context length."""
    body = await read_body(request, sim_state(request))
    if isinstance(body, Response):
        return body
    if isinstance(body.get("prompt"), str):
        text = body["prompt"]
    elif isinstance(body.get("messages"), list):
        text = "\n".join(str(m.get("content") or "") for m in body["messages"])
    else:
        return error(400, "tokenize: expected prompt (a string) or messages", param="prompt")
    ids = token_ids(text)
    return JSONResponse({"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids, "token_strs": None})
