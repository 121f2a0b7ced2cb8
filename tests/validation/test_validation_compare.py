"""The checks of `validate`, on synthetic study rows (fast; the end-to-end runs are in test_validate)."""

from __future__ import annotations

import numpy as np

from branchpoint.validation.checks import aggregate, pooled_z
from branchpoint.validation.compare import StudyComparison, clustered_se, covers
from branchpoint.validation.quantities import QUANTITIES


def studies(rows: list[dict]) -> list[StudyComparison]:
    """Per-study rows as the comparisons `aggregate` reads."""
    return [StudyComparison(rows=r) for r in rows]


def row(est: float, truth: float, half: float, kind: str = "two_sided") -> dict:
    ci = [est - half, est + half]
    return {"estimate": est, "truth": truth, "ci": ci, "covered": covers(kind, truth, ci), "kind": kind}  # type: ignore[arg-type]


def test_an_unbiased_estimator_passes_and_a_biased_one_fails() -> None:
    rng = np.random.default_rng(0)
    good = [{"q": row(float(rng.normal(0.3, 0.05)), 0.3, 0.098)} for _ in range(30)]
    summary, checks = aggregate(studies(good))
    assert all(c.passed for c in checks) and 0.85 <= summary["q"]["coverage"] <= 1.0
    assert 0.75 <= summary["q"]["rms_z"] <= 1.25  # calibrated: the errors have the intervals' spread
    wide = [{"q": row(float(rng.normal(0.3, 0.05)), 0.3, 0.3)} for _ in range(30)]
    assert aggregate(studies(wide))[0]["q"]["rms_z"] < 0.5  # three times too wide: conservative
    bad = [{"q": row(float(rng.normal(0.4, 0.05)), 0.3, 0.098)} for _ in range(30)]
    _, checks = aggregate(studies(bad))
    assert {c.what for c in checks if not c.passed} >= {"coverage", "unbiased"}


def test_upper_bound_kind_is_one_sided_and_plug_in_is_not_checked() -> None:
    r2 = {**row(-0.05, 0.0, 0.01, "plug_in"), "reported": "a plug-in: reported"}
    rows = [{"oracle": row(0.6, 0.5, 0.02, "upper_bound"), "r2": dict(r2)} for _ in range(5)]
    summary, checks = aggregate(studies(rows))
    assert summary["oracle"]["coverage"] == 1.0
    assert all(c.passed for c in checks) and not [c for c in checks if c.quantity == "r2"]
    assert summary["r2"]["reported"]


def test_chi2_kind_sums_over_studies() -> None:
    fit = [{"fit": {"estimate": 12.0, "truth": 10.0, "ci": None, "covered": None, "kind": "chi2"}} for _ in range(3)]
    assert all(c.passed for c in aggregate(studies(fit))[1])
    misfit = [{"fit": {"estimate": 60.0, "truth": 10.0, "ci": None, "covered": None, "kind": "chi2"}} for _ in range(3)]
    assert not any(c.passed for c in aggregate(studies(misfit))[1])


def test_pooled_z_and_clustered_se() -> None:
    z, k = pooled_z([row(0.52, 0.5, 0.0392), row(0.52, 0.5, 0.0392)])  # se 0.02 each
    assert k == 2 and abs(z - 0.04 / np.sqrt(2 * 0.02**2)) < 1e-3
    err = np.array([1.0, 1.0, -1.0, -1.0])
    assert clustered_se(err, ["a", "a", "b", "b"])[0] > clustered_se(err, ["a", "b", "c", "d"])[0]


