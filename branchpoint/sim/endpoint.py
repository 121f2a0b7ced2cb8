"""`POST /v1/sim/truth`: exact values of continuations from a saved state, over HTTP.

The server needs the retrieval the agent uses (to know what a query returns): it is started with
`--spec SPEC.yaml`, whose `retrieval` section, agent limits and model settings are the defaults.

Request: `{"state": {question, evidence, searches, boundary, pending, source},
"actions": ["THINK", "SEARCH", ...], "search_budget": 3, "switch_source": null,
"policy": "constrained", "temperature": .., "top_p": .., "effort": ..}` (all but `state`
optional). Reply: `{"values": {ACTION: {"p": .., "expected_searches": .., "expected_input_tokens": ..,
"expected_output_tokens": ..}}, "agent": {...}}` (the token expectations on the completion
endpoint only, `costs`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from branchpoint.sim.profile import Profile
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.truth import POLICY_STYLES, AgentModel, TruthModel


def truth_endpoint(profile: Profile, bank: QuestionBank, spec_path: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The handler behind /v1/sim/truth for a spec's retrieval and defaults."""
    from branchpoint.experiments.source_pool import SourcePool
    from branchpoint.experiments.spec import load_spec

    spec = load_spec(spec_path)
    pool = SourcePool(progress=False)
    tool = pool.search_tool(spec.model_copy(update={"agent": spec.agent.model_copy(update={"search": True})}))
    assert tool is not None

    def search(query: str, source: str) -> list[dict[str, Any]]:
        return [d.model_dump() for d in tool.run(query, source=source).docs]

    def handle(body: dict[str, Any]) -> dict[str, Any]:
        state = body.get("state")
        if not isinstance(state, dict):
            raise ValueError('"state": expected the saved state values (question, evidence, searches, ...)')
        policy = body.get("policy", spec.agent.policy)
        style = body.get("style") or POLICY_STYLES.get(policy)
        if style is None:
            raise ValueError(
                f'"style": policy {policy!r} is not built in; say its protocol '
                f"({', '.join(sorted(set(POLICY_STYLES.values())))})"
            )
        agent = AgentModel(
            style=style,
            temperature=float(body.get("temperature", spec.model.temperature)),
            top_p=float(body.get("top_p", spec.model.top_p or 1.0)),
            effort=body.get("effort") or spec.model.reasoning_effort or profile.default_effort,
            max_tokens=int(body.get("max_tokens", spec.model.max_tokens)),
            answer_max_tokens=int(body.get("answer_max_tokens", spec.agent.answer_max_tokens or spec.model.max_tokens)),
            malformed_retries=spec.agent.malformed_retries,
            evidence_words=int(body.get("evidence_words", spec.agent.evidence_words)),
            offers_search=spec.agent.search,
            # what the state was told of its budget (a branch: its parent's), else the spec's
            disclosure=str((state.get("budget") or {}).get("disclosure", spec.agent.budget_disclosure)),
            shown_cap=int((state.get("budget") or {}).get("search_cap", spec.agent.search_cap)),
        )
        truth = TruthModel(profile, bank, agent, search)
        values = {}
        for action in body.get("actions") or ["THINK", "SEARCH"]:
            v = truth.continuation(
                state, action, search_budget=int(body.get("search_budget", 3)), switch_source=body.get("switch_source")
            )
            tokens = (
                {"expected_input_tokens": v.input_tokens, "expected_output_tokens": v.output_tokens}
                if (truth.costs_modelled)
                else {}
            )  # exact on the completion endpoint; chat: not modelled
            values[action] = {"p": v.p, "expected_searches": v.searches, **tokens}
        return {"values": values, "agent": agent.__dict__}

    return handle
