"""What the simulated server holds while it serves (`SimState`): its profile and question set, the
`vllm serve` flags it honours, the generator unseeded requests draw from, the counters
`GET /v1/sim/stats` reports, the truth helper of `POST /v1/sim/truth`, and the capacity
scheduler. `server.create_app` puts one on `app.state.sim`; the route handlers (`routes`,
`admin_routes`) read it back with `sim_state`."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from branchpoint.sim import vllm_rules
from branchpoint.sim.behaviour import sampling
from branchpoint.sim.capacity import Scheduler
from branchpoint.sim.observe import Observation
from branchpoint.sim.profile import Profile
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.vllm_rules import ServerFlags, error


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
        """Count one request: its protocol, sampling settings, unknown question, ignored fields."""
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
        """Sleep as long as the request would take: base + prefill + decode (shared in capacity mode)."""
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


def sim_state(request: Request) -> SimState:
    """The state of the app serving `request` (put on `app.state.sim` by `server.create_app`)."""
    state: SimState = request.app.state.sim
    return state
