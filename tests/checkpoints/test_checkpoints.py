"""Checkpointing with SQLite: legal boundaries are recorded and replay reproduces a branch."""

from __future__ import annotations

import sqlite3

from branchpoint.agents import AgentContext, build_graph, initial_state, recursion_limit, resolve_policy
from branchpoint.checkpoints import list_boundaries, sqlite_checkpointer
from branchpoint.models import ScriptedModel
from branchpoint.tools import SearchTool
from tests.graphs import invoke

SCRIPT = [
    'search", "text": "capital of Australia"}',
    'search", "text": "Canberra"}',
    'answer", "text": "Canberra"}',
]


def run(saver, source, thread="t1"):
    ctx = AgentContext(model=ScriptedModel(SCRIPT), search=SearchTool({"mem": source}, "mem"), search_cap=5)
    graph = build_graph(resolve_policy("constrained"), saver)
    cfg = {"configurable": {"thread_id": thread}, "recursion_limit": recursion_limit(5)}
    out = invoke(
        graph, initial_state("q", "What is the capital of Australia?", "mem"), cfg, context=ctx, durability="sync"
    )
    return graph, out


def test_boundaries_are_listed_in_order(tmp_path, keyword_source):
    with sqlite_checkpointer(tmp_path / "c.sqlite") as saver:
        _, out = run(saver, keyword_source)
        bounds = list_boundaries(saver, "t1")
    assert out["final_answer"] == "Canberra"
    assert [b.boundary for b in bounds] == [
        "initial",
        "pending_query",
        "after_search_1",
        "pending_query",
        "after_search_2",
    ]
    assert [b.kind for b in bounds] == [
        "initial",
        "pending_query",
        "after_search_k",
        "pending_query",
        "after_search_k",
    ]
    assert bounds[1].pending_query == "capital of Australia" and bounds[1].searches == 0
    assert bounds[2].searches == 1 and bounds[2].pending_query is None
    assert bounds[0].input_tokens == 0 and bounds[-1].input_tokens > 0
    assert len({b.checkpoint_id for b in bounds}) == 5


def test_database_is_wal_and_threads_are_separate(tmp_path, keyword_source):
    db = tmp_path / "c.sqlite"
    with sqlite_checkpointer(db) as saver:
        run(saver, keyword_source, "a")
        run(saver, keyword_source, "b")
        assert len(list_boundaries(saver, "a")) == len(list_boundaries(saver, "b")) == 5
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_resume_from_a_boundary_reproduces_the_continuation(tmp_path, keyword_source):
    """Replay from `after_search_1` with a deterministic model gives the recorded continuation."""
    with sqlite_checkpointer(tmp_path / "c.sqlite") as saver:
        graph, out = run(saver, keyword_source)
        after1 = next(b for b in list_boundaries(saver, "t1") if b.boundary == "after_search_1")
        ctx = AgentContext(
            model=ScriptedModel(SCRIPT[1:]), search=SearchTool({"mem": keyword_source}, "mem"), search_cap=5
        )
        cfg = {"configurable": {"thread_id": "t1", "checkpoint_id": after1.checkpoint_id}, "recursion_limit": 20}
        replay = invoke(graph, None, cfg, context=ctx, durability="sync")
    assert replay["final_answer"] == out["final_answer"]
    assert [s["kind"] for s in replay["steps"]] == [s["kind"] for s in out["steps"]]
    assert replay["searches"] == out["searches"] == 2
