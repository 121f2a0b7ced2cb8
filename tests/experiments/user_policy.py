"""Policies written the way a user writes one (`module:function` in a spec): for `validate` tests.

`careful` asks the model through branchpoint's few-shot prompt and follows its decision;
`one_search` overrides it (one search at most). Both run on the completion endpoint, where the
simulator's truth runs the policy's own code (`sim.policy_truth`). `careful` is written as
a coroutine that awaits the helper, `one_search` as a plain function that calls it: both kinds
must keep working.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from branchpoint.agents.policies import apply_decision, fewshot_decision, fewshot_force_answer, policy
from branchpoint.agents.state import AgentContext, AgentState


@policy("tests-user-policy", force_answer=fewshot_force_answer)
async def careful(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Search while the cap allows and the model asks to; answer otherwise."""
    ctx = runtime.context
    can_search = ctx.offers_search and state.get("searches", 0) < ctx.search_cap
    return apply_decision(state, await fewshot_decision(state, ctx, allow_search=can_search), ctx)


@policy("tests-user-policy-one-search", force_answer=fewshot_force_answer)
def one_search(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Overrides the model: at most one search per execution, whatever the cap and the model say;
    after it, the no-search prompt (the model is not even offered another search)."""
    ctx = runtime.context
    can_search = ctx.offers_search and state.get("searches", 0) < min(ctx.search_cap, 1)
    return apply_decision(state, fewshot_decision(state, ctx, allow_search=can_search), ctx)
