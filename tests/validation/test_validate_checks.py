"""validate's checks can fail: a missing estimate, a check with nothing to run on, a state the
pipeline lost, coverage outside its documented target (fast, synthetic rows; the end-to-end run
of every planted bug is test_validate_mutants)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from branchpoint.sim.study_truth import StateTruth, StudyTruth, balanced_mean
from branchpoint.validation.checks import aggregate, coverage_target_p, detectable_bias, not_applicable
from branchpoint.validation.compare import StudyComparison, compare_study, states_row
from branchpoint.validation.study import StudyResult
from tests.evaluation.value.helpers import make_states


def row(est: float, truth: float, half: float) -> dict:
    ci = [est - half, est + half]
    return {"estimate": est, "truth": truth, "ci": ci, "covered": abs(est - truth) <= half, "kind": "two_sided"}


def study(states_think: list[list[float]], truth_repeats: list[tuple[int, int]], keys: list[int]) -> StudyResult:
    """A study whose state table has `states_think` rows (SEARCH all 1) and whose truth knows
    the states `keys` (p 0.5) with `truth_repeats` THINK / SEARCH branches."""
    table = make_states(states_think, [[1.0] * len(t) for t in states_think])
    truth = StudyTruth(
        [
            StateTruth(
                (f"p{i}", f"c{i}"),
                f"q{i}",
                "?",
                "s",
                True,
                "initial",
                {"THINK": t, "SEARCH": s},
                {"THINK": 0.5, "SEARCH": 0.5},
            )
            for i, (t, s) in zip(keys, truth_repeats)
        ],
        {},
        {},
        [],
    )
    return StudyResult(1, Path("."), {}, {}, table, truth)


def test_the_states_check_finds_lost_short_and_extra_states() -> None:
    same = study([[1, 0], [0, 1]], [(2, 2), (2, 2)], [0, 1])
    assert states_row(same)["passed"]
    lost = study([[1, 0]], [(2, 2), (2, 2)], [0, 1])  # the pipeline dropped state 1
    short = study([[1, 0], [0, 1]], [(3, 2), (2, 2)], [0, 1])  # a THINK branch of state 0 lost
    extra = study([[1, 0], [0, 1]], [(2, 2)], [0])  # a state the truth has no branches for
    assert (states_row(lost)["missing"], states_row(short)["other_repeats"], states_row(extra)["extra"]) == (1, 1, 1)
    assert not any(states_row(r)["passed"] for r in (lost, short, extra))
    one_repeat = study([[1, 0]], [(2, 2), (1, 2)], [0, 1])  # state 1 cannot be scored: not expected
    assert states_row(one_repeat)["passed"]
    _, checks = aggregate([compare_study(lost), compare_study(same)])
    (states,) = [c for c in checks if c.quantity == "states"]
    assert not states.passed and "1 states missing" in states.detail


def test_a_missing_estimate_fails_and_a_quantity_that_does_not_apply_does_not() -> None:
    rows = {"q": row(0.3, 0.3, 0.05)}
    studies = [StudyComparison(rows=dict(rows), missing={"gone": "value.json gone"}) for _ in range(3)]
    studies += [StudyComparison(rows=dict(rows), not_applicable={"priced": "token costs are not modelled"})]
    _, checks = aggregate(studies)
    failed = [c for c in checks if not c.passed]
    assert [(c.quantity, c.what) for c in failed] == [("gone", "estimate present")]
    assert "3/4 studies" in failed[0].detail
    assert not_applicable(studies) == {"priced": {"reason": "token costs are not modelled", "studies": 1}}


def test_a_check_that_cannot_run_fails_unless_too_few_studies_were_asked_for() -> None:
    # three studies whose estimate is +inf (no finite error): the bias test has nothing to run on
    inf = {"estimate": math.inf, "truth": 0.3, "ci": [math.inf, math.inf], "covered": False, "kind": "two_sided"}
    _, checks = aggregate([StudyComparison(rows={"r": dict(inf)}) for _ in range(3)])
    assert any(c.what == "coverage" and not c.passed for c in checks)  # an interval of +inf covers no truth
    # studies whose estimates are missing (not merely unbounded) leave the bias test nothing to run on
    gone = {"estimate": None, "truth": 0.3, "ci": None, "covered": None, "kind": "two_sided"}
    _, checks = aggregate([StudyComparison(rows={"r": dict(gone)}) for _ in range(3)])
    assert any(c.what == "unbiased" and not c.passed and "could not run" in c.detail for c in checks)
    # one unbounded estimate among three (over-search % is +inf when no truncation needed a search):
    # its coverage is checked, the bias test over two finite errors is not asked for, and says why
    point = {"ci": None, "covered": None, "kind": "two_sided", "truth": 0.3}
    rows = [dict(inf, covered=True), dict(point, estimate=0.3), dict(point, estimate=0.31)]
    summary, checks = aggregate([StudyComparison(rows={"r": r}) for r in rows])
    assert not [c for c in checks if c.what == "unbiased"]
    assert "non-finite" in summary["r"]["not_checked"]
    # an interval that no study gave: the coverage check cannot run
    none = {"estimate": 0.3, "truth": 0.3, "ci": [None, None], "covered": None, "kind": "two_sided"}
    _, checks = aggregate([StudyComparison(rows={"r": dict(none)}) for _ in range(3)])
    assert any(c.what == "coverage" and not c.passed for c in checks)
    # two studies: a bias test over studies is not asked for, and the summary says so
    summary, checks = aggregate([StudyComparison(rows={"b": row(0.3, 0.3, 0.0)})] * 2)
    assert not [c for c in checks if c.what == "unbiased"] and "3 or more" in summary["b"]["not_checked"]


def test_coverage_is_checked_against_its_documented_target() -> None:
    n = 40
    # by hand: P(X ≤ 31 | 0.9) and P(X ≥ 40 | 0.99)
    low = sum(math.comb(n, k) * 0.9**k * 0.1 ** (n - k) for k in range(32))
    assert abs(coverage_target_p(31, n) - min(1.0, 2 * low)) < 1e-12
    assert abs(coverage_target_p(n, n) - min(1.0, 2 * 0.99**n)) < 1e-12
    assert coverage_target_p(36, n) == 1.0 and coverage_target_p(28, n) < 0.01 < coverage_target_p(31, n)
    assert coverage_target_p(600, 600) < 0.01  # always covered over many studies: too wide an interval
    rng = np.random.default_rng(1)
    rows = [{"q": row(float(rng.normal(0.3, 0.05)), 0.3, 0.05)} for _ in range(40)]
    summary, checks = aggregate([StudyComparison(rows=r) for r in rows])
    (target,) = [c for c in checks if c.what == "coverage target"]
    covered = round(summary["q"]["coverage"] * 40)
    assert summary["q"]["coverage_p"] == coverage_target_p(covered, 40)
    assert target.passed == (coverage_target_p(covered, 40) >= 0.01)
    few = aggregate([StudyComparison(rows=r) for r in rows[:19]])[1]
    assert not [c for c in few if c.what == "coverage target"]  # fewer than 20 studies: not checked


def test_the_detectable_bias_is_what_the_bias_test_finds_four_times_in_five() -> None:
    rng = np.random.default_rng(2)
    se, k, alpha = 0.02, 10, 0.001
    bias = detectable_bias(se / math.sqrt(k), alpha)
    z_crit = sps.norm.ppf(1 - alpha / 2)
    errors = rng.normal(bias, se, size=(4000, k))
    z = errors.sum(axis=1) / math.sqrt(k * se * se)
    assert abs(np.mean(np.abs(z) > z_crit) - 0.8) < 0.03
    rows = [{"q": row(0.3 + e, 0.3, sps.norm.ppf(0.975) * se)} for e in errors[0]]
    summary, _ = aggregate([StudyComparison(rows=r) for r in rows])
    assert summary["q"]["detectable_bias"] == pytest.approx(bias, rel=1e-6)
    # with a second bias-tested quantity Holm first asks p < α/2 of each: the power is stated there
    two = [{"q": row(0.3 + e, 0.3, sps.norm.ppf(0.975) * se), "r": row(0.5, 0.5, 0.04)} for e in errors[0]]
    summary, _ = aggregate([StudyComparison(rows=r) for r in two])
    bias2 = detectable_bias(se / math.sqrt(k), alpha / 2)
    assert (
        summary["q"]["detectable_bias"] == pytest.approx(bias2, rel=1e-6) and summary["q"]["detectable_at"] == alpha / 2
    )
    z2 = rng.normal(bias2, se, size=(4000, k)).sum(axis=1) / math.sqrt(k * se * se)
    assert abs(np.mean(np.abs(z2) > sps.norm.ppf(1 - alpha / 4)) - 0.8) < 0.03


def test_the_truths_balanced_mean_weights_strata_equally() -> None:
    assert balanced_mean(np.array([1.0, 1.0, 1.0, 0.0]), ["a", "a", "a", "b"]) == 0.5
    assert balanced_mean(np.array([0.2, 0.4]), ["x", "x"]) == pytest.approx(0.3)


def test_float_rounding_of_a_difference_that_is_zero_by_construction_is_no_bias() -> None:
    # a factorial cell that is the best constant: estimate and bounds are ±1e-16, not a bias
    rows = [(-1.1e-16, [-2.2e-16, 1.1e-16]), (-3.3e-16, [-2.2e-16, 0.0]), (0.0, [-2.2e-16, 1.1e-16])]
    studies = [
        StudyComparison(rows={"cell": {"estimate": e, "truth": 0.0, "ci": ci, "covered": True, "kind": "two_sided"}})
        for e, ci in rows
    ]
    _, checks = aggregate(studies)
    assert all(c.passed for c in checks), checks


def test_float_rounding_that_leans_one_way_is_no_bias_but_a_small_real_bias_is() -> None:
    # the canary's Brier is ¼ exactly; over 40 studies its errors were -7e-17 ± 1.2e-17 (SE): t ≈ 6
    rng = np.random.default_rng(0)
    leaning = -7e-17 + rng.normal(0, 7e-17, 40)
    _, checks = aggregate([StudyComparison(rows={"canary": row(0.25 + e, 0.25, 0.0)}) for e in leaning])
    bias = [c for c in checks if c.what == "unbiased"]
    assert bias and all(c.passed for c in bias) and "float rounding" in bias[0].detail, bias
    real = 1e-3 + rng.normal(0, 1e-4, 40)
    _, checks = aggregate([StudyComparison(rows={"canary": row(0.25 + e, 0.25, 0.0)}) for e in real])
    assert not next(c for c in checks if c.what == "unbiased").passed


def test_each_family_of_tests_holds_its_level_over_the_run() -> None:
    """Sixty quantities over 3 studies: one with 1/3 covered (P = 0.007 at 95%, a failure when
    each test stood at 0.01 alone) passes the coverage family's Holm step-down; 0/3 covered
    (P = 1.25e-4 < 0.01/60) still fails; a pooled z of 6 fails the bias family among 60 tests."""
    rows = [{f"q{k}": row(0.30, 0.30, 0.05) for k in range(60)} for _ in range(3)]
    rows[0]["q1"] = row(0.40, 0.30, 0.05)  # q1: 1/3 covered
    rows[1]["q1"] = row(0.40, 0.30, 0.05)
    for r in rows:  # q2: 0/3 covered, and biased far beyond chance
        r["q2"] = row(0.40, 0.30, 0.05)
    comparisons = [StudyComparison(rows=r) for r in rows]
    _, checks = aggregate(comparisons)
    verdict = {(c.quantity, c.what): c for c in checks}
    assert verdict[("q1", "coverage")].passed and "Holm over 60 coverage tests" in verdict[("q1", "coverage")].detail
    assert not verdict[("q2", "coverage")].passed and not verdict[("q2", "unbiased")].passed
    assert all(c.passed for c in checks if c.quantity not in ("q1", "q2"))
