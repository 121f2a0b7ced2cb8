"""Fitted forecasters and maps of the search-value study: features, ridge, beta, STOP feedback."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value import features as feat
from branchpoint.evaluation.value import fitted
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import Forecast, ridge_fit_predict
from branchpoint.traces import RetrievedDoc, Step
from tests.evaluation.value.helpers import make_states


def _search(query, ids, text="x"):
    return Step(kind="search", query=query, retrieved=[RetrievedDoc(doc_id=i, score=1.0, text=text) for i in ids])


def test_public_prefix_features_by_hand():
    q = "Where was Leonard Nathan born?"  # terms: where was leonard nathan born
    assert feat.evidence_gap(q, "") == 1.0
    assert feat.evidence_gap(q, "Leonard Nathan was born in Los Angeles") == pytest.approx(1 / 5)
    assert feat.query_novelty(["leonard nathan"]) == 0.0  # zero before two searches
    # last {nathan, birthplace} vs before {leonard, nathan}: Jaccard 1/3 → novelty 2/3
    assert feat.query_novelty(["leonard nathan", "nathan birthplace"]) == pytest.approx(2 / 3)
    assert feat.document_novelty([["d1", "d2"]]) == 0.0
    assert feat.document_novelty([["d1", "d2"], ["d2", "d3", "d4", "d1"]]) == pytest.approx(0.5)
    row = feat.prefix_row(
        q, [_search("leonard nathan", ["d1"], "Leonard Nathan"), _search("nathan born", ["d1", "d9"], "born")]
    )
    tool_text = "Leonard Nathan\nborn\nborn"  # every passage of every search
    assert row == pytest.approx([np.log1p(len(q)), np.log1p(len(tool_text)), 2 / 5, 1 - 1 / 3, 0.5])


def test_sklearn_ridge_matches_the_closed_form():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3))
    y = np.clip(0.5 + 0.1 * x @ np.array([1.0, -0.5, 0.2])[:, None] + 0.05 * rng.normal(size=(30, 2)), 0, 1)
    train = np.arange(30) < 20
    ours = fitted.ridge_fit(x, y, train, 3.0)
    closed = ridge_fit_predict(x, y, train, 3.0)  # (ZᵀZ + λI)⁻¹Zᵀ(y − ȳ), clipped
    np.testing.assert_allclose(np.clip(ours, 0, 1), closed, atol=1e-10)


def test_ridge_cv_mean_guard_takes_the_mean_of_a_constant_target():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 2))
    groups = np.array([f"g{i // 2}" for i in range(40)], dtype=object)
    pred, info = fitted.ridge_cv(x, np.full(40, 0.3), np.ones(40, dtype=bool), groups, mean_guard=True)
    assert info["penalty"] == "mean" and info["folds"] == 4 and pred == pytest.approx(np.full(40, 0.3))


def test_beta_map_identity_and_recovery():
    q = np.linspace(0.05, 0.95, 7)
    assert fitted.beta_apply(q, 1.0, 1.0, 0.0) == pytest.approx(q)
    # outcomes drawn from the identity map: the fit recovers a ≈ b ≈ 1, c ≈ 0
    rng = np.random.default_rng(2)
    qs = rng.uniform(0.05, 0.95, size=4000)
    ys = [rng.binomial(1, p, size=4).astype(float) for p in qs]
    a, b, c = fitted.beta_fit(qs, ys, np.ones(len(qs), dtype=bool))
    assert a == pytest.approx(1.0, abs=0.15) and b == pytest.approx(1.0, abs=0.15) and c == pytest.approx(0.0, abs=0.15)


def test_signed_opportunity_scaling_by_hand():
    # p'_T = 0.6 + 0.2 = 0.8; f = +0.2 scaled by (1 − 0.8)/(1 − 0.6) = 0.5 → 0.1; p'_S = 0.9
    q_t, q_s = fitted.signed_opportunity(np.array([0.6]), np.array([0.8]), 0.2)
    assert (q_t[0], q_s[0]) == pytest.approx((0.8, 0.9))
    # p'_T = 0.3; f = −0.3 scaled by 0.3/0.6 = 0.5 → −0.15; p'_S = 0.15
    q_t, q_s = fitted.signed_opportunity(np.array([0.6]), np.array([0.3]), -0.3)
    assert (q_t[0], q_s[0]) == pytest.approx((0.3, 0.15))
    # the 0.05 floor: p̂_T = 1 → positive gains divide by 0.05
    q_t, q_s = fitted.signed_opportunity(np.array([0.99]), np.array([1.0]), -0.49)
    assert q_s[0] == pytest.approx(0.5 + 0.01 * 0.5 / 0.05)


def test_stop_offset_is_the_balanced_mean_residual():
    states = make_states(think=[[1, 1], [0, 0], [1, 0]], search=[[1, 1]] * 3, strata=["a", "a", "b"])
    q_t = np.array([0.5, 0.5, 0.5])
    # stratum a residuals 0.5, −0.5 → 0; stratum b 0 → offset 0; only state 0: 0.5
    assert fitted.stop_offset(q_t, states.think.mean_y, np.ones(3, dtype=bool), states.stratum) == 0.0
    assert fitted.stop_offset(q_t, states.think.mean_y, np.array([True, False, True]), states.stratum) == 0.25


def test_fitted_maps_run_on_a_study_table():
    rng = np.random.default_rng(3)
    n = 40
    p_t = rng.uniform(0.2, 0.8, n)
    think = [rng.binomial(1, p, 4) for p in p_t]
    search = [rng.binomial(1, min(p + 0.2, 1), 4) for p in p_t]
    states = make_states(think, search, strata=[["a", "b"][i % 2] for i in range(n)])
    states.features["public_prefix"] = rng.normal(size=(n, 5))
    dev = np.arange(n) < 24
    raw = Forecast(np.clip(p_t + 0.1, 0, 1), np.clip(p_t + 0.25, 0, 1))
    states = DevView.of(states, dev)
    for name in ("public_prefix", "beta", "direct_gain", "residual", "stop_offset", "stop_feedback"):
        fc = fitted.__dict__[f"{name}_calibration"](raw, states, dev)
        fc.check(name, n)
    for fn in (fitted.public_prefix_ridge, fitted.metadata_ridge):
        fn(states, dev).check(fn.__name__, n)
    with pytest.raises(fitted.ForecasterUnavailable, match="--text-head"):
        fitted.minilm_ridge(states, dev)


def test_ridge_cv_on_a_one_column_target_learns_it():
    x = np.arange(40, dtype=float)[:, None] % 2
    y = 0.2 + 0.5 * x[:, 0]
    groups = np.array([f"g{i // 2}" for i in range(40)], dtype=object)
    pred, info = fitted.ridge_cv(x, y, np.ones(40, dtype=bool), groups, mean_guard=True)
    assert info["penalty"] != "mean" and pred.shape == (40,) and np.abs(pred - y).max() < 0.01
