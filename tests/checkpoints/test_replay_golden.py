"""Golden replay tests, pinned to the LangGraph version in pyproject.toml.

Replay = `invoke(None, config_with_checkpoint_id)` on the original thread. With a deterministic
model, replaying from every legal boundary must reproduce the recorded continuation exactly;
the recorded run itself must match the golden file. If LangGraph is upgraded, these tests say
whether its replay semantics still hold (they changed several times across LangGraph releases).
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from branchpoint.agents import AgentContext, build_graph, initial_state, recursion_limit, resolve_policy
from branchpoint.checkpoints import list_boundaries, sqlite_checkpointer
from branchpoint.models import ScriptedModel
from branchpoint.tools import SearchTool
from tests.graphs import invoke

GOLDEN = Path(__file__).parent / "golden" / "constrained_two_searches.json"
SCRIPT = [
    'search", "text": "capital of Australia"}',
    'search", "text": "Sydney Canberra"}',
    'answer", "text": "Canberra"}',
]


def summary(values: dict) -> dict:
    """The parts of a final state a replay must reproduce."""
    return {
        "final_answer": values["final_answer"],
        "status": values["status"],
        "searches": values["searches"],
        "steps": [
            {k: s.get(k) for k in ("kind", "action", "text", "query", "source")}
            | {"retrieved": [d["doc_id"] for d in s.get("retrieved", [])]}
            for s in values["steps"]
        ],
    }


def test_langgraph_is_the_pinned_version():
    assert version("langgraph") == "1.2.22"
    assert version("langgraph-checkpoint") == "4.3.2"
    assert version("langgraph-checkpoint-sqlite") == "3.1.2"


def test_recorded_run_matches_golden_and_every_boundary_replays_it(tmp_path, keyword_source):
    with sqlite_checkpointer(tmp_path / "c.sqlite") as saver:
        graph = build_graph(resolve_policy("constrained"), saver)
        ctx = AgentContext(
            model=ScriptedModel(SCRIPT), search=SearchTool({"mem": keyword_source}, "mem", top_k=2), search_cap=5
        )
        cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": recursion_limit(5)}
        out = invoke(
            graph, initial_state("q", "What is the capital of Australia?", "mem"), cfg, context=ctx, durability="sync"
        )
        recorded = summary(out)
        assert recorded == json.loads(GOLDEN.read_text())
        bounds = list_boundaries(saver, "t")
        assert [b.boundary for b in bounds] == [
            "initial",
            "pending_query",
            "after_search_1",
            "pending_query",
            "after_search_2",
        ]
        for b in bounds:
            # model calls already made at this boundary: one decide per search, plus the decide
            # that produced a pending query
            done = b.searches + (1 if b.kind == "pending_query" else 0)
            replay_model = ScriptedModel(SCRIPT[done:])
            ctx = AgentContext(
                model=replay_model, search=SearchTool({"mem": keyword_source}, "mem", top_k=2), search_cap=5
            )
            rcfg = {"configurable": {"thread_id": "t", "checkpoint_id": b.checkpoint_id}, "recursion_limit": 20}
            replay = invoke(graph, None, rcfg, context=ctx, durability="sync")
            assert summary(replay) == recorded, f"replay from {b.boundary} diverged"
            assert replay_model.calls == len(SCRIPT) - done


@pytest.mark.skipif(not GOLDEN.exists(), reason="golden file missing")
def test_golden_file_is_readable():
    data = json.loads(GOLDEN.read_text())
    assert data["final_answer"] == "Canberra" and data["searches"] == 2
