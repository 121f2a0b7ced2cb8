"""The checkpointer factory: SQLite path or PostgreSQL URL, and many concurrent executions."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import contextmanager

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from branchpoint.agents import AgentContext, build_graph, initial_state, recursion_limit, resolve_policy
from branchpoint.checkpoints import list_boundaries
from branchpoint.checkpoints.postgres import mask_url
from branchpoint.checkpoints.store import open_async_checkpointer, open_checkpointer
from branchpoint.errors import BranchpointError, InputError
from branchpoint.experiments.execution import run_bounded
from branchpoint.models import ScriptedModel
from branchpoint.tools import SearchTool
from tests.checkpoints.test_checkpoints import SCRIPT
from tests.conftest import KeywordSource
from tests.graphs import invoke

BOUNDARIES = ["initial", "pending_query", "after_search_1", "pending_query", "after_search_2"]
EXECUTIONS, WORKERS = 64, 12


def context() -> AgentContext:
    """A fresh scripted model and source for one execution."""
    return AgentContext(model=ScriptedModel(SCRIPT), search=SearchTool({"mem": KeywordSource()}, "mem"), search_cap=5)


async def aexecute(graph, thread_id: str) -> dict:
    """One agent execution on its own checkpoint thread, on the running loop."""
    cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit(5)}
    state = initial_state(thread_id, "What is the capital of Australia?", "mem")
    return await graph.ainvoke(state, cfg, context=context(), durability="sync")


def execute(graph, thread_id: str) -> dict:
    """`aexecute` from blocking code (its own loop)."""
    cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit(5)}
    return invoke(
        graph,
        initial_state(thread_id, "What is the capital of Australia?", "mem"),
        cfg,
        context=context(),
        durability="sync",
    )


def checkpoints_of(saver, thread_id: str) -> int:
    return sum(1 for _ in saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}))


def run_concurrently(target, prefix: str, pool_size: int = 8) -> None:
    """64 executions, WORKERS in flight on one event loop, into ONE saver (the runner's way: the
    async saver the target opens); then every thread checked through a blocking saver."""
    threads = [f"{prefix}-{i:02d}" for i in range(EXECUTIONS)]

    async def main() -> list[dict]:
        async with open_async_checkpointer(target, pool_size=pool_size) as saver:
            graph = build_graph(resolve_policy("constrained"), saver)
            outs: list[dict] = []
            await run_bounded(threads, lambda t: aexecute(graph, t), WORKERS, outs.append)
            await aexecute(graph, f"{prefix}-reference")  # tells how many checkpoints a thread has
            return outs

    start = time.perf_counter()
    outs = asyncio.run(main())
    wall = time.perf_counter() - start
    print(f"\n{EXECUTIONS} concurrent executions ({WORKERS} in flight) into {target}: {wall:.2f}s")
    assert [o["final_answer"] for o in outs] == ["Canberra"] * EXECUTIONS
    with open_checkpointer(target) as saver:
        per_thread = checkpoints_of(saver, f"{prefix}-reference")
        assert per_thread > len(BOUNDARIES)
        for t in threads:
            bounds = list_boundaries(saver, t)
            assert [b.boundary for b in bounds] == BOUNDARIES, t
            assert len({b.checkpoint_id for b in bounds}) == len(BOUNDARIES)
        assert sum(checkpoints_of(saver, t) for t in threads) == per_thread * EXECUTIONS


def test_open_checkpointer_takes_a_path_as_sqlite(tmp_path):
    db = tmp_path / "sub" / "c.sqlite"
    with open_checkpointer(db) as saver:
        assert isinstance(saver, SqliteSaver)
    assert db.exists()
    with open_checkpointer(str(tmp_path / "d.sqlite")) as saver:
        assert isinstance(saver, SqliteSaver)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL"])
def test_open_checkpointer_takes_a_url_as_postgres(tmp_path, monkeypatch, scheme):
    seen = []

    @contextmanager
    def fake(url, pool_size=8):
        seen.append((url, pool_size))
        yield "pg-saver"

    monkeypatch.setattr("branchpoint.checkpoints.store.postgres_checkpointer", fake)
    with open_checkpointer(f"{scheme}://u@h:5432/db", pool_size=3) as saver:
        assert saver == "pg-saver"
    assert seen == [(f"{scheme}://u@h:5432/db", 3)]
    assert not list(tmp_path.iterdir())  # nothing written as a file


def test_mask_url_hides_passwords():
    assert mask_url("postgresql://bp:s3cret@db:5432/runs") == "postgresql://bp:***@db:5432/runs"
    assert mask_url("postgresql://bp@db/runs") == "postgresql://bp@db/runs"
    masked = mask_url("postgres://db/runs?user=bp&password=s3cret&sslmode=require")
    assert "s3cret" not in masked and "sslmode=require" in masked


def test_unreachable_server_names_the_masked_url():
    url = "postgresql://x:hunter2@127.0.0.1:1/none"
    with pytest.raises(InputError) as err:
        with open_checkpointer(url):
            pass
    message = str(err.value)
    assert "postgresql://x:***@127.0.0.1:1/none" in message
    assert "hunter2" not in message and "cannot reach" in message
    assert isinstance(err.value, BranchpointError) and "\n" not in message


def test_sqlite_64_concurrent_executions_into_one_saver(tmp_path):
    run_concurrently(str(tmp_path / "c.sqlite"), "sq")


def test_sqlite_saver_from_threads_each_with_its_own_loop(tmp_path):
    """The run's SQLite saver also serves graphs run from several threads at once (each its own
    event loop), e.g. code that calls the graph outside the runner."""
    from concurrent.futures import ThreadPoolExecutor

    with open_checkpointer(tmp_path / "t.sqlite") as saver:
        graph = build_graph(resolve_policy("constrained"), saver)
        with ThreadPoolExecutor(max_workers=8) as pool:
            outs = list(pool.map(lambda t: execute(graph, t), [f"th-{i}" for i in range(16)]))
        assert [o["final_answer"] for o in outs] == ["Canberra"] * 16
        assert [b.boundary for b in list_boundaries(saver, "th-3")] == BOUNDARIES


def test_postgres_round_trip(postgres_url):
    prefix = f"rt-{uuid.uuid4().hex[:12]}"

    async def first() -> dict:
        async with open_async_checkpointer(postgres_url, pool_size=2) as saver:
            return await aexecute(build_graph(resolve_policy("constrained"), saver), prefix)

    out = asyncio.run(first())
    with open_checkpointer(postgres_url, pool_size=2) as saver:
        bounds = list_boundaries(saver, prefix)
    assert out["final_answer"] == "Canberra"
    assert [b.boundary for b in bounds] == BOUNDARIES
    # A second saver (a later process) reads the same history back and can resume from it.
    with open_checkpointer(postgres_url, pool_size=2) as saver:
        again = list_boundaries(saver, prefix)
        assert [b.checkpoint_id for b in again] == [b.checkpoint_id for b in bounds]
        after1 = next(b for b in again if b.boundary == "after_search_1")

    async def resume() -> dict:
        async with open_async_checkpointer(postgres_url, pool_size=2) as saver:
            graph = build_graph(resolve_policy("constrained"), saver)
            ctx = AgentContext(
                model=ScriptedModel(SCRIPT[1:]), search=SearchTool({"mem": KeywordSource()}, "mem"), search_cap=5
            )
            cfg = {"configurable": {"thread_id": prefix, "checkpoint_id": after1.checkpoint_id}, "recursion_limit": 20}
            return await graph.ainvoke(None, cfg, context=ctx, durability="sync")

    replay = asyncio.run(resume())
    assert replay["final_answer"] == "Canberra" and replay["searches"] == 2


def test_postgres_64_concurrent_executions_into_one_saver(postgres_url):
    run_concurrently(postgres_url, f"cc-{uuid.uuid4().hex[:12]}", pool_size=8)