def test_clustered_se_is_cr2_with_satterthwaite_df() -> None:
    # equal clusters: CR2 = sqrt(Σ S_g² / (1 − 1/G)) / n and the degrees of freedom are G − 1
    rng = np.random.default_rng(3)
    err = rng.normal(size=40)
    clusters = [str(i % 8) for i in range(40)]
    sums = np.array([np.sum(err[i::8] - err.mean()) for i in range(8)])
    se, df = clustered_se(err, clusters)
    assert abs(se - np.sqrt(np.sum(sums**2) / (1 - 1 / 8)) / 40) < 1e-12 and abs(df - 7) < 1e-9
    # one large cluster among small ones: fewer effective degrees of freedom than G − 1
    _, df_uneven = clustered_se(err, ["big"] * 26 + [str(i) for i in range(14)])
    assert df_uneven < 14
    # the interval it gives covers at the nominal rate for independent errors in unequal clusters
    from scipy import stats as sps

    sizes = [12, 9, 7, 5, 4, 3, 3, 2, 2, 1, 1, 1]
    clusters = [str(g) for g, k in enumerate(sizes) for _ in range(k)]
    hits = []
    for _ in range(2000):
        e = rng.binomial(4, 0.3, size=len(clusters)) / 4 - 0.3
        se, df = clustered_se(e, clusters)
        hits.append(abs(e.mean()) <= sps.t.ppf(0.975, df) * se)
    assert 0.935 <= np.mean(hits) <= 0.97
    assert np.isnan(clustered_se(np.array([0.1, 0.2]), ["a", "a"])[0])


def test_every_quantity_names_where_its_estimate_is() -> None:
    names = [q.name for q in QUANTITIES]
    assert len(names) == len(set(names))
    assert all(q.source in ("value", "metrics") and q.estimate for q in QUANTITIES)


def test_paths_may_hold_price_keys_with_dots() -> None:
    from branchpoint.validation.quantities import at_path

    d = {"utility": {"by_price": {"0": {"a": 1}, "0.005": {"a": {"utility": 2}}}}}
    assert at_path(d, "utility.by_price.0.005.a.utility") == 2 and at_path(d, "utility.by_price.0.a") == 1
    import pytest

    with pytest.raises(KeyError):
        at_path(d, "utility.by_price.0.01.a")


def test_selection_draws_choose_search_by_hand() -> None:
    from branchpoint.validation.truths import p_choose_search

    # two draws each: S wins when its successes exceed THINK's (ties go to THINK)
    pt, ps = 0.5, 0.8
    a = [(1 - pt) ** 2, 2 * pt * (1 - pt), pt**2]
    b = [(1 - ps) ** 2, 2 * ps * (1 - ps), ps**2]
    want = sum(a[i] * b[j] for i in range(3) for j in range(3) if j > i)
    assert abs(p_choose_search(pt, ps, 2, 2, 0.0) - want) < 1e-12
    assert abs(p_choose_search(pt, ps, 2, 2, 0.6) - a[0] * b[2]) < 1e-12  # only 1.0 − 0.0 exceeds 0.6
    assert p_choose_search(pt, ps, 2, 2, 1.0) == 0.0


def test_minimal_searches_expectation_by_hand() -> None:
    from branchpoint.sim.study_truth import expected_min_searches, vote_passes

    # m = 4 votes pass with at least 2 successes; m = 3 with at least 2; no votes never pass
    p = 0.3
    assert abs(vote_passes(p, 4) - (1 - (1 - p) ** 4 - 4 * p * (1 - p) ** 3)) < 1e-12
    assert abs(vote_passes(p, 3) - (3 * p * p * (1 - p) + p**3)) < 1e-12
    assert vote_passes(0.9, 0) == 0.0
    # k = 3 searches, truncation points t = 0, 1, 2 passing with q0, q1, q2 (given in any order)
    q0, q1, q2 = 0.2, 0.5, 0.7
    want = 0 * q0 + 1 * (1 - q0) * q1 + 2 * (1 - q0) * (1 - q1) * q2 + 3 * (1 - q0) * (1 - q1) * (1 - q2)
    assert abs(expected_min_searches(3, [(2, q2), (0, q0), (1, q1)]) - want) < 1e-12
    assert expected_min_searches(2, []) == 2.0 and expected_min_searches(2, [(0, 1.0), (1, 1.0)]) == 0.0
    # a Monte Carlo of the estimator's rule (smallest passing t, else k) agrees
    rng = np.random.default_rng(0)
    ps = [0.1, 0.45, 0.8]
    qs = [(t, vote_passes(pt, 4)) for t, pt in enumerate(ps)]
    draws = []
    for _ in range(20000):
        passing = [t for t, pt in enumerate(ps) if rng.binomial(4, pt) * 2 >= 4]
        draws.append(min(passing, default=3))
    assert abs(np.mean(draws) - expected_min_searches(3, qs)) < 4 * np.std(draws) / np.sqrt(len(draws))


