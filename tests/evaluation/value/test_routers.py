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


def test_two_probe_consistency_scores_the_choice_on_other_draws_over_all_splits():
    states = make_states(
        think=[[1, 1, 0, 0], [0, 0, 0, 0]],
        search=[[1, 1, 0, 1], [1, 0, 1, 0]],
        think_tokens=[[100, 120, 140, 160], [100] * 4],
        search_tokens=[[1000] * 4, [500] * 4],
        think_answers=[["Paris", "paris.", "Rome", "I don't know"], [None, None, "unknown", "Unknown."]],
        think_status=[["ok"] * 4, ["malformed", "malformed", "ok", "ok"]],
    )
    r = routers.consistency(states, 0.01)
    # state 0, the six probe pairs (Ȳ_S = 0.75, T̄_S = 1000):
    #   (0,1) Paris = paris. → THINK, scored on draws 2,3: reward 0, tokens 220 probes + 150 → −0.0037
    #   (0,2) (0,3) (1,2) (1,3) (2,3) disagree ("I don't know" is UNKNOWN) → SEARCH: 0.75 − 0.01·(probes+1000)/1000
    #   probes 240, 260, 260, 280, 300 → 0.7376, 0.7374, 0.7374, 0.7372, 0.7370
    # state 1: two failed probes and two UNKNOWN probes never agree → always SEARCH, 0.5 − 0.01·0.7
    assert r.utility == pytest.approx([(-0.0037 + 0.7376 + 0.7374 + 0.7374 + 0.7372 + 0.7370) / 6, 0.493])
    assert r.search == pytest.approx([5 / 6, 1.0])
    assert r.tokens == pytest.approx([(370 + 1240 + 1260 + 1260 + 1280 + 1300) / 6, 700.0])
    assert r.info["agreement_by_state"] == pytest.approx([1 / 6, 0.0])


def test_probe_validity():
    assert routers.probes_agree(("Paris", "paris."), ("ok", "ok"))
    assert not routers.probes_agree(("", ""), ("ok", "ok"))
    assert not routers.probes_agree(("Paris", "Paris"), ("length", "ok"))
    assert not routers.probes_agree(("UNKNOWN", "unknown"), ("ok", "ok"))
    assert routers.is_unknown_answer("I don't know.") and not routers.is_unknown_answer("Irving Berlin")


def test_consistency_needs_three_think_repeats():
    states = make_states(think=[[1, 0]], search=[[1, 1]])
    assert not routers.consistency_defined(states).any()
    assert np.isnan(routers.consistency(states, 0.0).utility).all()


def test_sample_informed_selector_averages_all_36_paired_splits():
    r = routers.sample_informed(STATES, 0.0)
    # state 0: selection pairs of THINK [1,1,0,0]: (0,1) mean 1 ties SEARCH's 1 → THINK, scored on
    # draws 2,3: 0; the other five THINK pairs lose → SEARCH, scored 1. (6·0 + 30·1)/36 = 5/6.
    # state 1: SEARCH (all 0) never beats THINK; THINK is scored on the complement of its
    # selection pair: 1, 1, 1 (pairs with draw 0) and 0.5, 0.5, 0.5 → 0.75.
    assert r.utility == pytest.approx([5 / 6, 0.75])
    assert r.search == pytest.approx([5 / 6, 0.0])


def test_decision_factorial_cells_by_hand():
    # λ = 0.01; state 0: T̄ 100 tokens, S 1000; state 1: T 200, S 500
    fixed = routers.split_rule(STATES, 0.01, fixed_gain=0.1, fixed_cost=900.0)
    # 0.1 − 0.009 > 0 → always SEARCH: 1 − 0.01 and 0 − 0.005
    assert fixed.utility == pytest.approx([0.99, -0.005]) and fixed.search.tolist() == [1.0, 1.0]
    gain_only = routers.split_rule(STATES, 0.01, fixed_cost=900.0)
    # state 0: gain 0 on THINK pair (0,1) → THINK scored on draws 2,3: 0 − 0.001; else SEARCH 0.99
    # state 1: the gain is −0.5 or −1 → THINK, scored on complements: 0.75 − 0.002
    assert gain_only.utility == pytest.approx([(6 * -0.001 + 30 * 0.99) / 36, 0.748])
    cost_only = routers.split_rule(STATES, 0.01, fixed_gain=0.1)
    # query costs 900 and 300: 0.1 − 0.009 > 0 and 0.1 − 0.003 > 0 → SEARCH at both
    assert cost_only.utility == pytest.approx([0.99, -0.005])
    both = routers.split_rule(STATES, 0.01)
    assert both.utility == pytest.approx(routers.sample_informed(STATES, 0.01).utility)


def test_selection_splits():
    splits = routers.selection_splits(4)
    assert len(splits) == 6 and splits[0] == ((0, 1), (2, 3))
    assert len(routers.selection_splits(3)) == 3 and routers.selection_splits(3)[0] == ((0,), (1, 2))
    assert len(routers.selection_splits(12)) == routers.MAX_SPLITS
    assert routers.selection_splits(12) == routers.selection_splits(12)


def test_threshold_router_and_tau_chosen_on_dev_rows():
    f = np.array([0.3, -0.3])
    assert routers.threshold(f, 0.0, STATES, 0.0).utility == pytest.approx([1.0, 0.75])
    assert routers.threshold(f, 0.5, STATES, 0.0).utility == pytest.approx([0.5, 0.75])
    dev = np.array([True, False])
    tau, scores = routers.best_threshold(f, STATES, dev, 0.0, grid=(-0.5, 0.0, 0.5))
    # on dev row 0, any τ < 0.3 searches (utility 1); ties go to the τ nearest 0
    assert tau == 0.0 and scores == {"-0.5": 1.0, "0": 1.0, "0.5": 0.5}
