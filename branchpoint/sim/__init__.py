"""The simulated model with known truth: a real OpenAI-compatible server speaking vLLM's wire
format, whose behaviour is a documented, seeded stochastic function of what it is shown.

- `profile`: every behaviour parameter, and the built-in profiles (`instruct`,
  `over_searching`, `search_helps_little`).
- `behaviour`: how it draws its reply from what it reads from a request (`observe`): the
  passages shown (`passages`), the question looked up in its question set (`question_set`);
  token counts from `tokens`.
- `truth`: the exact success probability of every continuation from a saved state.
- `server`: the HTTP server (`branchpoint models serve sim`), assembled from the routes of
  `generation_routes` and `admin_routes` over its `state`; `SimServer` runs it as a child
  process for `model.provider: sim`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from branchpoint.models.server import ManagedServer
from branchpoint.models.spec import SimServerSpec


class SimServer(ManagedServer):
    """The simulated server as a child process: `with SimServer(spec.sim, "name") as s: s.base_url`."""

    label = "simulated model server"
    log_prefix = "branchpoint-sim-"
    stop_grace_s = 5.0

    def __init__(
        self, spec: SimServerSpec, served_name: str, log_path: Path | None = None, truth_spec: str | None = None
    ) -> None:
        super().__init__(spec.host, spec.port, spec.startup_timeout_s, log_path)
        self.spec = spec
        self.served_name = served_name
        self.truth_spec = truth_spec

    def command(self) -> list[str]:
        assert self.port is not None
        s = self.spec
        cmd = [
            sys.executable,
            "-m",
            "branchpoint.sim.server",
            "--host",
            s.host,
            "--port",
            str(self.port),
            "--profile",
            s.profile,
            "--questions",
            s.questions,
            "--seed",
            str(s.seed),
            "--latency-scale",
            str(s.latency_scale),
            "--served-model-name",
            self.served_name,
        ]
        if s.capacity:
            cmd.append("--capacity")
        cmd += ["--reasoning-parser", s.reasoning_parser or "none", "--tool-call-parser", s.tool_call_parser or "none"]
        cmd.append("--enable-auto-tool-choice" if s.enable_auto_tool_choice else "--no-enable-auto-tool-choice")
        if self.truth_spec:
            cmd += ["--spec", self.truth_spec]
        return cmd


__all__ = ["SimServer"]
