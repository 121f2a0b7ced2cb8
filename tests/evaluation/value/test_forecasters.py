"""Forecasters: registry, baselines, forecast files, calibration maps fitted on dev rows only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import (
    Forecast,
    affine_calibration,
    forecaster,
    historical_mean,
    isotonic_calibration,
    isotonic_fit,
    logistic_calibration,
    read_forecasts,
    ridge_calibration,
    stratum_prior,
)
from branchpoint.evaluation.value.scoring import score
from branchpoint.evaluation.value.study import collect_forecasts
from tests.evaluation.value.helpers import make_states


def test_historical_mean_and_stratum_prior_use_dev_rows_only():
    states = make_states(
        [[1, 1], [0, 0], [1, 0], [0, 0]], [[1, 1], [1, 1], [0, 0], [1, 1]], strata=["a", "a", "b", "c"]
    )
    dev = np.array([True, True, True, False])
    hm = historical_mean(DevView.of(states, dev), dev)
    # stratum-balanced over dev: T = mean(a: 0.5, b: 0.5) = 0.5; S = mean(a: 1, b: 0) = 0.5
    assert hm.q_think.tolist() == [0.5] * 4 and hm.q_search.tolist() == [0.5] * 4
    sp = stratum_prior(DevView.of(states, dev), dev)
    assert sp.q_think.tolist() == [0.5, 0.5, 0.5, 0.5]
    assert sp.q_search.tolist() == [1.0, 1.0, 0.0, 0.5]  # stratum c has no dev rows: global mean
    assert sp.info == {"rows_on_global_fallback": 1}


def test_a_new_forecaster_is_one_decorated_function(monkeypatch):
    from branchpoint.registry import REGISTRY

    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))  # registered for this test only

    @forecaster("search_when_nothing_in_hand")
    def rule(states, dev):
        return np.where(states.boundary_kind == "initial", 0.1, 0.6), np.full(len(states), 0.7)

    states = make_states([[0, 0], [1, 1]], [[1, 1], [1, 0]], kinds=["initial", "after_search_k"])
    dev = np.array([False, False])
    fcs, _meta, skipped = collect_forecasts(states, dev)
    assert fcs["search_when_nothing_in_hand"].q_think.tolist() == [0.1, 0.6]
    assert "historical_mean" in skipped  # fitted baselines need dev rows
    report = score(states, dev, fcs, ValueConfig(resamples=50))
    assert set(report["brier"]) == {"search_when_nothing_in_hand"}

    @forecaster("broken")
    def broken(states, dev):
        return np.full(len(states), 1.5), np.full(len(states), 0.5)

    with pytest.raises(InputError, match='forecaster "broken": q_think must be probabilities'):
        collect_forecasts(states, dev)


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_forecast_file_errors_name_file_line_and_field(tmp_path):
    states = make_states([[0, 1]], [[1, 1]])
    path = write_lines(
        tmp_path / "f.jsonl",
        [
            {"parent_execution_id": "p0", "checkpoint_id": "c0", "q_think": 0.2, "q_search": 0.9},
            {"parent_execution_id": "p0", "checkpoint_id": "c0", "q_think": 0.2},
        ],
    )
    expected = r'f.jsonl line 2: field "q_search" missing \(expected \{"parent_execution_id"'
    with pytest.raises(InputError, match=expected):
        read_forecasts(path, states)
    write_lines(path, [{"parent_execution_id": "p0", "checkpoint_id": "c0", "q_think": "high", "q_search": 0.9}])
    with pytest.raises(InputError, match=r'line 1: field "q_think" must be a number in \[0, 1\]'):
        read_forecasts(path, states)
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: invalid JSON"):
        read_forecasts(path, states)


def test_forecasts_for_unknown_or_missing_states_are_counted(tmp_path):
    states = make_states([[0, 1], [1, 1], [0, 0]], [[1, 1], [0, 1], [1, 0]])
    states.excluded_keys = {("p9", "c9")}
    path = write_lines(
        tmp_path / "f.jsonl",
        [
            {"parent_execution_id": "p0", "checkpoint_id": "c0", "q_think": 0.1, "q_search": 0.9},
            {"parent_execution_id": "p0", "checkpoint_id": "c0", "q_think": 0.2, "q_search": 0.8},
            {"parent_execution_id": "p1", "checkpoint_id": "c1", "q_think": 0.3, "q_search": 0.7},
            {"parent_execution_id": "nope", "checkpoint_id": "c1", "q_think": 0.3, "q_search": 0.7},
            {"parent_execution_id": "p9", "checkpoint_id": "c9", "q_think": 0.3, "q_search": 0.7},
        ],
    )
    fc = read_forecasts(path, states)
    assert fc.q_think.tolist() == [0.2, 0.3, 0.5] and fc.q_search.tolist() == [0.8, 0.7, 0.5]
    info = fc.info
    assert (info["n_unknown"], info["n_unscored_state"], info["n_duplicate"], info["n_missing"]) == (1, 1, 1, 1)
    assert info["unknown_examples"] == ["line 4: nope / c1"]


def _calibration_case(n=80, seed=0):
    rng = np.random.default_rng(seed)
    p_t, p_s = rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n)
    think = [(rng.uniform(size=8) < p).astype(float) for p in p_t]
    search = [(rng.uniform(size=8) < p).astype(float) for p in p_s]
    states = make_states(think, search, components=[f"g{i // 2}" for i in range(n)])
    dev = np.arange(n) < n // 2
    return states, dev, p_t, p_s


def test_ridge_picks_small_penalty_for_signal_and_large_for_noise():
    states, dev, p_t, p_s = _calibration_case()
    informative = Forecast(0.2 + 0.5 * p_t, 0.3 + 0.4 * p_s)  # affine in the truth
    fitted = ridge_calibration(informative, DevView.of(states, dev), dev)
    assert fitted.info["penalty"] <= 1.0 and fitted.info["folds"] == 5
    assert np.corrcoef(fitted.q_search[~dev], p_s[~dev])[0, 1] > 0.8
    noise = np.random.default_rng(9).uniform(size=(2, len(states)))
    flat = ridge_calibration(Forecast(noise[0], noise[1]), DevView.of(states, dev), dev)
    assert flat.info["penalty"] == 100.0
    assert np.ptp(flat.q_think) < np.ptp(fitted.q_think)


def test_calibrations_never_look_at_test_outcomes():
    states, dev, p_t, p_s = _calibration_case()
    raw = Forecast(np.clip(p_t + 0.1, 0, 1), np.clip(p_s - 0.1, 0, 1))
    before = {
        c.__name__: c(raw, DevView.of(states, dev), dev)
        for c in (ridge_calibration, affine_calibration, logistic_calibration, isotonic_calibration)
    }
    for i in np.flatnonzero(~dev):  # flip every test outcome
        states.think.y[i] = 1.0 - states.think.y[i]
    states.think.__post_init__()
    for cal in (ridge_calibration, affine_calibration, logistic_calibration, isotonic_calibration):
        after = cal(raw, DevView.of(states, dev), dev)
        np.testing.assert_array_equal(after.q_think, before[cal.__name__].q_think)


def test_affine_logistic_isotonic_maps():
    states = make_states([[0, 0], [0, 1], [1, 1], [1, 1]], [[0, 0], [0, 0], [1, 1], [1, 1]])
    dev = np.ones(4, dtype=bool)
    raw = Forecast([0.2, 0.4, 0.6, 0.8], [0.5, 0.5, 0.5, 0.5])
    view = DevView.of(states, dev)
    aff = affine_calibration(raw, view, dev)
    # least squares of Ȳ_T = (0, .5, 1, 1) on q_T = (.2, .4, .6, .8): slope cov/var = 0.0875/0.05
    assert aff.info["think"]["beta"] == pytest.approx(2.0 * 0.175 / 0.2)
    assert aff.info["search"]["beta"] == 0.0 and aff.q_search.tolist() == [0.5] * 4
    log = logistic_calibration(raw, view, dev)
    assert np.all(np.diff(log.q_think) > 0) and np.all((log.q_think > 0) & (log.q_think < 1))
    iso = isotonic_calibration(raw, view, dev)
    assert iso.q_think.tolist() == [0.0, 0.5, 1.0, 1.0]
    kx, ky = isotonic_fit(np.array([1.0, 2, 3, 4, 4]), np.array([1.0, 3, 2, 5, 3]), np.ones(5))
    # equal x pooled (4 → 4.0), then PAV pools 3 and 2 → 2.5
    assert kx.tolist() == [1.0, 2.0, 3.0, 4.0] and ky.tolist() == [1.0, 2.5, 2.5, 4.0]
