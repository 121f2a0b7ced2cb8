"""The simulated model's HTTP server: vLLM's OpenAI-compatible wire format, on 127.0.0.1.

Routes: `GET /v1/models`, `GET /health`, `POST /v1/chat/completions`, `POST /v1/completions`
(both with `stream` and `stream_options.include_usage`), `POST /tokenize` (vLLM), and the
simulator's own `GET /v1/sim/stats` (requests served, sampling settings seen) and
`POST /v1/sim/truth` (exact values of continuations, when the server was given a retrieval
spec; see `truth_endpoint`). Replies follow vLLM's shapes field for field (`message.reasoning`,
`tool_calls` with `chatcmpl-tool-` ids, `usage.completion_tokens_details.reasoning_tokens`,
`stop_reason`, `kv_transfer_params`, ...), and every reply says `system_fingerprint:
"branchpoint-sim"` so a trace can tell it came from the simulator.

Latency: each request waits base + prefill × prompt tokens + decode × completion tokens
(× `latency_scale`, 0 = no wait). In capacity mode the decode shares a tokens/s ceiling among
the requests in flight (continuous batching, at most `max_batch` decoding at once): see
`branchpoint.models.sim.capacity.Scheduler`.

The reply shapes themselves (messages, usage, errors, stop strings, stream pieces) are built in
`wire_format`; this module holds the routes, the server's state and its command line.

Run it with `branchpoint models serve sim` or `python -m branchpoint.models.sim.server`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from branchpoint.models.sim.behaviour import (
    QuestionBank,
    completion_text,
    count_tokens,
    generate,
    request_rng,
    sampling,
    token_ids,
)
from branchpoint.models.sim.capacity import Scheduler
from branchpoint.models.sim.observe import Observation, observe_chat, observe_completion
from branchpoint.models.sim.profile import Profile
from branchpoint.models.sim.wire_format import (
    FINGERPRINT,
    MAX_MODEL_LEN,
    _apply_stop,
    _chat_prompt_tokens,
    _error,
    _limit,
    _pieces,
    _usage,
    chat_message,
)


@dataclass
class SimState:
    """Everything the app holds: profile, question set, generator, counters, truth helper."""

    profile: Profile
    bank: QuestionBank
    served_name: str
    seed: int = 0
    latency_scale: float = 1.0
    capacity: bool = False
    truth: Any = None  # callable(body) -> dict, see truth_endpoint
    rng: np.random.Generator = field(init=False)
    counts: Counter[str] = field(default_factory=Counter)
    sampling_seen: Counter[str] = field(default_factory=Counter)
    unknown_questions: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduler: Scheduler | None = None

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        if self.capacity:
            c = self.profile.capacity
            self.scheduler = Scheduler(c.tokens_per_s, c.max_batch, self.profile.latency.decode_s_per_token)

    def note(self, obs: Observation, body: Mapping[str, Any]) -> None:
        t, p = sampling(body)
        with self.lock:
            self.counts[obs.protocol] += 1
            self.sampling_seen[json.dumps({"temperature": t, "top_p": p, "seeded": body.get("seed") is not None})] += 1
            if obs.question is None:
                self.unknown_questions[obs.question_text[:120]] += 1

    async def wait(self, prompt_tokens: int, completion_tokens: int) -> None:
        lat = self.profile.latency
        if self.scheduler is not None:
            await asyncio.sleep(self.latency_scale * (lat.base_s + lat.prefill_s_per_token * prompt_tokens))
            await self.scheduler.decode(completion_tokens)
            return
        delay = self.latency_scale * (
            lat.base_s + lat.prefill_s_per_token * prompt_tokens + lat.decode_s_per_token * completion_tokens
        )
        if delay > 0:
            await asyncio.sleep(delay)


def create_app(state: SimState) -> Starlette:
    """The ASGI app of the simulated server."""

    async def models(_: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": state.served_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "branchpoint-sim",
                        "root": state.served_name,
                        "parent": None,
                        "max_model_len": MAX_MODEL_LEN,
                        "permission": [],
                    }
                ],
            }
        )

    async def health(_: Request) -> Response:
        return Response(status_code=200)

    async def read_body(request: Request) -> dict[str, Any] | JSONResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != state.served_name:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        if int(body.get("n") or 1) != 1:
            return _error(400, "the simulated server supports n = 1 only", param="n")
        return body

    async def chat(request: Request) -> Response:
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "messages: expected a non-empty list", param="messages")
        obs = observe_chat(state.profile, state.bank, body)
        state.note(obs, body)
        rng = request_rng(body, state.rng)
        prompt_tokens = _chat_prompt_tokens(body)
        limit = _limit(body, MAX_MODEL_LEN - prompt_tokens)
        reply = generate(state.profile, obs, body, rng, limit)
        message, finish, content_tokens = chat_message(obs, reply, rng)
        completion = reply.reasoning_tokens + content_tokens
        await state.wait(prompt_tokens, completion)
        usage = _usage(prompt_tokens, completion, reply.reasoning_tokens)
        rid, created = f"chatcmpl-{secrets.token_hex(8)}", int(time.time())
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                _chat_stream(rid, created, message, finish, usage if include else None), media_type="text/event-stream"
            )
        return JSONResponse(
            {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": state.served_name,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish,
                        "stop_reason": None,
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

    async def _chat_stream(
        rid: str, created: int, message: dict[str, Any], finish: str, usage: dict[str, Any] | None
    ) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
            payload = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": state.served_name,
                "system_fingerprint": FINGERPRINT,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": reason,
                        **({"stop_reason": None} if reason else {}),
                    }
                ],
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        for piece in _pieces(message.get("reasoning") or ""):
            yield chunk({"reasoning": piece})
        for piece in _pieces(message.get("content") or ""):
            yield chunk({"content": piece})
        for i, tc in enumerate(message.get("tool_calls") or []):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": tc["id"],
                            "type": "function",
                            "function": {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]},
                        }
                    ]
                }
            )
        yield chunk({}, finish)
        if usage is not None:
            payload = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": state.served_name,
                "choices": [],
                "usage": usage,
            }
            yield f"data: {json.dumps(payload)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    async def completions(request: Request) -> Response:
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body.get("prompt"), (str, list)):
            return _error(400, "prompt: expected a string", param="prompt")
        obs = observe_completion(state.profile, state.bank, body)
        state.note(obs, body)
        rng = request_rng(body, state.rng)
        prompt = body["prompt"] if isinstance(body["prompt"], str) else str(body["prompt"][0])
        prompt_tokens = count_tokens(prompt)
        limit = _limit(body, 16)
        reply = generate(state.profile, obs, body, rng, limit)
        text = completion_text(reply)
        finish, stop_reason = ("length", None) if reply.kind == "length" else ("stop", None)
        text, hit = _apply_stop(text, body.get("stop"))
        if hit is not None:
            stop_reason = hit
        completion = count_tokens(text)
        await state.wait(prompt_tokens, completion)
        usage = _usage(prompt_tokens, completion, None)
        rid, created = f"cmpl-{secrets.token_hex(8)}", int(time.time())
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
        }
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))

            async def stream() -> AsyncIterator[bytes]:
                pieces = _pieces(text) or [""]
                for i, piece in enumerate(pieces):
                    last = i == len(pieces) - 1
                    c = {
                        **choice,
                        "text": piece,
                        "finish_reason": finish if last else None,
                        "stop_reason": stop_reason if last else None,
                    }
                    payload = {
                        "id": rid,
                        "object": "text_completion",
                        "created": created,
                        "model": state.served_name,
                        "choices": [c],
                    }
                    yield f"data: {json.dumps(payload)}\n\n".encode()
                if include:
                    payload = {
                        "id": rid,
                        "object": "text_completion",
                        "created": created,
                        "model": state.served_name,
                        "choices": [],
                        "usage": usage,
                    }
                    yield f"data: {json.dumps(payload)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(stream(), media_type="text/event-stream")
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
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        if isinstance(body.get("prompt"), str):
            text = body["prompt"]
        elif isinstance(body.get("messages"), list):
            text = "\n".join(str(m.get("content") or "") for m in body["messages"])
        else:
            return _error(400, "tokenize: expected prompt (a string) or messages", param="prompt")
        ids = token_ids(text)
        return JSONResponse({"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids, "token_strs": None})

    async def stats(_: Request) -> Response:
        with state.lock:
            return JSONResponse(
                {
                    "profile": state.profile.name,
                    "questions": len(state.bank),
                    "requests": dict(state.counts),
                    "sampling": {k: v for k, v in state.sampling_seen.items()},
                    "unknown_questions": dict(state.unknown_questions.most_common(20)),
                }
            )

    async def truth(request: Request) -> Response:
        if state.truth is None:
            return _error(
                501,
                "this server has no retrieval to compute truth with: start it with --spec SPEC.yaml",
                "NotImplemented",
            )
        try:
            body = await request.json()
            return JSONResponse(state.truth(body))
        except (KeyError, ValueError, TypeError) as exc:
            return _error(400, f"truth: {exc}")

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/v1/sim/stats", stats, methods=["GET"]),
            Route("/v1/sim/truth", truth, methods=["POST"]),
        ]
    )


def build_state(
    profile: str,
    questions: str = "demo",
    *,
    seed: int = 0,
    latency_scale: float = 1.0,
    capacity: bool = False,
    served_name: str | None = None,
    spec: str | None = None,
) -> SimState:
    """The server's state from command-line settings (profile name or file, question set path)."""
    from branchpoint.datasets import load_questions
    from branchpoint.models.sim.profile import load_profile

    prof = load_profile(profile)
    bank = QuestionBank(load_questions(questions))
    state = SimState(
        prof, bank, served_name or prof.served_name, seed=seed, latency_scale=latency_scale, capacity=capacity
    )
    if spec:
        from branchpoint.models.sim.endpoint import truth_endpoint

        state.truth = truth_endpoint(prof, bank, spec)
    return state


def main(argv: list[str] | None = None) -> None:
    """`python -m branchpoint.models.sim.server --port P --profile NAME|FILE --questions PATH`."""
    import uvicorn

    ap = argparse.ArgumentParser(description="branchpoint's simulated model server (vLLM wire format)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--profile", default="instruct")
    ap.add_argument("--questions", default="demo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency-scale", type=float, default=1.0)
    ap.add_argument("--capacity", action="store_true")
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--spec", default=None, help="experiment spec whose retrieval the truth endpoint uses")
    args = ap.parse_args(argv)
    state = build_state(
        args.profile,
        args.questions,
        seed=args.seed,
        latency_scale=args.latency_scale,
        capacity=args.capacity,
        served_name=args.served_model_name,
        spec=args.spec,
    )
    print(
        f"simulated model {state.served_name} (profile {state.profile.name}, {len(state.bank)} questions) "
        f"on http://{args.host}:{args.port}/v1",
        flush=True,
    )
    uvicorn.run(create_app(state), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
