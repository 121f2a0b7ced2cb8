"""The agent state machine: START -> decide -> search -> decide ... -> END, through `answer` when
an answer must be forced.

A fork starts a new thread whose input is a checkpoint's state plus a `directive`; `route_start`
sends it to the node that continues that state (see `branchpoint.checkpoints.fork`).

`decide` is the policy; a decision to answer is final in that node (`apply_decision` writes
`final_answer`) and the graph ends; `search` runs the pending query on the state's source and
appends the evidence; once the search budget is spent the graph goes straight to `answer`, which
makes the forced final model call with no tool (also when a policy asks to search where it may
not, and it finalises an answer that a node left pending). Checkpoints after every node record the
boundary kind in the state, so legal action boundaries can be found later for forking.

The nodes are coroutines (run with `graph.ainvoke` / `astream`, many executions on one event
loop); a policy's decide node may be a plain function, which LangGraph runs in the loop's thread
pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from branchpoint.agents.budget import may_search
from branchpoint.agents.policies import Policy, forced_answer_steps
from branchpoint.agents.state import AgentContext, AgentState
from branchpoint.agents.steps import as_state, search_step
from branchpoint.agents.transcript import search_entry
from branchpoint.traces import BOUNDARY_PENDING, after_search_boundary


async def search_node(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Run the pending query on the state's current source; one search call, counted, and the
    search (with the model turn that asked for it) appended to the transcript."""
    ctx = runtime.context
    if ctx.search is None:
        raise RuntimeError("search node reached without a search tool (routing bug)")
    pending: Mapping[str, Any] = state["pending"] or {}
    result = await ctx.search.arun(pending["text"], source=state.get("source"))
    docs = [d.model_dump() for d in result.docs]
    k = state.get("searches", 0) + 1
    return {
        "steps": [as_state(search_step(result))],  # appended (see `AgentState`)
        "transcript": [search_entry(state, result.query, result.source, len(docs))],
        "evidence": docs,
        "searches": k,
        "pending": None,
        "boundary": after_search_boundary(k),
    }


def make_answer_node(policy: Policy) -> Any:
    """The `answer` node for a policy: finalise, forcing a last answer when a search was refused."""

    async def answer(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        pending: Mapping[str, Any] = state.get("pending") or {}
        if pending.get("action") == "answer":
            return {"final_answer": pending["text"], "pending": None, "boundary": None}
        decision = await policy.aforce_answer(state, runtime.context)
        steps = forced_answer_steps(decision)
        ok = decision.status == "ok"
        return {
            "steps": steps,
            **({"transcript": decision.transcript} if decision.transcript else {}),
            "final_answer": decision.text if ok else None,
            "status": decision.status,
            "pending": None,
            "boundary": None,
        }

    return answer


#: Directive actions that end the search: answer now from the evidence in hand.
ANSWER_NOW = ("THINK", "STOP")


def route_start(state: AgentState) -> str:
    """Where an execution starts: `decide` for a new one; for a fork seeded from a checkpoint,
    `answer` when its directive is THINK / STOP, `search` when a query is pending (SAME, SWITCH)."""
    directive: Mapping[str, Any] = state.get("directive") or {}
    if directive.get("action") in ANSWER_NOW:
        return "answer"
    pending: Mapping[str, Any] = state.get("pending") or {}
    if state.get("boundary") == BOUNDARY_PENDING and pending.get("action") == "search":
        return "search"
    return "decide"


def route_after_decide(state: AgentState) -> str:
    """To `search` when a query is pending and may run; to the end when the decision is final
    (an answer, written as `final_answer` by `apply_decision`, or a failed call); else to
    `answer` (a search it may not run, or an answer a node left pending)."""
    if state.get("boundary") == BOUNDARY_PENDING:
        return "search"
    if state.get("status", "ok") != "ok" or (state.get("pending") is None and state.get("final_answer") is not None):
        return END
    return "answer"


def route_after_search(state: AgentState, runtime: Runtime[AgentContext]) -> str:
    """Back to `decide` while the budget allows another search; else to `answer` (forced)."""
    return "decide" if may_search(state, runtime.context) else "answer"


# The routes as coroutines for the graph: LangGraph runs a plain-function route of an async graph
# in its thread pool, a thread hand-off per route per execution (two for a no-search execution,
# 0.3 ms of CPU each; BENCHMARKS.md, "CPU per model call"); these run on the loop.


async def _route_start(state: AgentState) -> str:
    return route_start(state)


async def _route_after_decide(state: AgentState) -> str:
    return route_after_decide(state)


async def _route_after_search(state: AgentState, runtime: Runtime[AgentContext]) -> str:
    return route_after_search(state, runtime)


def build_graph(
    policy: Policy, checkpointer: BaseCheckpointSaver | None = None
) -> CompiledStateGraph[AgentState, AgentContext, AgentState, AgentState]:
    """Compile the agent graph for a policy, checkpointed after every node when a saver is given."""
    builder: StateGraph[AgentState, AgentContext, AgentState, AgentState]
    builder = StateGraph(AgentState, context_schema=AgentContext)
    builder.add_node("decide", policy.node)
    builder.add_node("search", search_node)
    builder.add_node("answer", make_answer_node(policy))
    builder.add_conditional_edges(START, _route_start, ["decide", "search", "answer"])
    builder.add_conditional_edges("decide", _route_after_decide, ["search", "answer", END])
    builder.add_conditional_edges("search", _route_after_search, ["decide", "answer"])
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


def recursion_limit(search_cap: int) -> int:
    """Enough LangGraph super-steps for `search_cap` searches plus the final answer."""
    return 2 * search_cap + 10
