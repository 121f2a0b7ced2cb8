"""The reasoning-effort × search-cap frontier on a hand-built table, its Pareto set checked by a
brute-force comparison written here, its ROI by hand, its pairing by identical conditions."""

from __future__ import annotations

import itertools
import json

import pytest

from branchpoint.evaluation import MetricsConfig, compute_metrics, metrics_json
from branchpoint.evaluation.frontier import effort_order, pareto_mask
from branchpoint.evaluation.metrics_file import as_metrics
from tests.evaluation.builders import make_record

FAST = MetricsConfig(bootstrap=300, mu=500.0, lam=0.25)
EFFORT, CAP = "model.reasoning_effort", "agent.search_cap"
QUESTIONS = ("q1", "q2", "q3", "q4")
#: (effort, cap) -> (questions answered correctly, output tokens per execution, searches each)
TABLE = {
    ("low", 0): ({"q1"}, 100, 0),
    ("low", 2): ({"q1", "q2", "q3"}, 100, 1),
    ("medium", 0): ({"q1"}, 300, 0),
    ("medium", 2): (set(QUESTIONS), 300, 1),
    ("high", 0): ({"q1", "q2"}, 1000, 0),
    ("high", 2): (set(QUESTIONS), 1000, 1),
}


def grid_records(table=TABLE, extra=None):
    recs = []
    for (effort, cap), (correct, tokens, searches) in table.items():
        for q in QUESTIONS:
            recs.append(
                make_record(
                    q,
                    labels={"answer": "CORRECT" if q in correct else "INCORRECT"},
                    condition={EFFORT: effort, CAP: cap, "model.name": "m", **(extra or {})},
                    execution_id=f"{effort}-{cap}-{q}",
                    output_tokens=tokens,
                    search_calls=searches,
                )
            )
    return recs


def brute_force_frontier(table):
    """Pareto-optimal cells of `table`, from accuracy and TPC computed here by hand."""
    acc = {k: len(c) / len(QUESTIONS) for k, (c, _, _) in table.items()}
    tpc = {k: len(QUESTIONS) * (t + 500 * s) / len(c) for k, (c, t, s) in table.items()}
    return {
        k
        for k in table
        if not any(
            acc[o] >= acc[k] and tpc[o] <= tpc[k] and (acc[o] > acc[k] or tpc[o] < tpc[k]) for o in table if o != k
        )
    }


def the_grid(metrics):
    fr = metrics["effort_cap_frontier"]
    assert fr["available"], fr
    (grid,) = fr["series"]
    return grid


