"""A policy written the way a user writes one (`module:function` in a spec): for `validate` tests.

It asks the model through branchpoint's few-shot prompt and follows the model's decision, so the
simulator's truth (which models an agent that follows the model) applies to it.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from branchpoint.agents.policies import apply_decision, fewshot_decision, fewshot_force_answer, policy
from branchpoint.agents.state import AgentContext, AgentState


@policy("tests-user-policy", force_answer=fewshot_force_answer)
def careful(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Search while the cap allows and the model asks to; answer otherwise."""
    ctx = runtime.context
    can_search = ctx.offers_search and state.get("searches", 0) < ctx.search_cap
    return apply_decision(state, fewshot_decision(state, ctx, allow_search=can_search), ctx)