def test_fit_check_uses_the_exact_variance_of_pearsons_statistic() -> None:
    from scipy import stats as sps

    from branchpoint.validation.checks import fit_p_value
    from branchpoint.validation.compare import pearson_variance

    rng = np.random.default_rng(5)
    m, p = 4, np.array([0.99] * 150 + [0.5] * 50 + [0.02] * 100)
    # the exact variance against simulated binomial draws
    s = rng.binomial(m, p[:, None], size=(len(p), 4000))
    terms = (s - m * p[:, None]) ** 2 / (m * p * (1 - p))[:, None]
    assert abs(terms.var(axis=1).mean() / np.mean([pearson_variance(m, x) for x in p]) - 1) < 0.15
    # a correct model: χ²_df rejects far too often at α = 0.01, the two-moment reference does not
    x2 = terms.sum(axis=0)
    var = float(sum(pearson_variance(m, x) for x in p))
    naive = np.mean([sps.chi2.sf(x, len(p)) < 0.01 for x in x2])
    exact = np.mean([fit_p_value(float(x), float(len(p)), var) < 0.01 for x in x2])
    assert naive > 0.04 and exact < 0.02
    assert fit_p_value(float("inf"), 10.0, 30.0) == 0.0


def test_an_unbounded_estimate_counts_for_coverage_only() -> None:
    rows = [{"q": row(0.3 + 0.01 * (i % 3 - 1), 0.3, 0.05)} for i in range(9)]
    rows.append({"q": {"estimate": float("inf"), "truth": 0.3, "ci": [float("inf"), float("inf")], "covered": False}})
    rows[-1]["q"]["kind"] = "two_sided"
    summary, checks = aggregate(studies(rows))
    assert summary["q"]["coverage"] == 0.9 and summary["q"]["non_finite_estimates"] == 1
    assert np.isfinite(summary["q"]["mean_error"]) and np.isfinite(summary["q"]["rms_z"])
    assert all(c.passed for c in checks)


def test_the_fit_p_value_is_exact_under_the_truth_and_finds_a_misfit() -> None:
    """The fit check's p-value simulates Pearson's X² under Binomial(m, p_true): uniform under a
    correct model, where the two-moment reference's tail is too light (0.36% rejected at 0.001
    on these states), and near 0 when the outcomes come from other probabilities."""
    from scipy import stats as sps

    from branchpoint.validation.checks import simulated_fit_p_value

    rng = np.random.default_rng(11)
    m, p = 4, rng.uniform(0.01, 0.99, 75)
    groups = [[m, float(x)] for x in p]

    def x2_of(s: np.ndarray) -> float:
        return float(np.sum((s - m * p) ** 2 / (m * p * (1 - p))))

    pvals = [simulated_fit_p_value(x2_of(rng.binomial(m, p)), groups, draws=999, seed=i) for i in range(400)]
    assert sps.kstest(pvals, "uniform").pvalue > 0.001
    assert 0.02 <= np.mean(np.array(pvals) < 0.05) <= 0.09
    shifted = np.clip(p + 0.15, 0, 1)
    assert simulated_fit_p_value(x2_of(rng.binomial(m, shifted)), groups, draws=999) < 0.01
    assert simulated_fit_p_value(float("inf"), groups) == 0.0
