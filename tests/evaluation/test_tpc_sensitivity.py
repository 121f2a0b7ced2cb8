"""TPC-coefficient sensitivity (seed 000, Appendix B.2): TPC per condition over a (λ, μ) grid,
ranks and Kendall's τ against the run's own coefficients, checked against hand-computed numbers."""

from __future__ import annotations

import json

import pytest

from branchpoint.evaluation import MetricsConfig, compute_metrics, markdown_report, metrics_json
from branchpoint.evaluation.tpc_sensitivity import rank_agreement, tpc_ranks
from tests.evaluation.builders import make_record


def two_conditions() -> list:
    """A: Σg = 200, Σx = 400, Σ|S| = 0, 1 correct → TPC = 200 + 400λ.
    B: Σg = 100, Σx = 1000, Σ|S| = 2, 2 correct → TPC = 50 + 500λ + μ."""
    a, b = {"arm": "A"}, {"arm": "B"}
    return [
        make_record("1", condition=a, labels={"answer": "CORRECT"}, output_tokens=100, input_tokens=400),
        make_record("2", condition=a, labels={"answer": "INCORRECT"}, output_tokens=100),
        make_record(
            "1",
            condition=b,
            execution_id="b1",
            labels={"answer": "CORRECT"},
            output_tokens=50,
            input_tokens=1000,
            search_calls=2,
        ),
        make_record("2", condition=b, execution_id="b2", labels={"answer": "CORRECT"}, output_tokens=50),
    ]


def point(sens: dict, lam: float, mu: float) -> dict:
    return next(p for p in sens["points"] if p["lam"] == lam and p["mu"] == mu)


def test_tpc_over_the_grid_matches_hand_computed_values():
    sens = compute_metrics(two_conditions(), "human", MetricsConfig(bootstrap=0))["tpc_sensitivity"]
    assert sens["lams"] == [0.0, 0.1, 0.25, 0.5, 1.0]
    assert sens["mus"] == [0.0, 100.0, 250.0, 500.0, 1000.0, 2000.0]
    assert sens["n_points"] == 30
    for lam in sens["lams"]:
        for mu in sens["mus"]:
            cells = point(sens, lam, mu)["by_condition"]
            assert cells["arm=A"]["tpc"] == pytest.approx(200 + 400 * lam)
            assert cells["arm=B"]["tpc"] == pytest.approx(50 + 500 * lam + mu)
    base = point(sens, 0.25, 500.0)
    assert base["by_condition"]["arm=A"] == {"tpc": 300.0, "tpc_ci": None, "rank": 1}
    assert base["by_condition"]["arm=B"]["tpc"] == 675.0 and base["by_condition"]["arm=B"]["rank"] == 2
    assert base["same_order"] and base["kendall_tau"] == pytest.approx(1.0)
    # free search: B (with searches) becomes the cheaper condition, order reversed (τ = -1)
    free = point(sens, 0.25, 0.0)
    assert free["by_condition"]["arm=B"]["tpc"] == 175.0 and free["by_condition"]["arm=B"]["rank"] == 1
    assert not free["same_order"] and free["kendall_tau"] == pytest.approx(-1.0)
    # λ = 0.5, μ = 100: 400 = 400, a tie: both rank 1, τ undefined, not the run's order
    tie = point(sens, 0.5, 100.0)
    assert [c["rank"] for c in tie["by_condition"].values()] == [1, 1]
    assert tie["kendall_tau"] is None and not tie["same_order"]
    # A first iff 150 < 100λ + μ: (λ = 1, μ = 100) and all 5 λ at each μ ≥ 250 → 21 of 30
    assert sens["n_same_order"] == 21
    assert sens["by_condition"]["arm=A"] == {"min_tpc": 200.0, "max_tpc": 600.0, "best_rank": 1, "worst_rank": 2}


def test_the_runs_own_coefficients_join_the_grid_and_equal_the_condition_tpc():
    cfg = MetricsConfig(lam=0.3, mu=400.0, bootstrap=200, seed=1)
    m = compute_metrics(two_conditions(), "human", cfg)
    sens = m["tpc_sensitivity"]
    assert 0.3 in sens["lams"] and 400.0 in sens["mus"] and sens["n_points"] == 6 * 7
    own = point(sens, 0.3, 400.0)["by_condition"]
    for label in ("arm=A", "arm=B"):
        assert own[label]["tpc"] == pytest.approx(m["by_condition"][label]["tpc"])
        assert own[label]["tpc_ci"] == pytest.approx(m["by_condition"][label]["tpc_ci"])  # same resamples


def test_ranks_and_tau_by_hand():
    assert tpc_ranks({"a": 3.0, "b": 1.0, "c": 3.0, "d": None}) == {"a": 2, "b": 1, "c": 2}
    assert tpc_ranks({"a": float("inf"), "b": 5.0}) == {"a": 2, "b": 1}
    # (1,2,3) vs (1,3,2): one discordant pair of three → τ = (2 - 1) / 3
    assert rank_agreement({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 3, "c": 2}) == pytest.approx(1 / 3)
    assert rank_agreement({"a": 1}, {"a": 1}) is None


def test_sensitivity_reaches_metrics_json_and_the_report():
    text = metrics_json(compute_metrics(two_conditions(), "human", MetricsConfig(bootstrap=0)))
    data = json.loads(text)
    assert data["tpc_sensitivity"]["n_same_order"] == 21
    md = markdown_report(data, "Sensitivity")
    section = md.split("## TPC-coefficient sensitivity")[1].split("\n## ")[0]
    assert "at 21 of 30 grid points" in section
    assert "the lowest Kendall τ against it is -1.00 (λ = 0, μ = 0)" in section
    assert "| condition | n | λ = 0 | λ = 0.1 | λ = 0.25 | λ = 0.5 | λ = 1 |" in section
    assert "| arm=B | 2 | 175.0 | 275.0 | 425.0 | 675.0 | 1,175.0 | 2,175.0 |" in section  # μ varied, λ = 0.25
