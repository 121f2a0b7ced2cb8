"""The simulated server's routes that describe it rather than generate: `GET /v1/models`,
`GET /health` and `GET /version` (vLLM's, so clients detect a vLLM server and send what vLLM
reads), and the simulator's own `GET /v1/sim/stats` (requests served, sampling settings seen,
fields vLLM would ignore, unknown questions) and `POST /v1/sim/truth` (exact values of
continuations, when the server was given a retrieval spec; see `endpoint.truth_endpoint`).

Each handler reads the server's `SimState` from the app (`state.sim_state`)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from branchpoint.sim import vllm_rules
from branchpoint.sim.state import sim_state
from branchpoint.sim.vllm_rules import error
from branchpoint.sim.wire_format import MAX_MODEL_LEN


async def models(request: Request) -> Response:
    """`GET /v1/models`: the one model served, in vLLM's `ModelCard` shape."""
    state = sim_state(request)
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
    """`GET /health`: an empty 200, as vLLM's."""
    return Response(status_code=200)


async def version(_: Request) -> Response:
    """`GET /version`: vLLM's `{"version": VLLM_VERSION}` (entrypoints/serve/instrumentator/basic.py:53-56)."""
    return JSONResponse({"version": vllm_rules.VERSION})


async def stats(request: Request) -> Response:
    """`GET /v1/sim/stats`: what the server has served so far (`SimState`'s counters) and how it
    was started (profile, question set, seed, `vllm serve` flags)."""
    state = sim_state(request)
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
    """`POST /v1/sim/truth`: the exact values of a saved state's continuations (501 when the
    server was started without `--spec`, 400 naming what the body lacks)."""
    state = sim_state(request)
    if state.truth is None:
        return error(
            501,
            "this server has no retrieval to compute truth with: start it with --spec SPEC.yaml",
            "NotImplemented",
        )
    try:
        body = await request.json()
        if not isinstance(body, dict):
            return error(400, "truth: the request body must be a JSON object (a saved state's fields)")
        return JSONResponse(state.truth(body))
    except (KeyError, ValueError, TypeError) as exc:
        return error(400, f"truth: {exc}")
