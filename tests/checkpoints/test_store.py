"""The checkpointer factory: SQLite path or PostgreSQL URL, and many concurrent executions."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from branchpoint.agents import AgentContext, build_graph, initial_state, recursion_limit, resolve_policy
from branchpoint.checkpoints import list_boundaries
from branchpoint.checkpoints.postgres import mask_url
from branchpoint.checkpoints.store import open_checkpointer
from branchpoint.errors import BranchpointError, InputError
from branchpoint.models import ScriptedModel
from branchpoint.tools import SearchTool
from tests.checkpoints.test_checkpoints import SCRIPT
from tests.conftest import KeywordSource
from tests.graphs import invoke

BOUNDARIES = ["initial", "pending_query", "after_search_1", "pending_query", "after_search_2"]
EXECUTIONS, WORKERS = 64, 12


def execute(graph, thread_id: str) -> dict:
    """One agent execution on its own thread, with its own scripted model and source."""
    ctx = AgentContext(model=ScriptedModel(SCRIPT), search=SearchTool({"mem": KeywordSource()}, "mem"), search_cap=5)
    cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit(5)}
    return invoke(
        graph, initial_state(thread_id, "What is the capital of Australia?", "mem"), cfg, context=ctx, durability="sync"
    )


def checkpoints_of(saver, thread_id: str) -> int:
    return sum(1 for _ in saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}))


def run_concurrently(saver, prefix: str) -> None:
    """64 executions from a thread pool into ONE saver; every thread complete and separate."""
    graph = build_graph(resolve_policy("constrained"), saver)
    threads = [f"{prefix}-{i:02d}" for i in range(EXECUTIONS)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outs = list(pool.map(lambda t: execute(graph, t), threads))
    wall = time.perf_counter() - start
    print(f"\n{EXECUTIONS} concurrent executions ({WORKERS} workers) into {type(saver).__name__}: {wall:.2f}s")
    assert [o["final_answer"] for o in outs] == ["Canberra"] * EXECUTIONS
    # One sequential execution tells how many checkpoints a thread must have.
    execute(graph, f"{prefix}-reference")
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
    with open_checkpointer(tmp_path / "c.sqlite") as saver:
        run_concurrently(saver, "sq")


def test_postgres_round_trip(postgres_url):
    prefix = f"rt-{uuid.uuid4().hex[:12]}"
    with open_checkpointer(postgres_url, pool_size=2) as saver:
        graph = build_graph(resolve_policy("constrained"), saver)
        out = execute(graph, prefix)
        bounds = list_boundaries(saver, prefix)
    assert out["final_answer"] == "Canberra"
    assert [b.boundary for b in bounds] == BOUNDARIES
    # A second saver (a later process) reads the same history back and can resume from it.
    with open_checkpointer(postgres_url, pool_size=2) as saver:
        again = list_boundaries(saver, prefix)
        assert [b.checkpoint_id for b in again] == [b.checkpoint_id for b in bounds]
        after1 = next(b for b in again if b.boundary == "after_search_1")
        graph = build_graph(resolve_policy("constrained"), saver)
        ctx = AgentContext(
            model=ScriptedModel(SCRIPT[1:]), search=SearchTool({"mem": KeywordSource()}, "mem"), search_cap=5
        )
        cfg = {"configurable": {"thread_id": prefix, "checkpoint_id": after1.checkpoint_id}, "recursion_limit": 20}
        replay = invoke(graph, None, cfg, context=ctx, durability="sync")
    assert replay["final_answer"] == "Canberra" and replay["searches"] == 2


def test_postgres_64_concurrent_executions_into_one_saver(postgres_url):
    with open_checkpointer(postgres_url, pool_size=8) as saver:
        run_concurrently(saver, f"cc-{uuid.uuid4().hex[:12]}")
