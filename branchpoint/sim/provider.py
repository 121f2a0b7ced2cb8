"""Provider `sim` of `branchpoint.registry`: the simulated model server, started for a run and
stopped after it. Registered here rather than in `models.factory` so that `models` does not
import the simulator (which sits above `experiments`); the registry imports this module when
kind `provider` is first looked up.

Its `check_questions` hook is what a run calls before it writes anything (see
`experiments.runner.check_models`): a question outside the simulator's question set is refused
by id (`question_set.refuse_unknown_questions`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from branchpoint.models.call import ModelClient
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.spec import ModelSpec
from branchpoint.registry import REGISTRY
from branchpoint.sim import SimServer
from branchpoint.sim.question_set import refuse_unknown_questions


@REGISTRY.register("provider", "sim", check_questions=refuse_unknown_questions)
@contextmanager
def sim_provider(spec: ModelSpec, log_dir: Path | None = None) -> Iterator[ModelClient]:
    """The simulated model server (started here, stopped on exit)."""
    log = log_dir / "sim-server.log" if log_dir else None
    with SimServer(spec.sim, served_name=spec.name, log_path=log) as server:
        yield OpenAICompatibleClient(spec, base_url=server.base_url)
