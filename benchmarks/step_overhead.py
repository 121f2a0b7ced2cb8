"""Framework overhead per agent step: our checkpointed graph vs plain Python vs bare LangGraph.

The same executions (scripted model that searches until the cap, then the forced answer; an
in-memory source returning top-3 passages of ~100 words) run three ways:

* plain — the same node functions (policy `decide`, `search`, `answer`, coroutines) awaited in a
  Python loop, state merged in a dict, nothing persisted;
* langgraph — our graph compiled with no checkpointer (`graph.ainvoke`);
* ours — the runner's path: `run_one` (thread cleared, graph with SQLite checkpoints after
  every node, `durability="sync"`, boundaries listed, record built), and, as "ours + append",
  the record appended durably (flush + fsync) to executions.jsonl as the runner does.

Each variant runs its executions one after the other on one event loop (`asyncio.run`).

A step is one node execution (decide, search or answer). Prints ms per step, the ratios, and our
overhead per step over plain Python (target ≤ 5 ms). Figures are from one run on one machine:
compare ratios, not absolute times across machines.

    .venv/bin/python benchmarks/step_overhead.py [--executions 100] [--searches 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.graph import END

from benchmarks.timing import best_of
from branchpoint.agents import AgentContext, build_graph, initial_state, recursion_limit, resolve_policy
from branchpoint.agents.graph import make_answer_node, route_after_decide, route_after_search, search_node
from branchpoint.checkpoints import sqlite_checkpointer
from branchpoint.datasets.questions import Question
from branchpoint.experiments.planning import PlannedExecution
from branchpoint.experiments.runner import run_one
from branchpoint.experiments.spec import ExperimentSpec
from branchpoint.experiments.store import RunStore
from branchpoint.models import ScriptedModel
from branchpoint.tools import SearchTool
from branchpoint.traces import RetrievedDoc

WORDS = [
    "the",
    "river",
    "flows",
    "past",
    "old",
    "stone",
    "bridges",
    "where",
    "merchants",
    "once",
    "traded",
    "salt",
    "wool",
    "and",
    "amber",
    "under",
    "the",
    "watch",
    "of",
    "a",
    "city",
    "council",
    "that",
    "kept",
    "careful",
    "records",
    "of",
    "every",
    "cargo",
]


class MemorySource:
    """A tiny in-memory source: top-k fixed passages of ~100 words, ranked by nothing."""

    name = "mem"

    def __init__(self) -> None:
        self.passages = [
            RetrievedDoc(
                doc_id=f"d{i}",
                score=1.0 - i / 10,
                title=f"Passage {i}",
                text=" ".join(WORDS[(i + j) % len(WORDS)] for j in range(100)),
                source="mem",
            )
            for i in range(10)
        ]

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        return [d.model_copy() for d in self.passages[:k]]


def responder(prompt: str, request: dict | None = None) -> str:
    """Search while allowed (the grammar offers search), else answer."""
    if request and request.get("grammar") and "search" not in request["grammar"]:
        return 'answer", "text": "Passage 0"}'
    return f'search", "text": "query {prompt.count("[1]")}"}}'


def context(searches: int) -> AgentContext:
    return AgentContext(
        model=ScriptedModel(responder=responder),
        search=SearchTool({"mem": MemorySource()}, "mem", top_k=3),
        search_cap=searches,
        max_tokens=32,
        answer_max_tokens=32,
    )


def plain(n: int, searches: int) -> int:
    """The same nodes in a Python loop; returns the number of steps."""
    return asyncio.run(_plain(n, searches))


async def _plain(n: int, searches: int) -> int:
    policy = resolve_policy("constrained")
    answer = make_answer_node(policy)
    steps = 0
    for i in range(n):
        runtime = SimpleNamespace(context=context(searches))
        state = dict(initial_state(f"q{i}", f"Question number {i}?", "mem"))
        node = "decide"
        while node != "end":
            fn = {"decide": policy.node, "search": search_node, "answer": answer}[node]
            state.update(await fn(state, runtime))
            steps += 1
            if node == "decide":
                node = route_after_decide(state)
                node = "end" if node == END else node
            elif node == "search":
                node = route_after_search(state, runtime)
            else:
                node = "end"
        assert state["final_answer"] == "Passage 0" and state["searches"] == searches
    return steps


def bare_langgraph(n: int, searches: int) -> None:
    asyncio.run(_bare_langgraph(n, searches))


async def _bare_langgraph(n: int, searches: int) -> None:
    graph = build_graph(resolve_policy("constrained"), None)
    for i in range(n):
        out = await graph.ainvoke(
            initial_state(f"q{i}", f"Question number {i}?", "mem"),
            {"recursion_limit": recursion_limit(searches)},
            context=context(searches),
        )
        assert out["final_answer"] == "Passage 0"


def ours(n: int, searches: int, workdir: Path, append: bool) -> None:
    asyncio.run(_ours(n, searches, workdir, append))


async def _ours(n: int, searches: int, workdir: Path, append: bool) -> None:
    spec = ExperimentSpec(
        name="bench", agent={"search_cap": searches, "top_k": 3}, retrieval={"default": "mem", "sources": {"mem": {}}}
    )
    store = RunStore(workdir)
    with sqlite_checkpointer(workdir / "checkpoints.sqlite") as saver:
        graph = build_graph(resolve_policy("constrained"), saver)
        for i in range(n):
            q = Question(id=f"q{i}", question=f"Question number {i}?", answerable=True, gold_answers=["x"])
            planned = PlannedExecution({}, spec, q, f"bench-{workdir.name}-{i}")
            rec = await run_one(graph, context(searches), planned, "bench")
            assert rec.final_answer == "Passage 0" and rec.search_calls == searches
            if append:
                store.append(rec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=100)
    parser.add_argument("--searches", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each variant; the fastest counts.")
    a = parser.parse_args()
    n, s = a.executions, a.searches
    steps = plain(1, s) * n  # 2s + 1 node executions per execution
    tmp = Path(tempfile.mkdtemp(prefix="bp-step-bench-"))
    counter = iter(range(10**6))

    def fresh() -> Path:
        d = tmp / f"r{next(counter)}"
        d.mkdir()
        return d

    ours(2, s, fresh(), append=True)  # warm up imports and SQLite
    t_plain = best_of(lambda: plain(n, s), a.repeats)
    t_lg = best_of(lambda: bare_langgraph(n, s), a.repeats)
    t_ours = best_of(lambda: ours(n, s, fresh(), append=False), a.repeats)
    t_full = best_of(lambda: ours(n, s, fresh(), append=True), a.repeats)
    ms = {
        k: 1000 * v / steps
        for k, v in {"plain": t_plain, "langgraph": t_lg, "ours": t_ours, "ours + append": t_full}.items()
    }
    print(
        f"{n} executions x {2 * s + 1} steps ({s} searches, top_k 3, ~100-word passages) = {steps} steps; "
        f"best of {a.repeats}"
    )
    print(f"{'variant':<16}{'ms / step':>10}{'ms / execution':>16}")
    for k, v in ms.items():
        print(f"{k:<16}{v:>10.3f}{v * (2 * s + 1):>16.2f}")
    print(f"ratio ours / plain        {t_ours / t_plain:6.1f}x")
    print(f"ratio ours / langgraph    {t_ours / t_lg:6.1f}x")
    print(f"ratio langgraph / plain   {t_lg / t_plain:6.1f}x")
    overhead = ms["ours"] - ms["plain"]
    overhead_full = ms["ours + append"] - ms["plain"]
    print(
        f"our overhead per step over plain Python: {overhead:.2f} ms "
        f"({overhead_full:.2f} ms with the durable append); target ≤ 5 ms: "
        f"{'met' if overhead_full <= 5 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
