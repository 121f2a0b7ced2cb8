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

The route handlers are in `generation_routes` (chat, completions, tokenize) and `admin_routes`
(models, health, version, the simulator's stats and truth), the state they share in `state`
(`SimState`), the reply shapes themselves (messages, usage, errors, stop strings, stream pieces)
in `wire_format` and `streaming`; this module assembles the app and holds its command line.

Run it with `branchpoint models serve sim` or `python -m branchpoint.sim.server`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.routing import Route

from branchpoint.errors import InputError
from branchpoint.sim import admin_routes, generation_routes
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.state import SimState
from branchpoint.sim.vllm_rules import ServerFlags

__all__ = ["SimState", "build_state", "create_app", "main"]


def create_app(state: SimState) -> Starlette:
    """The ASGI app of the simulated server: the routes of `generation_routes` and
    `admin_routes`, which find `state` as `app.state.sim`."""
    app = Starlette(
        routes=[
            Route("/v1/models", admin_routes.models, methods=["GET"]),
            Route("/health", admin_routes.health, methods=["GET"]),
            Route("/version", admin_routes.version, methods=["GET"]),
            Route("/v1/chat/completions", generation_routes.chat_completions, methods=["POST"]),
            Route("/v1/completions", generation_routes.completions, methods=["POST"]),
            Route("/tokenize", generation_routes.tokenize, methods=["POST"]),
            Route("/v1/sim/stats", admin_routes.stats, methods=["GET"]),
            Route("/v1/sim/truth", admin_routes.truth, methods=["POST"]),
        ]
    )
    app.state.sim = state
    return app


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
