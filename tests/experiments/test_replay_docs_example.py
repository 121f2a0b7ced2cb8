"""The in-place replay example of docs/forking.md ("Replay"), copied from the page, runs on a
real run folder: LangGraph's replay needs `ainvoke` on the async agent graph, and after it the
saved-state listing and the fork plan are unchanged."""

from __future__ import annotations

import re
from pathlib import Path

from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.experiments import RunStore
from branchpoint.experiments.states import saved_states
from tests.conftest import REPO
from tests.experiments.test_replay import make_run

PAGE = REPO / "docs" / "forking.md"


def replay_example() -> str:
    section = PAGE.read_text(encoding="utf-8").split("## Replay", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/forking.md: no python block under 'Replay'"
    return match.group(1)


def thread_size(run_dir: Path, thread_id: str) -> int:
    with sqlite_checkpointer(run_dir / "checkpoints.sqlite") as saver:
        return len(list(saver.list({"configurable": {"thread_id": thread_id}})))


def test_the_replay_example_runs_on_the_async_graph(tmp_path, isolated_cache):
    run_dir = make_run(tmp_path)
    parent = RunStore(run_dir).records()[0]
    listing = [s.model_dump() for s in saved_states(run_dir)]
    state = next(s for s in saved_states(run_dir, parent.execution_id) if s.boundary.boundary == "after_search_1")
    before = thread_size(run_dir, parent.execution_id)
    namespace: dict = {}
    exec(compile(replay_example(), str(PAGE), "exec"), namespace)
    values = namespace["replay_in_place"](run_dir, parent.execution_id, state.boundary.checkpoint_id)
    assert values["status"] and thread_size(run_dir, parent.execution_id) > before  # it wrote into the thread
    assert [s.model_dump() for s in saved_states(run_dir)] == listing
