"""The support-component bootstrap: seeded, component-wise, strata weighted equally per resample."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.evaluation.value.bootstrap import (
    bootstrap_means,
    bootstrap_means_loop,
    home_groups,
    percentile_interval,
    single_component_strata,
)


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(n, 3))
    components = np.array([f"c{i // 3}" for i in range(n)], dtype=object)  # 3 states per component
    strata = np.array([["x", "y", "z"][i % 3] for i in range(n)], dtype=object)
    return values, components, strata


def test_same_seed_same_resamples_other_seed_others():
    values, comps, strata = _data()
    a = bootstrap_means(values, comps, strata, resamples=1200, seed=42)
    b = bootstrap_means(values, comps, strata, resamples=1200, seed=42)
    c = bootstrap_means(values, comps, strata, resamples=1200, seed=43)
    assert a.shape == (1200, 3)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_vectorised_equals_the_plain_loop():
    values, comps, strata = _data(30)
    fast = bootstrap_means(values, comps, strata, resamples=40, seed=3)
    slow = bootstrap_means_loop(values, comps, strata, resamples=40, seed=3)
    np.testing.assert_allclose(fast, slow, atol=1e-12)


def test_components_move_together():
    # component A: two states worth 1; component B: one state worth 0 (one stratum)
    values = np.array([1.0, 1.0, 0.0])
    comps = np.array(["A", "A", "B"], dtype=object)
    strata = np.array(["s"] * 3, dtype=object)
    means = bootstrap_means(values, comps, strata, resamples=500, seed=0, within_strata=False)[:, 0]
    # draws (A,A) → 1, (B,B) → 0, (A,B) → 2/3; state-wise resampling would also give 1/3
    assert set(np.round(means, 6)) <= {0.0, round(2 / 3, 6), 1.0}
    assert len(set(np.round(means, 6))) == 3
    # within strata (Rao–Wu): K − 1 = 1 draw of the stratum's 2 components → A (1) or B (0)
    within = bootstrap_means(values, comps, strata, resamples=500, seed=0)[:, 0]
    assert set(within.tolist()) == {0.0, 1.0}


def test_rao_wu_variance_is_the_unbiased_one_for_equal_components():
    # one stratum, K = 4 components of one state each: bootstrap variance of the mean ≈ s²/K
    values = np.array([0.0, 1.0, 2.0, 5.0])
    comps = np.array(list("abcd"), dtype=object)
    means = bootstrap_means(values, comps, np.array(["s"] * 4, dtype=object), resamples=20_000, seed=4)[:, 0]
    # K − 1 = 3 draws: Var = σ²_pop / 3 = (s²·3/4)/3 = s²/4, s² the unbiased sample variance
    assert means.var() == pytest.approx(values.var(ddof=1) / 4, rel=0.05)


def test_strata_weigh_equally_in_each_resample():
    # stratum a: 3 states worth 1; stratum b: 1 state worth 0; each state its own component
    values = np.array([1.0, 1.0, 1.0, 0.0])
    strata = np.array(["a", "a", "a", "b"], dtype=object)
    comps = np.array(list("pqrs"), dtype=object)
    across = bootstrap_means(values, comps, strata, resamples=2000, seed=1, within_strata=False)[:, 0]
    # across strata: both drawn → 0.5 whatever the counts; b missing → 1 (in (3/4)^4 ≈ 32% of resamples)
    assert set(np.round(across, 9)) <= {0.0, 0.5, 1.0}
    assert 0.25 < np.mean(across == 1.0) < 0.39
    # within strata (the default): b's single component is drawn in every resample
    within = bootstrap_means(values, comps, strata, resamples=2000, seed=1)[:, 0]
    assert np.all(within == 0.5)
    assert single_component_strata(comps, strata) == ["b"]


def test_within_strata_draws_keep_each_stratum_size():
    # components: A (2 states in x), B (1 in x, 2 in y: home y), C (1 in y), D (1 in x)
    comps = np.array(["A", "A", "B", "B", "B", "C", "D"], dtype=object)
    strata = np.array(["x", "x", "x", "y", "y", "y", "x"], dtype=object)
    groups = home_groups(comps, strata)
    assert [g.tolist() for g in groups] == [[0, 3], [1, 2]]  # x: A, D; y: B, C
    values = np.arange(7, dtype=float)
    fast = bootstrap_means(values, comps, strata, resamples=50, seed=2)
    slow = bootstrap_means_loop(values, comps, strata, resamples=50, seed=2)
    np.testing.assert_allclose(fast, slow, atol=1e-12)
    assert single_component_strata(comps, strata) == []


def test_percentile_interval_ignores_nan_resamples():
    samples = np.array([[np.nan, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, np.nan]])
    lo, hi = percentile_interval(samples, 0.5)
    assert lo[0] == 1.5 and hi[0] == 2.5
    lo, hi = percentile_interval(np.full((5, 1), np.nan))
    assert np.isnan(lo[0]) and np.isnan(hi[0])


def test_few_component_strata_are_named():
    from branchpoint.evaluation.value.bootstrap import few_component_strata

    comps = np.array(["a", "b", "c", "d", "e", "f", "g", "h"], dtype=object)
    strata = np.array(["x", "x", "y", "y", "y", "y", "y", "z"], dtype=object)
    assert few_component_strata(comps, strata) == {"x": 2}  # y has 5, z has 1 (single: withheld instead)
