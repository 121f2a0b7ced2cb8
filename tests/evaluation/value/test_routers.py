"""Router utility on a hand-built case: U = Y − λ·T/1000, probes paid for, halves disjoint."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value import routers
from tests.evaluation.value.helpers import make_states

# state 0: THINK half right, SEARCH always right and dear; state 1: THINK mostly right, SEARCH never
STATES = make_states(
    think=[[1, 1, 0, 0], [0, 1, 1, 1]],
    search=[[1, 1, 1, 1], [0, 0, 0, 0]],
    think_tokens=[[100] * 4, [200] * 4],
    search_tokens=[[1000] * 4, [500] * 4],
    think_answers=[["Paris", "paris.", "Rome", "x"], ["Rome", "London", "Paris", "Paris"]],
)


def mean_u(r: routers.Routed) -> float:
    return float(r.utility.mean())


def test_constants_and_oracle():
    assert mean_u(routers.constant("T", STATES, 0.0)) == pytest.approx((0.5 + 0.75) / 2)
    assert mean_u(routers.constant("S", STATES, 0.0)) == pytest.approx(0.5)
    # λ = 0.01: SEARCH costs 0.01 at state 0 (1000 tokens) and 0.005 at state 1
    assert mean_u(routers.constant("S", STATES, 0.01)) == pytest.approx((0.99 - 0.005) / 2)
    assert mean_u(routers.oracle(STATES, 0.0)) == pytest.approx((1.0 + 0.75) / 2)
    best = routers.best_constant(STATES, np.array([True, False]), 0.0)  # dev row 0 favours SEARCH
    assert best.info["action"] == "search" and mean_u(best) == pytest.approx(0.5)


def test_two_probe_consistency_router_pays_for_both_probes():
    r = routers.consistency(STATES, 0.01)
    # state 0: "Paris" and "paris." agree → keep THINK: reward (1 + 1)/2, tokens 100 + 100
    # state 1: "Rome" vs "London" → SEARCH: reward 0, tokens 200 + 200 probes + 500
    assert r.search.tolist() == [0.0, 1.0]
    assert r.tokens.tolist() == [200.0, 900.0]
    assert r.utility == pytest.approx([1 - 0.01 * 0.2, 0 - 0.01 * 0.9])


def test_sample_informed_selector_chooses_and_scores_on_disjoint_halves():
    r = routers.sample_informed(STATES, 0.0)
    # state 0: halves A = first two repeats, B = last two. On A, T (1.0) ties S (1.0) → T, scored on
    # B: 0. On B, S (1.0) beats T (0.0), scored on A: 1. Mean 0.5.
    # state 1: T wins on both halves (0.5 and 1.0 vs 0); scored on the other half: 1.0 and 0.5.
    assert r.utility == pytest.approx([0.5, 0.75])
    assert r.search.tolist() == [0.5, 0.0]


def test_threshold_router_and_tau_chosen_on_dev_rows():
    f = np.array([0.3, -0.3])
    assert routers.threshold(f, 0.0, STATES, 0.0).utility == pytest.approx([1.0, 0.75])
    assert routers.threshold(f, 0.5, STATES, 0.0).utility == pytest.approx([0.5, 0.75])
    dev = np.array([True, False])
    tau, scores = routers.best_threshold(f, STATES, dev, 0.0, grid=(-0.5, 0.0, 0.5))
    # on dev row 0, any τ < 0.3 searches (utility 1); ties go to the τ nearest 0
    assert tau == 0.0 and scores == {"-0.5": 1.0, "0": 1.0, "0.5": 0.5}
