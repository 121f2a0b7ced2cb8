"""Agents: state, graph, action protocols, prompts and the policy registry."""

from branchpoint.agents.budget import may_search
from branchpoint.agents.graph import build_graph, recursion_limit
from branchpoint.agents.policies import (
    Policy,
    apply_decision,
    policy,
    resolve_policy,
)
from branchpoint.agents.protocols import Decision
from branchpoint.agents.state import AgentContext, AgentState, Budget, initial_state

__all__ = [
    "AgentContext",
    "AgentState",
    "Budget",
    "Decision",
    "Policy",
    "apply_decision",
    "build_graph",
    "initial_state",
    "may_search",
    "policy",
    "recursion_limit",
    "resolve_policy",
]
