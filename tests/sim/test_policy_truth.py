"""Truth by running a policy's own code (`PolicyTruth`) and the exact token costs (`costs`)."""

from __future__ import annotations

import pytest

from branchpoint.agents import resolve_policy
from branchpoint.sim.costs import sequence_cost
from branchpoint.sim.policy_truth import PolicyTruth
from branchpoint.sim.profile import load_profile
from branchpoint.sim.truth import AgentModel, TruthModel
from tests.sim.test_truth import BANK, CORPUS, QUESTIONS, toy_search


def test_sequence_cost_by_hand() -> None:
    # first call: malformed 0.1 (3 tokens), cut off 0.2; one grammar retry cut off with 0.5
    cc = sequence_cost(100, first=(0.1, 0.2), grammar_fail=0.5, grammar_calls=1, malformed_tokens=3)
    assert cc.ok == pytest.approx(0.7 + 0.3 * 0.5)
    assert cc.ok_in == pytest.approx((0.7 * 100 + 0.15 * 200) / 0.85)
    assert cc.ok_out == pytest.approx(0.1 * 0.5 * 3 / 0.85)
    assert (cc.fail_in, cc.fail_out) == (pytest.approx(200), pytest.approx(1.0))  # 1/3 of failures malformed
    forced = sequence_cost(50, first=None, grammar_fail=0.1, grammar_calls=2, malformed_tokens=0)
    assert (forced.ok, forced.ok_in, forced.fail_in) == (pytest.approx(0.9), 50, 100)  # the same request twice


@pytest.mark.parametrize("profile", ["instruct", "over_searching"])
def test_running_the_constrained_policy_gives_the_protocol_truth_exactly(profile: str) -> None:
    """Two independent routes to the same numbers: the protocol's mirror with its cost model, and
    the policy's own code against every reply (success, searches and tokens)."""
    prof = load_profile(profile)
    agent = AgentModel(style="completion", temperature=0.6, top_p=0.95)
    mirror = TruthModel(prof, BANK, agent, toy_search)
    driven = PolicyTruth(prof, BANK, resolve_policy("constrained"), agent, toy_search)
    for q in QUESTIONS[:4]:
        pairs = [(mirror.natural(q, 3, "main"), driven.natural(q, 3, "main"))]
        for evidence in ([], CORPUS["sydney"]):
            state = {
                "question": q.question,
                "evidence": evidence,
                "searches": len(evidence),
                "boundary": "initial",
                "source": "main",
            }
            for action in ("THINK", "SEARCH"):
                pairs.append(
                    (
                        mirror.continuation(state, action, search_budget=2),
                        driven.continuation(state, action, search_budget=2),
                    )
                )
        for a, b in pairs:
            assert (b.p, b.searches, b.input_tokens, b.output_tokens) == pytest.approx(
                (a.p, a.searches, a.input_tokens, a.output_tokens), abs=1e-9
            )
            assert a.input_tokens > 0


def test_a_policy_that_overrides_the_model_gets_its_own_truth() -> None:
    from tests.experiments.user_policy import one_search  # noqa: F401  (registers it)

    prof = load_profile("over_searching")
    agent = AgentModel(style="completion", temperature=0.6, top_p=0.95)
    mirror = TruthModel(prof, BANK, agent, toy_search)
    driven = PolicyTruth(prof, BANK, resolve_policy("tests.experiments.user_policy:one_search"), agent, toy_search)
    q = BANK.lookup("Why is Sydney the capital of Australia?")
    assert q is not None
    own, assumed = driven.natural(q, 3, "main"), mirror.natural(q, 3, "main")
    assert 0 < own.searches <= 1.0 < assumed.searches  # it never searches twice; the model would
    assert own.p != pytest.approx(assumed.p)
