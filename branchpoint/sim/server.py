"""The simulated model's HTTP server: vLLM's OpenAI-compatible wire format, on 127.0.0.1.

Routes: `GET /v1/models`, `GET /health`, `GET /version` (vLLM's: so clients detect a vLLM
server and send what vLLM reads), `POST /v1/chat/completions`, `POST /v1/completions` (both with
`stream` and `stream_options.include_usage`), `POST /tokenize` (vLLM), and the simulator's own
`GET /v1/sim/stats` (requests served, sampling settings seen, fields vLLM would ignore, unknown
questions) and `POST /v1/sim/truth` (exact values of continuations, when the server was given a
retrieval spec; see `truth_endpoint`). Replies follow vLLM's shapes field for field
(`message.reasoning`, `tool_calls` with `chatcmpl-tool-` ids,
`usage.completion_tokens_details.reasoning_tokens`, `stop_reason`, `kv_transfer_params`, ...),
and every reply says `system_fingerprint: "branchpoint-sim"` so a trace can tell it came from
the simulator. What vLLM 0.33 refuses, ignores and cuts (thinking-token budgets, tool choice
without `--enable-auto-tool-choice`, `guided_*` and `grammar` fields, stop strings) the server
does too, under the same `vllm serve` flags (`vllm_rules`).

A question outside the server's question set is refused (HTTP 400 naming it) rather than
answered: the simulator has no behaviour for it, and answering "I don't know." would let a run
report `ok` on a question whose truth does not exist.

Latency: each request waits base + prefill × prompt tokens + decode × completion tokens
(× `latency_scale`, 0 = no wait). In capacity mode the decode shares a tokens/s ceiling among
the requests in flight (continuous batching, at most `max_batch` decoding at once): see
`branchpoint.sim.capacity.Scheduler`.

The reply shapes themselves (messages, usage, errors, stop strings, stream pieces) are built in
`wire_format`; this module holds the routes, the server's state and its command line.

Run it with `branchpoint models serve sim` or `python -m branchpoint.sim.server`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from branchpoint.errors import InputError
from branchpoint.sim import logprobs as sim_logprobs
from branchpoint.sim import vllm_rules
from branchpoint.sim.behaviour import completion_text, generate, request_rng, sampling
from branchpoint.sim.capacity import Scheduler
from branchpoint.sim.observe import Observation, observe_chat, observe_completion
from branchpoint.sim.profile import Profile
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.streaming import chat_stream, completion_stream
from branchpoint.sim.tokens import count_tokens, token_ids
from branchpoint.sim.vllm_rules import ServerFlags, error
from branchpoint.sim.wire_format import (
    FINGERPRINT,
    MAX_MODEL_LEN,
    chat_message,
    chat_prompt_tokens,
    finish_chat,
    max_new_tokens,
    run_on_text,
    usage_field,
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
    flags: ServerFlags = field(default_factory=ServerFlags)
    questions_path: str = "demo"
    truth: Any = None  # callable(body) -> dict, see truth_endpoint
    rng: np.random.Generator = field(init=False)
    counts: Counter[str] = field(default_factory=Counter)
    sampling_seen: Counter[str] = field(default_factory=Counter)
    unknown_questions: Counter[str] = field(default_factory=Counter)
    ignored_fields: Counter[str] = field(default_factory=Counter)
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
            for name in vllm_rules.ignored_fields(body):
                self.ignored_fields[name] += 1

    def unknown(self, obs: Observation) -> Response | None:
        """The refusal of a request whose question the simulator does not know (None: known)."""
        if obs.question is not None:
            return None
        shown = obs.question_text if len(obs.question_text) <= 200 else obs.question_text[:200] + "..."
        return error(
            400,
            f"the simulated model does not know the question {shown!r}: it is not in its question set "
            f"{self.questions_path!r} ({len(self.bank)} questions), so it has no behaviour and no truth for it. "
            "Start it with the run's question set (model.sim.questions, or --questions)",
            param="messages" if obs.protocol != "completion" else "prompt",
        )

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


def _logprobs_refusal(body: Mapping[str, Any], *, chat: bool) -> Response | None:
    """vLLM's 400 for log probabilities asked for wrongly (`sim.logprobs.refusal_message`)."""
    found = sim_logprobs.refusal_message(body, chat=chat)
    return None if found is None else error(400, found[0], param=found[1])


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

    async def version(_: Request) -> Response:
        # vLLM: {"version": VLLM_VERSION} (entrypoints/serve/instrumentator/basic.py:53-56)
        return JSONResponse({"version": vllm_rules.VERSION})

    async def read_body(request: Request) -> dict[str, Any] | JSONResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return error(400, "request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != state.served_name:
            return error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        if int(body.get("n") or 1) != 1:
            return error(400, "the simulated server supports n = 1 only", param="n")
        return body

    async def chat(request: Request) -> Response:
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return error(400, "messages: expected a non-empty list", param="messages")
        refused = vllm_rules.refusal(body, state.flags, chat=True) or _logprobs_refusal(body, chat=True)
        if refused is not None:
            return refused
        obs = observe_chat(state.profile, state.bank, body)
        state.note(obs, body)
        if (unknown := state.unknown(obs)) is not None:
            return unknown
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
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                chat_stream(
                    rid,
                    created,
                    state.served_name,
                    out.message,
                    out.finish,
                    out.stop_reason,
                    usage if include else None,
                ),
                media_type="text/event-stream",
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
                        "message": out.message,
                        "logprobs": None
                        if (n := sim_logprobs.requested(body, chat=True)) is None
                        else sim_logprobs.chat_logprobs(state.profile, obs, out.message, n),
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
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body.get("prompt"), (str, list)):
            return error(400, "prompt: expected a string", param="prompt")
        refused = vllm_rules.refusal(body, state.flags, chat=False) or _logprobs_refusal(body, chat=False)
        if refused is not None:
            return refused
        obs = observe_completion(state.profile, state.bank, body)
        state.note(obs, body)
        if (unknown := state.unknown(obs)) is not None:
            return unknown
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
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None
            if (n := sim_logprobs.requested(body, chat=False)) is None
            else sim_logprobs.completion_logprobs(state.profile, obs, text, n, len(prompt)),
            "finish_reason": finish,
            "stop_reason": stop_reason,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
        }
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                completion_stream(rid, created, state.served_name, choice, usage if include else None),
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
        body = await read_body(request)
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

    async def stats(_: Request) -> Response:
        with state.lock:
            return JSONResponse(
                {
                    "profile": state.profile.name,
                    "questions": len(state.bank),
                    "questions_path": state.questions_path,
                    "seed": state.seed,
                    "requests": dict(state.counts),
                    "sampling": {k: v for k, v in state.sampling_seen.items()},
                    "unknown_questions": dict(state.unknown_questions.most_common(20)),
                    "ignored_fields": dict(state.ignored_fields),
                    "flags": state.flags.args(),
                }
            )

    async def truth(request: Request) -> Response:
        if state.truth is None:
            return error(
                501,
                "this server has no retrieval to compute truth with: start it with --spec SPEC.yaml",
                "NotImplemented",
            )
        try:
            body = await request.json()
            return JSONResponse(state.truth(body))
        except (KeyError, ValueError, TypeError) as exc:
            return error(400, f"truth: {exc}")

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/version", version, methods=["GET"]),
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
    flags: ServerFlags | None = None,
) -> SimState:
    """The server's state from command-line settings (profile name or file, question set path,
    the `vllm serve` flags it honours)."""
    from branchpoint.datasets import load_questions
    from branchpoint.sim.profile import load_profile

    prof = load_profile(profile)
    bank = QuestionBank(load_questions(questions))
    state = SimState(
        prof,
        bank,
        served_name or prof.served_name,
        seed=seed,
        latency_scale=latency_scale,
        capacity=capacity,
        flags=flags or ServerFlags(),
        questions_path=questions,
    )
    if spec:
        from branchpoint.sim.endpoint import truth_endpoint

        state.truth = truth_endpoint(prof, bank, spec)
    return state


def main(argv: list[str] | None = None) -> None:
    """`python -m branchpoint.sim.server --port P --profile NAME|FILE --questions PATH`."""
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
    ap.add_argument("--reasoning-parser", default="qwen3", help="as vLLM's; 'none': no reasoning parser")
    ap.add_argument("--tool-call-parser", default="hermes", help="as vLLM's; 'none': no tool parser")
    ap.add_argument("--enable-auto-tool-choice", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args(argv)
    named: Callable[[str], str | None] = lambda v: None if v in ("", "none") else v
    try:
        flags = ServerFlags(named(args.reasoning_parser), args.enable_auto_tool_choice, named(args.tool_call_parser))
    except InputError as exc:
        ap.error(str(exc))
    state = build_state(
        args.profile,
        args.questions,
        seed=args.seed,
        latency_scale=args.latency_scale,
        capacity=args.capacity,
        served_name=args.served_model_name,
        spec=args.spec,
        flags=flags,
    )
    print(
        f"simulated model {state.served_name} (profile {state.profile.name}, {len(state.bank)} questions) "
        f"on http://{args.host}:{args.port}/v1",
        flush=True,
    )
    uvicorn.run(create_app(state), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