def test_the_pareto_set_is_the_brute_force_one_and_the_roi_is_by_hand():
    m = compute_metrics(grid_records(), "human", FAST, sweep={EFFORT: ["low", "medium", "high"], CAP: [0, 2]})
    grid = the_grid(m)
    assert grid["effort_key"] == EFFORT and grid["cap_key"] == CAP and grid["other"] == {"model.name": "m"}
    on = {(p["effort"], p["cap"]) for p in grid["points"] if p["on_frontier"]}
    assert on == brute_force_frontier(TABLE) == {("low", 0), ("medium", 2)}
    assert grid["frontier"] == [f"{CAP}=0,model.name=m,{EFFORT}=low", f"{CAP}=2,model.name=m,{EFFORT}=medium"]
    # efforts in the spec's order (alphabetical would put high first), caps ascending within each
    assert [(p["effort"], p["cap"]) for p in grid["points"]] == [
        (e, c) for e in ("low", "medium", "high") for c in (0, 2)
    ]
    for p in grid["points"]:
        assert 0.0 <= p["frontier_probability"] <= 1.0
        lo, hi = p["overall_accuracy_ci"]
        assert lo <= p["overall_accuracy"] <= hi
    prob = {(p["effort"], p["cap"]): p["frontier_probability"] for p in grid["points"]}
    # (medium, 2) is beaten only in replicates where (low, 2) draws no q4 (its one wrong question)
    assert prob[("medium", 2)] == pytest.approx(1 - (3 / 4) ** 4, abs=0.1)
    assert prob[("high", 2)] == 0.0  # always dominated by (medium, 2): same accuracy, more cost
    # cap axis at low effort: +0.5 accuracy for +500 tokens per query = +1.0 per 1k tokens
    cap_steps = {(s["effort"], s["from_cap"], s["to_cap"]): s for s in grid["cap_roi"]}
    assert set(cap_steps) == {(e, 0, 2) for e in ("low", "medium", "high")}
    assert cap_steps[("low", 0, 2)]["overall_accuracy_per_1k_tokens"] == pytest.approx(1.0)
    assert cap_steps[("low", 0, 2)]["added_cost_per_query"] == pytest.approx(500.0)
    # effort axis at cap 0, in the spec's order: low → medium (no gain), medium → high
    eff = [(s["cap"], s["from_effort"], s["to_effort"]) for s in grid["effort_roi"]]
    assert eff == [(0, "low", "medium"), (0, "medium", "high"), (2, "low", "medium"), (2, "medium", "high")]
    step = grid["effort_roi"][1]
    assert step["overall_accuracy_per_1k_tokens"] == pytest.approx(0.25 / 0.7)
    # low → medium at cap 0: the same question right in both, so every paired replicate gains 0
    assert grid["effort_roi"][0]["overall_accuracy_change"] == 0.0
    assert grid["effort_roi"][0]["overall_accuracy_change_ci"] == [0.0, 0.0]
    assert grid["effort_roi"][0]["overall_accuracy_per_1k_tokens_ci"] == [0.0, 0.0]
    as_metrics(json.loads(metrics_json(m)))  # written and read back through the file model


def test_efforts_follow_the_spec_even_against_the_usual_order():
    m = compute_metrics(grid_records(), "human", FAST, sweep={EFFORT: ["high", "medium", "low"]})
    grid = the_grid(m)
    assert grid["effort_order"] == ["high", "medium", "low"] and grid["effort_order_source"] == "spec"
    assert [s["from_effort"] for s in grid["effort_roi"][:2]] == ["high", "medium"]
    builtin = the_grid(compute_metrics(grid_records(), "human", FAST))
    assert builtin["effort_order"] == ["low", "medium", "high"] and builtin["effort_order_source"] == "built-in"
    assert effort_order(["x", "high", "low"], ["low"]) == (["low", "high", "x"], "spec")


def test_random_tables_match_the_brute_force_frontier():
    import random

    rng = random.Random(3)
    for _ in range(20):
        table = {
            (e, c): (set(rng.sample(QUESTIONS, rng.randint(1, 4))), rng.choice((100, 200, 400)), rng.randint(0, 2))
            for e, c in itertools.product(("low", "high"), (0, 1, 3))
        }
        grid = the_grid(compute_metrics(grid_records(table), "human", MetricsConfig(bootstrap=0)))
        assert {(p["effort"], p["cap"]) for p in grid["points"] if p["on_frontier"]} == brute_force_frontier(table)
        assert all(p["frontier_probability"] is None for p in grid["points"])


def test_pareto_mask_ties_infinity_and_undefined():
    assert pareto_mask([0.5, 0.5], [100.0, 100.0]).tolist() == [True, True]  # equal: neither dominates
    assert pareto_mask([0.0, 0.0], [float("inf"), float("inf")]).tolist() == [True, True]
    assert pareto_mask([0.0, 0.1], [float("inf"), 900.0]).tolist() == [False, True]
    assert pareto_mask([float("nan"), 0.1], [1.0, 900.0]).tolist() == [False, True]


def test_no_grid_without_both_axes_and_search_off_is_left_out():
    only_cap = [r for r in grid_records() if r.condition[EFFORT] == "low"]
    for r in only_cap:
        r.condition.pop(EFFORT)
    assert not compute_metrics(only_cap, "human", FAST)["effort_cap_frontier"]["available"]
    off = grid_records(extra={"agent.search": False})
    assert not compute_metrics(off, "human", FAST)["effort_cap_frontier"]["available"]
