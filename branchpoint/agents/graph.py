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

import inspect
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from branchpoint.agents.budget import counted, forced_reason, may_search, must_answer
from branchpoint.agents.policies import Policy, coroutine_function, forced_answer_steps, in_executor
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
    entry: dict[str, Any] = dict(search_entry(state, result.query, result.source, len(docs)))
    if "generated_tokens" in state:  # for the disclosure of the tokens left after this search
        entry["generated_tokens"] = int(state["generated_tokens"])
    return {
        "steps": [as_state(search_step(result))],  # appended (see `AgentState`)
        "transcript": [entry],
        "evidence": docs,
        "searches": k,
        "pending": None,
        "boundary": after_search_boundary(k),
    }


def _takes_runtime(fn: Any) -> bool:
    """Whether a decide node takes (state, runtime) rather than (state) alone."""
    try:
        inspect.signature(fn).bind(None, None)
    except (TypeError, ValueError):
        return False
    return True


def make_decide_node(policy: Policy) -> Any:
    """The `decide` node for a policy: its node (awaited, or a plain one run in the loop's thread
    pool, as LangGraph runs one), its update counted against the token budget (`counted`)."""
    node = coroutine_function(policy.node)
    takes_runtime = _takes_runtime(policy.node)

    async def decide(state: AgentState, runtime: Runtime[AgentContext]) -> Any:
        args: tuple[Any, ...] = (state, runtime) if takes_runtime else (state,)
        if node is not None:
            update = await node(*args)
        else:
            update = await in_executor(policy.node, *args)
        return counted(state, update, runtime.context)

    decide.__doc__ = getattr(policy.node, "__doc__", None)
    return decide


def make_answer_node(policy: Policy) -> Any:
    """The `answer` node for a policy: finalise, forcing a last answer when a search was refused,
    the search cap or the token budget is reached, or a fork directive says so; each forced step
    records why (`forced_by`, see `agents.budget.forced_reason`)."""

    async def answer(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        pending: Mapping[str, Any] = state.get("pending") or {}
        if pending.get("action") == "answer":
            return {"final_answer": pending["text"], "pending": None, "boundary": None}
        reason = forced_reason(state, runtime.context)
        decision = await policy.aforce_answer(state, runtime.context)
        steps = [{**step, "forced_by": reason} for step in forced_answer_steps(decision)]
        ok = decision.status == "ok"
        update: dict[str, Any] = counted(
            state,
            {
                "steps": steps,
                **({"transcript": decision.transcript} if decision.transcript else {}),
                "final_answer": decision.text if ok else None,
                "status": decision.status,
                "pending": None,
                "boundary": None,
            },
            runtime.context,
        )
        return update

    return answer


#: Directive actions that end the search: answer now from the evidence in hand.
ANSWER_NOW = ("THINK", "STOP")


def route_start(state: AgentState, ctx: AgentContext | None = None) -> str:
    """Where an execution starts: `decide` for a new one; for a fork seeded from a checkpoint,
    `answer` when its directive is THINK / STOP, `search` when a query is pending (SAME, SWITCH);
    `answer` when the state's token budget is already spent."""
    directive: Mapping[str, Any] = state.get("directive") or {}
    if directive.get("action") in ANSWER_NOW:
        return "answer"
    if ctx is not None and must_answer(state, ctx):
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
    """Back to `decide` while the search cap allows another search and the token budget is not
    spent; else to `answer` (forced)."""
    return "decide" if may_search(state, runtime.context) else "answer"


# The routes as coroutines for the graph: LangGraph runs a plain-function route of an async graph
# in its thread pool, a thread hand-off per route per execution (two for a no-search execution,
# 0.3 ms of CPU each; BENCHMARKS.md, "CPU per model call"); these run on the loop.


async def _route_start(state: AgentState, runtime: Runtime[AgentContext]) -> str:
    return route_start(state, runtime.context)


async def _route_after_decide(state: AgentState) -> str:
    return route_after_decide(state)


async def _route_after_search(state: AgentState, runtime: Runtime[AgentContext]) -> str:
    return route_after_search(state, runtime)


def build_graph(
    policy: Policy, checkpointer: BaseCheckpointSaver[str] | None = None
) -> CompiledStateGraph[AgentState, AgentContext, AgentState, AgentState]:
    """Compile the agent graph for a policy, checkpointed after every node when a saver is given."""
    builder: StateGraph[AgentState, AgentContext, AgentState, AgentState]
    builder = StateGraph(AgentState, context_schema=AgentContext)
    builder.add_node("decide", make_decide_node(policy))
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
